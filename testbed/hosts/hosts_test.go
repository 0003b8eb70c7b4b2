package hosts

import (
	"context"
	"testing"
	"time"
)

// needNamespaces skips the test where namespaces and TUN devices cannot be
// created, with the reason.
func needNamespaces(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("skipping: cannot build emulated hosts here: %v", err)
	}
}

func TestSelfCheck(t *testing.T) {
	needNamespaces(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := SelfCheck(ctx, SelfCheckConfig{RTT: 20 * time.Millisecond, Probes: 30, Bulk: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compensation %v, rtt %v: ping median %v, connect median %v, %.0f Mbit/s, relay real-time %v",
		rep.Comp, rep.RTT, rep.PingMedian, rep.ConnMedian, rep.Mbps, rep.RealTime)
	for _, p := range rep.Problems {
		t.Error(p)
	}
}
