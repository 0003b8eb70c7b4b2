package authority

import (
	"crypto/tls"
	"net"
	"testing"
)

// A resolver that reconnects resumes its DoT session with the ticket the
// server sent (RFC 8446, Section 2.2): no certificate and no signature
// the second time. crypto/tls issues tickets unless the configuration
// turns them off, with keys it rotates itself.
func TestDoTResumption(t *testing.T) {
	s := testServer(t)
	a, clientCfg := startServer(t, s)
	clientCfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
	for i, want := range []bool{false, true, true} {
		c, st := dotAsk(t, a.tls, clientCfg, uint16(i))
		c.Close()
		if st.DidResume != want {
			t.Fatalf("connection %d: resumed %v, want %v", i, st.DidResume, want)
		}
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

// BenchmarkDoTReconnect is a resolver reconnecting to the authority: each
// operation is a TCP connection, a TLS 1.3 handshake (full, or resumed
// with a session ticket), one query and its answer, and the close; client
// and server are both in this process, on loopback, 4 × GOMAXPROCS
// resolvers reconnecting at once. The key exchange is
// Go's default (X25519MLKEM768 and X25519 shares offered) or X25519
// alone, as resolvers on OpenSSL 3.0 to 3.4 offer; resumption still runs
// it (psk_dhe_ke, the only mode Go's client and server use), so what
// resumption saves is the certificate, its signature and its
// verification.
func BenchmarkDoTReconnect(b *testing.B) {
	for _, bc := range []struct {
		name   string
		resume bool
		curves []tls.CurveID
	}{
		{"full", false, nil}, {"resumed", true, nil},
		{"full-x25519", false, []tls.CurveID{tls.X25519}}, {"resumed-x25519", true, []tls.CurveID{tls.X25519}},
	} {
		resume := bc.resume
		b.Run(bc.name, func(b *testing.B) {
			s := testServer(b)
			s.MaxConnsPerAddr, s.MaxConnsPerPrefix = -1, -1
			a, cfg := startServer(b, s)
			cfg.CurvePreferences = bc.curves
			if resume {
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
				c, _ := dotAsk(b, a.tls, cfg, 0)
				c.Close()
			}
			b.ReportAllocs()
			// Several resolvers at once: the figure is what the CPUs can
			// do, not the wake-up latency of one connection after another.
			b.SetParallelism(4)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for i := 0; pb.Next(); i++ {
					c, st := dotAsk(b, a.tls, cfg, uint16(i))
					c.Close()
					if st.DidResume != resume {
						b.Errorf("resumed %v", st.DidResume)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reconnects/s")
		})
	}
}
