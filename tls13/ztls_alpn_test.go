package tls13

import (
	"crypto/ecdh"
	"testing"
	"time"
)

// A server that prefers another protocol selects the Z-data's early ALPN
// for a ztls ClientHello that offers it, so the early data written in it
// is accepted; without ztls, or for a protocol the server does not
// speak, its own preference stands.
func TestZTLSServerSelectsEarlyALPN(t *testing.T) {
	for _, tc := range []struct {
		name         string
		early        string   // the Z-data's early ALPN
		client       []string // the client's ALPN list (the engine puts early first)
		server       []string
		ztls         bool
		wantALPN     string
		wantAccepted bool
	}{
		{"server prefers h2, Z-data http/1.1", "http/1.1", []string{"h2", "http/1.1"}, []string{"h2", "http/1.1"}, true, "http/1.1", true},
		{"server prefers http/1.1, Z-data h2", "h2", []string{"h2", "http/1.1"}, []string{"http/1.1", "h2"}, true, "h2", true},
		{"without ztls the server's preference", "http/1.1", []string{"http/1.1", "h2"}, []string{"h2", "http/1.1"}, false, "h2", false},
		{"server without the early ALPN", "http/1.1", []string{"h2", "http/1.1"}, []string{"h2"}, true, "h2", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := getPKI(t, "ecdsa-p256")
			offer, key := newZData(t, ecdh.X25519(), X25519, "localhost", tc.early, p)
			scfg := serverConfig(p)
			scfg.ZData = &testZKeys{keys: []*ZDataKey{key}}
			scfg.StrikeRegister = NewMemoryStrikeRegister(1000, time.Time{})
			scfg.NextProtos = tc.server
			z := &ztlsSetup{p: p, offer: offer, key: key, ccfg: clientConfig(p), scfg: scfg}
			z.ccfg.NextProtos = tc.client
			if !tc.ztls {
				z.offer = nil
			}
			c, s, _, err := z.run(t, []byte("GET /"), nil)
			if err != nil {
				t.Fatal(err)
			}
			if c.info.NegotiatedProtocol != tc.wantALPN || s.info.NegotiatedProtocol != tc.wantALPN {
				t.Fatalf("ALPN %q (server %q), want %q", c.info.NegotiatedProtocol, s.info.NegotiatedProtocol, tc.wantALPN)
			}
			if c.info.EarlyDataAccepted != tc.wantAccepted || c.info.ZTLS != tc.wantAccepted {
				t.Fatalf("early data accepted %v, ZTLS %v, want %v (server: %s)", c.info.EarlyDataAccepted, c.info.ZTLS, tc.wantAccepted, s.info.ZTLSRejectReason)
			}
		})
	}
}
