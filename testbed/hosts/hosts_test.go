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
	rep, err := SelfCheck(ctx, SelfCheckConfig{RTT: 20 * time.Millisecond, Probes: 30, Realtime: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compensation %v, rtt %v: ping median %v, connect median %v, %.0f Mbit/s (%.2f%% of packets >1 ms late), relay real-time %v",
		rep.Comp, rep.RTT, rep.PingMedian, rep.ConnMedian, rep.Mbps, 100*rep.BulkLate1ms, rep.RealTime)
	for _, p := range rep.Problems {
		t.Error(p)
	}
}
