package bench

import (
	"strings"
	"testing"
	"time"
)

// TestPQContendersLoopback drives the post-quantum contenders and their
// DoT twins end to end on loopback through the real workers: the server
// publishes classical and v3 records, the client takes the v3 one
// (early data post-quantum, an X25519MLKEM768 handshake), over the
// resolver's DoT listener for the -dot ones (a visit's lookups on the
// connection opened before it), and with prefetch.
func TestPQContendersLoopback(t *testing.T) {
	w := newLoopbackWorld(t)
	for _, name := range []string{"ztls-pq", "ztls-dot", "ztls-pq-dot", "ztls-pq-prefetch",
		"ztls-turbo-pq", "ztls-turbo-dot", "ztls-turbo-pq-dot", "ztls-turbo-pq-prefetch"} {
		for _, scen := range []string{"local-warm", "stub"} {
			t.Run(name+"/"+scen, func(t *testing.T) {
				c, cl := w.start(t, name, true)
				cl.Scenario = Scenarios[scen]
				cl.TurboWait = 5 * time.Second // the protocol, not its timing (TestTurboContendersLoopback)
				accepts := w.dot.accepts.Load()
				for i := 0; i < 3; i++ {
					s, err := w.visit(t, c, cl)
					if err != nil {
						t.Fatalf("visit %d: %v", i, err)
					}
					if !s.Early || s.FirstByte <= 0 || s.DNS > s.FirstByte {
						t.Fatalf("visit %d: sample %+v, want early data accepted", i, s)
					}
				}
				got := w.dot.accepts.Load() - accepts
				switch {
				case strings.Contains(name, "-dot") && scen == "local-warm" && got != 1:
					t.Errorf("the resolver accepted %d DoT connections for 3 visits, want 1 (kept open)", got)
				case !strings.Contains(name, "-dot") && got != 0:
					t.Errorf("the resolver accepted %d DoT connections from a UDP contender", got)
				}
			})
		}
	}
}
