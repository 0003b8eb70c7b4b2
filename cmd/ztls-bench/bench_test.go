package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/ztls-project/ztls/testbed/bench"
	"github.com/ztls-project/ztls/testbed/dnsburden"
)

// A plain 'ztls bench' compares this project's TLS 1.3 and ZTLS with the
// baselines; "all" includes the TurboTLS contenders.
func TestBenchDefaultProtocols(t *testing.T) {
	got, err := benchProtocols(defaultBenchProtocols)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tls", "ztls", "gotls", "openssl", "quic", "quic-0rtt"} {
		if !slices.Contains(got, want) {
			t.Errorf("default protocols %v lack %s", got, want)
		}
	}
	if all, err := benchProtocols("all"); err != nil || !slices.Contains(all, "ztls-turbo") {
		t.Fatalf("all: %v, %v", all, err)
	}
}

// Every helper process the testbed starts is a hidden subcommand, so the
// binary can act as each (no init-time takeover).
func TestHelperRolesAreHiddenSubcommands(t *testing.T) {
	for _, r := range bench.Roles() {
		c, _, err := rootCmd.Find([]string{r.Name})
		if err != nil || c.Name() != r.Name {
			t.Errorf("role %s: no subcommand (%v)", r.Name, err)
			continue
		}
		if !c.Hidden {
			t.Errorf("role %s is listed in --help", r.Name)
		}
	}
}

// --dns-burden prints every comparison of dnsburden.Comparisons, the
// HTTPS record's rows beside the TXT path's, with the browser's zero.
func TestDNSBurdenTable(t *testing.T) {
	var out strings.Builder
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	if err := runBurden(cmd); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, c := range dnsburden.Comparisons {
		if !strings.Contains(got, c.Client) || !strings.Contains(got, c.Path) {
			t.Errorf("no row for %s / %s:\n%s", c.Client, c.Path, got)
		}
	}
	if !regexp.MustCompile(`browser \(A, AAAA, HTTPS\)\s+HTTPS, leaf held\s+\d+\s+\d+\s+0\.0%`).MatchString(got) {
		t.Errorf("the browser with a held leaf is not at +0.0%%:\n%s", got)
	}
}
