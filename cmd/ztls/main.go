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

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ztls:", err)
		os.Exit(1)
	}
}
