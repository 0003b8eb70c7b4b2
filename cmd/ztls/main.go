// Command ztls is the one command-line tool over the ztls packages: a TLS 1.3
// and ZTLS server and client, a T-DNS resolver and authoritative server, the
// Z-data tools and the testbed.
//
// Each subcommand lives in its own file and registers itself on rootCmd in an
// init function, so the packages' logic stays out of this folder.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/internal/clock"
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
	addSecretFiles(rootCmd)
	// The warning goes to a person (a terminal), not into the logs and
	// outputs that tests running on a shifted clock read.
	warn := io.Discard
	if isTerminal(os.Stderr) {
		warn = os.Stderr
	}
	if err := checkClockOffset(warn); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
	if err := rootCmd.Execute(); err != nil {
		err = withHint(err)
		printError(os.Stderr, err)
		os.Exit(exitCode(err))
	}
}

// checkClockOffset refuses a ZTLS_CLOCK_OFFSET that is not a duration, and
// a ZTLS_CLOCK_RATE or ZTLS_CLOCK_ANCHOR the clock cannot use, and warns
// when either is set: every validity, rotation and replay decision of this
// process then runs on a shifted or faster clock (internal/clock; the
// tests use the offset to run at chosen instants of a key period, the
// soak the rate to run many periods in little time).
func checkClockOffset(w io.Writer) error {
	d, err := clock.Offset()
	if err != nil {
		return fmt.Errorf("%v; unset it to use the system clock", err)
	}
	rate, anchor, err := clock.Rate()
	if err != nil {
		return fmt.Errorf("%v; unset %s and %s to run the clock at the system's rate", err, clock.EnvRate, clock.EnvAnchor)
	}
	if rate != 1 {
		fmt.Fprintf(w, "ztls: warning: %s=%g from %s (%s=%s): this process's clock runs %g times as fast as the system's and reads %s (for tests only: durations between two of its readings are scaled, timeouts and timers are not)\n",
			clock.EnvRate, rate, anchor.UTC().Format(time.RFC3339Nano), clock.EnvOffset, d, rate, clock.Now().UTC().Format(time.RFC3339))
	} else if d != 0 {
		fmt.Fprintf(w, "ztls: warning: %s=%s: this process's clock reads %s (shifted from the system's; for tests only)\n",
			clock.EnvOffset, d, clock.Now().UTC().Format(time.RFC3339))
	}
	return nil
}

// addSecretFiles gives every command that takes --tsig-secret a
// --tsig-secret-file: a secret on the command line is visible to every
// user in ps and stays in the shell's history.
func addSecretFiles(c *cobra.Command) {
	for _, sub := range c.Commands() {
		addSecretFiles(sub)
	}
	if c.Flags().Lookup("tsig-secret") == nil || c.Flags().Lookup("tsig-secret-file") != nil {
		return
	}
	var file string
	c.Flags().StringVar(&file, "tsig-secret-file", "", "read the TSIG secret (base64) from FILE instead of --tsig-secret, which shows in ps; FILE must not be readable by group or others (chmod 600)")
	pre := c.PreRunE
	c.PreRunE = func(cmd *cobra.Command, args []string) error {
		if file != "" {
			if cmd.Flags().Changed("tsig-secret") {
				return errors.New("give --tsig-secret or --tsig-secret-file, not both")
			}
			secret, err := readSecretFile(file)
			if err != nil {
				return fmt.Errorf("--tsig-secret-file: %w", err)
			}
			if err := cmd.Flags().Set("tsig-secret", secret); err != nil {
				return err
			}
		}
		if pre != nil {
			return pre(cmd, args)
		}
		return nil
	}
}

// groupCommand makes c a command that only groups others: alone it
// prints its help; an unknown subcommand is an error (exit 1) with cobra's
// suggestions, not its help with exit 0.
func groupCommand(c *cobra.Command) {
	c.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
		if cmd.SuggestionsMinimumDistance <= 0 {
			cmd.SuggestionsMinimumDistance = 2 // cobra's default
		}
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t") + "\n"
		}
		return fmt.Errorf("%s\nsee '%s --help' for its commands", msg, cmd.CommandPath())
	}
	c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
}

// readSecretFile reads a secret kept in a file only its owner may read.
func readSecretFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("%s is readable by group or others (mode %04o): chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	secret := strings.TrimSpace(string(b))
	if secret == "" {
		return "", fmt.Errorf("%s is empty", path)
	}
	return secret, nil
}
