// Command ztls-bench is ztls's testbed: it measures first-response times
// over emulated WAN links (bench) and shows what ZTLS saves (demo). It is a
// command of its own so that the ztls binary carries no benchmark
// contenders, plotting or QUIC; 'ztls bench' and 'ztls demo' run it.
//
// The testbed starts helper processes from this executable (the link
// relay, the client workers in the client's namespace): each is a hidden
// subcommand.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/ztls-project/ztls/testbed/bench"
)

var rootCmd = &cobra.Command{
	Use:   "ztls-bench",
	Short: "ztls's testbed: first-response times over emulated WAN links",
	Long: `ztls-bench measures how soon the first response of a secure connection
arrives, over emulated WAN links in network namespaces ('bench'), and shows
what ZTLS saves on a first visit ('demo'). 'ztls bench' and 'ztls demo' run
this command.`,
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	rootCmd.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return fmt.Errorf("%w; see '%s --help' for its flags", err, cmd.CommandPath())
	})
	for _, r := range bench.Roles() {
		r := r
		rootCmd.AddCommand(&cobra.Command{
			Use:                r.Name,
			Short:              r.Short,
			Hidden:             true,
			DisableFlagParsing: true,
			Run:                func(_ *cobra.Command, args []string) { os.Exit(r.Main(args)) },
		})
	}
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "ztls-bench:", err)
		os.Exit(1)
	}
}
