// Command ztls is the one command-line tool over the ztls packages: a TLS 1.3
// and ZTLS server and client, a T-DNS resolver and authoritative server, the
// Z-data tools and the testbed.
//
// Each subcommand lives in its own file and registers itself on rootCmd in an
// init function, so the packages' logic stays out of this folder.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:   "ztls",
	Short: "Secure connections that start as fast as physics allows",
	Long: `ztls removes the round trips before the first response of a secure connection:

  ZTLS       the server's key share and certificate come from DNS, so the first
             request rides with the ClientHello (0-RTT on first contact)
  TurboTLS   the first TLS flights go over UDP while TCP's handshake runs
  T-DNS      DNS over TCP and TLS as fast as UDP

Start with 'ztls demo' to see it on this machine, then 'ztls serve' and
'ztls connect' to use it.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	rootCmd.Version = version()
	rootCmd.SetVersionTemplate("{{.Version}}\n")
	rootCmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		// Inherited by every subcommand: a mistyped flag points to the list.
		return fmt.Errorf("%w; see '%s --help' for its flags", err, cmd.CommandPath())
	})
}

// version is what --version prints: the module's version and the commit
// it was built from, as the Go toolchain recorded them in the binary.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "ztls: no build information in this binary"
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ztls %s (module %s)\n", info.Main.Version, info.Main.Path)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, "commit %s", rev)
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " of %s", t)
		}
		if settings["vcs.modified"] == "true" {
			b.WriteString(", with uncommitted changes")
		}
		b.WriteString("\n")
	} else {
		b.WriteString("commit unknown (built outside a git checkout, or with -buildvcs=false)\n")
	}
	fmt.Fprintf(&b, "built with %s for %s/%s", info.GoVersion, runtime.GOOS, runtime.GOARCH)
	return b.String()
}

func main() {
	// After every init: the commands are all registered.
	wrapDaemons()
	if err := rootCmd.Execute(); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}
