package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// Limits that cannot mean anything are refused with a message saying
// what to give instead.
func TestDNSServeAbuseFlagErrors(t *testing.T) {
	good := func() dnsServeFlags {
		return dnsServeFlags{zones: []string{"x.zone"}, listen: "127.0.0.1:0", idle: 10 * time.Second,
			firstQuery: 3 * time.Second, rrlRate: 10, rrlSlip: 2, rrlWindow: 15 * time.Second, amplification: 10}
	}
	for _, tc := range []struct {
		name   string
		change func(*dnsServeFlags)
		want   string
	}{
		{"negative per-address cap", func(f *dnsServeFlags) { f.maxConnsPerAddr = -1 }, "--max-conns-per-addr -1: give 0 (off) or a positive number"},
		{"negative rate", func(f *dnsServeFlags) { f.rrlRate = -5 }, "--rrl-rate -5"},
		{"amplification 1", func(f *dnsServeFlags) { f.amplification = 1 }, "give 2 or more"},
		{"first query after idle", func(f *dnsServeFlags) { f.firstQuery = time.Minute }, "at most --idle-timeout"},
		{"negative window", func(f *dnsServeFlags) { f.rrlWindow = -time.Second }, "--rrl-window"},
	} {
		f := good()
		tc.change(&f)
		err := runDNSServe(context.Background(), &bytes.Buffer{}, &f)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "dns serve: ") {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The help text lists every new flag.
func TestDNSServeAbuseFlagsInHelp(t *testing.T) {
	serve, _, err := dnsCmd.Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	usage := serve.Long + serve.UsageString()
	for _, flag := range []string{"--max-conns-per-addr", "--max-conns-per-prefix", "--first-query-timeout",
		"--rrl-rate", "--rrl-slip", "--rrl-window", "--udp-amplification", "--no-cookies", "--cookie-rotate"} {
		if !strings.Contains(usage, flag) {
			t.Errorf("%s missing from 'ztls dns serve --help'", flag)
		}
	}
}
