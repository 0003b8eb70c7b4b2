package tls13

import (
	"crypto/rand"
	"runtime"
	"testing"
)

// TestServerShareBesideZTLS: with two Ps, a ztls ClientHello has the
// server's key share made on a goroutine of its own beside the Z-data
// ECDH, and the handshake completes with its early data accepted, or
// rejected (the share then serves the full handshake); with one P, or
// a Config.Rand, the share is made in line.
func TestServerShareBesideZTLS(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	for _, tc := range []struct {
		name   string
		procs  int
		rand   bool
		reject bool
		want   int
	}{
		{"accepted", 2, false, false, 1},
		{"rejected", 2, false, true, 1},
		{"one-proc", 1, false, false, 0},
		{"config-rand", 2, true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runtime.GOMAXPROCS(tc.procs)
			z := newZTLSSetup(t)
			started := 0
			z.scfg.testHookShareStarted = func(*pendingShare) { started++ }
			if tc.rand {
				z.scfg.Rand = rand.Reader
			}
			if tc.reject {
				z.scfg.ZData = &testZKeys{} // no live key: ztls is rejected
			}
			c, s, answer, err := z.run(t, []byte("GET /"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !c.done || !s.done {
				t.Fatal("handshake incomplete")
			}
			if s.info.ZTLS == tc.reject || c.info.EarlyDataAccepted == tc.reject {
				t.Fatalf("ZTLS %v, early data accepted %v; want %v", s.info.ZTLS, c.info.EarlyDataAccepted, !tc.reject)
			}
			if !tc.reject && string(answer) != "answer to GET /" {
				t.Fatalf("first-flight answer %q", answer)
			}
			if started != tc.want {
				t.Fatalf("share begun beside the early secret %d times, want %d", started, tc.want)
			}
		})
	}
}

// TestServerShareDroppedOnFailure: a handshake that fails after the share
// was begun (no certificate the client accepts) erases the share's
// secret once it is made.
func TestServerShareDroppedOnFailure(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	z := newZTLSSetup(t)
	var p *pendingShare
	z.scfg.testHookShareStarted = func(ps *pendingShare) { p = ps }
	z.ccfg.SignatureSchemes = []SignatureScheme{Ed25519} // the server's leaf is ECDSA P-256
	_, _, _, err := z.run(t, []byte("GET /"), nil)
	if err == nil {
		t.Fatal("handshake succeeded without a certificate the client accepts")
	}
	if p == nil {
		t.Fatal("the share was not begun beside the early secret")
	}
	select {
	case <-p.done:
	default:
		t.Fatal("the handshake returned before the share it dropped was made")
	}
	if len(p.shared) == 0 {
		t.Fatalf("no shared secret was made (%v)", p.err)
	}
	for _, b := range p.shared {
		if b != 0 {
			t.Fatal("the dropped share's secret was not erased")
		}
	}
}
