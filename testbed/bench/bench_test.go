package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/ztls-project/ztls/testbed/hosts"
)

// TestSmallScenario keeps the testbed honest in the default test run: one
// RTT, a few first visits per baseline. The bounds are in RTT units and
// check the structure (how many round trips each protocol pays), not the
// speed of our code.
func TestSmallScenario(t *testing.T) {
	if err := hosts.Available(); err != nil {
		t.Skipf("skipping: cannot build emulated hosts here: %v", err)
	}
	const rtt = 20 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	var progress *os.File
	if testing.Verbose() {
		progress = os.Stderr
	}
	cfg := Config{
		RTTs:      []time.Duration{rtt},
		Runs:      4,
		Protocols: []string{"gotls", "openssl", "quic", "quic-0rtt"},
		Scenarios: []string{"local-warm"},
		Realtime:  true,
	}
	if progress != nil {
		cfg.Progress = progress
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Checks) != 1 {
		t.Fatalf("%d emulator checks, want 1", len(rep.Checks))
	}
	if d := rep.Checks[0].ConnectMedianMs - 20; d > 0.5 || d < -0.5 {
		t.Errorf("TCP connect median %.3f ms, want 20 ± 0.5 ms", rep.Checks[0].ConnectMedianMs)
	}
	// First response after DNS, in RTTs: TLS 1.3 over TCP pays TCP's,
	// TLS's and the request's round trips; QUIC folds TCP's into its
	// handshake; QUIC 0-RTT sends the request with its first flight.
	bounds := map[string][2]float64{
		"gotls":     {2.5, 4},
		"openssl":   {2.5, 4},
		"quic":      {1.5, 3},
		"quic-0rtt": {0.5, 2},
	}
	for _, r := range rep.Results {
		if r.Runs < 3 {
			t.Errorf("%s: only %d of 4 runs succeeded", r.Protocol, r.Runs)
			continue
		}
		b := bounds[r.Protocol]
		got := (r.FirstByte.Median - r.DNS.Median) / 20
		if got < b[0] || got > b[1] {
			t.Errorf("%s: first response %.2f ms after a %.2f ms lookup is %.2f RTT, want %.1f to %.1f",
				r.Protocol, r.FirstByte.Median, r.DNS.Median, got, b[0], b[1])
		}
		// local-warm: the lookup is one round trip to the resolver.
		if d := r.DNS.Median; d < 5.5 || d > 9 {
			t.Errorf("%s: DNS lookup median %.2f ms, want about 6 ms (local resolver)", r.Protocol, d)
		}
		t.Logf("%-9s runs %d dns %.2f handshake %.2f first byte %.2f ms (%.2f RTT after DNS)",
			r.Protocol, r.Runs, r.DNS.Median, r.Handshake.Median, r.FirstByte.Median, got)
	}
}
