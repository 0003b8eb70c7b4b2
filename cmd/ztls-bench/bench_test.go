package main

import (
	"slices"
	"testing"

	"github.com/ztls-project/ztls/testbed/bench"
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
