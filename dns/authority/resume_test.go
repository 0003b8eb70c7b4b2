package authority

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/ztls-project/ztls/tls13"
)

// A resolver that reconnects resumes its DoT session with the ticket the
// server sent (RFC 8446, Section 2.2): no certificate and no signature
// the second time. crypto/tls issues tickets unless the configuration
// turns them off, with keys it rotates itself; ztls's engine with its
// TicketKeys. A crypto/tls resolver resumes with either server.
func TestDoTResumption(t *testing.T) {
	s := testServer(t)
	a, clientCfg := startServer(t, s)
	for _, srv := range []struct{ name, addr string }{{"crypto/tls server", a.tls}, {"ztls engine server", a.ztls}} {
		t.Run(srv.name, func(t *testing.T) {
			cfg := clientCfg.Clone()
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
			for i, want := range []bool{false, true, true} {
				c, st := dotAsk(t, srv.addr, cfg, uint16(i))
				c.Close()
				if st.DidResume != want {
					t.Fatalf("connection %d: resumed %v, want %v", i, st.DidResume, want)
				}
			}
		})
	}
}

// A resolver on ztls's engine that offers psk_ke resumes without a key
// exchange (no key share used: Group 0) from ztls's engine server, which
// allows it; one that offers psk_dhe_ke only resumes with one.
func TestDoTResumptionPSKKE(t *testing.T) {
	s := testServer(t)
	a, clientCfg := startServer(t, s)
	for _, tc := range []struct {
		name  string
		modes []tls13.PSKMode
		group bool // a key exchange on resumption
	}{
		{"psk_ke", []tls13.PSKMode{tls13.PSKModeKE}, false},
		{"psk_ke preferred", []tls13.PSKMode{tls13.PSKModeKE, tls13.PSKModeDHEKE}, false},
		{"psk_dhe_ke", []tls13.PSKMode{tls13.PSKModeDHEKE}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ztlsClientConfig(clientCfg, nil)
			cfg.PSKModes = tc.modes
			for i, resumed := range []bool{false, true, true} {
				c, st := dotAsk13(t, a.ztls, cfg, uint16(i))
				c.Close()
				if st.DidResume != resumed || (st.Group != 0) != (tc.group || !resumed) {
					t.Fatalf("connection %d: resumed %v with group %v; want resumed %v, a key exchange %v",
						i, st.DidResume, st.Group, resumed, tc.group || !resumed)
				}
			}
		})
	}
}

// ztlsClientConfig is a resolver on ztls's engine trusting what cfg
// trusts, offering key shares for groups (nil: the engine's defaults).
func ztlsClientConfig(cfg *tls.Config, groups []tls13.CurveID) *tls13.Config {
	return &tls13.Config{
		RootCAs: cfg.RootCAs, ServerName: cfg.ServerName,
		Groups: groups, KeyShareGroups: groups,
		ClientSessionCache: tls13.NewLRUClientSessionCache(8),
	}
}

// dotAsk opens a DoT connection and asks one question (which also reads
// the session tickets the server sent after the handshake).
func dotAsk(t testing.TB, addr string, cfg *tls.Config, id uint16) (net.Conn, tls.ConnectionState) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, cfg)
	if err := askOn(c, id); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, c.ConnectionState()
}

// dotAsk13 is dotAsk with ztls's engine as the resolver's TLS.
func dotAsk13(t testing.TB, addr string, cfg *tls13.Config, id uint16) (net.Conn, tls13.ConnectionState) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls13.Client(raw, cfg)
	if err := askOn(c, id); err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, c.ConnectionState()
}

// BenchmarkDoTReconnect is a resolver reconnecting to the authority: each
// operation is a TCP connection, a TLS 1.3 handshake (full, or resumed
// with a session ticket), one query and its answer, and the close; client
// and server are both in this process, on loopback, 4 × GOMAXPROCS
// resolvers reconnecting at once. The key exchange is the stack's default
// (X25519MLKEM768 and X25519 shares offered) or X25519 alone, as
// resolvers on OpenSSL 3.0 to 3.4 offer.
//
// With crypto/tls on both sides ("go/"), resumption still runs the key
// exchange (psk_dhe_ke, the only mode Go's client and server use), so what
// it saves is the certificate, its signature and its verification. With
// ztls's engine on both sides ("ztls/"), the resolver may also offer
// psk_ke ("resumed-psk-ke"): no key exchange at all, as TLS 1.2's session
// tickets, and no forward secrecy for that connection beyond the ticket
// key's life.
func BenchmarkDoTReconnect(b *testing.B) {
	x25519 := []tls13.CurveID{tls13.X25519}
	for _, bc := range []struct {
		name   string
		ztls   bool
		resume bool
		x25519 bool
		pskKE  bool
	}{
		{name: "go/full"}, {name: "go/resumed", resume: true},
		{name: "go/full-x25519", x25519: true}, {name: "go/resumed-x25519", resume: true, x25519: true},
		{name: "ztls/full", ztls: true}, {name: "ztls/resumed", ztls: true, resume: true},
		{name: "ztls/resumed-psk-ke", ztls: true, resume: true, pskKE: true},
		{name: "ztls/full-x25519", ztls: true, x25519: true},
		{name: "ztls/resumed-x25519", ztls: true, resume: true, x25519: true},
		{name: "ztls/resumed-psk-ke-x25519", ztls: true, resume: true, x25519: true, pskKE: true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := testServer(b)
			s.MaxConnsPerAddr, s.MaxConnsPerPrefix = -1, -1
			a, cfg := startServer(b, s)
			// ask opens a connection, asks, closes, and reports whether
			// it resumed.
			var ask func(b *testing.B, id uint16) bool
			if bc.ztls {
				var groups []tls13.CurveID
				if bc.x25519 {
					groups = x25519
				}
				zcfg := ztlsClientConfig(cfg, groups)
				if bc.pskKE {
					zcfg.PSKModes = []tls13.PSKMode{tls13.PSKModeKE}
				}
				if !bc.resume {
					zcfg.ClientSessionCache = nil
				}
				ask = func(b *testing.B, id uint16) bool {
					c, st := dotAsk13(b, a.ztls, zcfg, id)
					c.Close()
					return st.DidResume && (st.Group == 0) == bc.pskKE
				}
			} else {
				if bc.x25519 {
					cfg.CurvePreferences = []tls.CurveID{tls.X25519}
				}
				if bc.resume {
					cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
				}
				ask = func(b *testing.B, id uint16) bool {
					c, st := dotAsk(b, a.tls, cfg, id)
					c.Close()
					return st.DidResume
				}
			}
			if bc.resume {
				ask(b, 0) // the first ticket
			}
			b.ReportAllocs()
			// Several resolvers at once: the figure is what the CPUs can
			// do, not the wake-up latency of one connection after another.
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					if resumed := ask(b, uint16(i)); resumed != bc.resume {
						b.Errorf("resumed as asked: %v, want %v", resumed, bc.resume)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reconnects/s")
		})
	}
}
