package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	cmd := &cobra.Command{
		Use:   "check-zone [ORIGIN=]FILE...",
		Short: "Check zone files the way 'dns serve' loads them, like named-checkzone",
		Long: `Load each zone file exactly as 'ztls dns serve --zone' would and report
whether it would be served: the RFC 1035 master-file syntax, one SOA at the
apex, no data outside the zone, no CNAME beside other data, no $INCLUDE.
The origin comes from the SOA record, or is given as ORIGIN=FILE. Prints
"zone ORIGIN: loaded serial N" and OK for each good file; the first problem
of a bad one, and exits 1 if any is bad.`,
		Example: `  ztls dns check-zone example.org.zone
  ztls dns check-zone example.net.=net.db example.org.zone`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return fmt.Errorf("check-zone: give the zone files to check, as FILE or ORIGIN=FILE: %s example.org.zone", cmd.CommandPath())
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			bad := 0
			for _, arg := range args {
				z, err := loadZoneArg(arg)
				if err != nil {
					fmt.Fprintf(out, "%s: %v\n", arg, err)
					bad++
					continue
				}
				fmt.Fprintf(out, "zone %s: loaded serial %d\nOK\n", z.Origin(), z.SOA().Serial)
			}
			if bad > 0 {
				return fmt.Errorf("check-zone: %d of %d zone files would not be served", bad, len(args))
			}
			return nil
		},
	}
	dnsCmd.AddCommand(cmd)
}
