package hosts

import (
	"bytes"
	"context"
	"os"
	"strings"
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

// TestTCPCongestion checks that Options.TCPCongestion reaches every host's
// namespace, that empty keeps the machine's, and that a name the kernel does
// not have is refused with the list of those it has.
func TestTCPCongestion(t *testing.T) {
	needNamespaces(t)
	machine, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		t.Fatal(err)
	}
	for _, cc := range []string{"reno", "cubic", ""} {
		n, err := New(Options{Hosts: []string{"a", "b"}, TCPCongestion: cc})
		if err != nil {
			t.Fatalf("TCPCongestion %q: %v", cc, err)
		}
		want := cc
		if cc == "" {
			want = string(bytes.TrimSpace(machine))
		}
		for _, h := range []*Host{n.Host("a"), n.Host("b")} {
			var got []byte
			if err := h.Do(func() (err error) {
				got, err = os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if g := string(bytes.TrimSpace(got)); g != want {
				t.Errorf("TCPCongestion %q: host %s runs %q, want %q", cc, h.Name, g, want)
			}
		}
		n.Close()
	}
	_, err = New(Options{Hosts: []string{"a"}, TCPCongestion: "no-such-cc"})
	if err == nil || !strings.Contains(err.Error(), "this kernel has") {
		t.Fatalf("unknown congestion control: got %v, want an error listing the kernel's", err)
	}
}
