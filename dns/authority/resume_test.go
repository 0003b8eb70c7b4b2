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
// and server are both in this process, on loopback.
func BenchmarkDoTReconnect(b *testing.B) {
	for _, resume := range []bool{false, true} {
		name := "full"
		if resume {
			name = "resumed"
		}
		b.Run(name, func(b *testing.B) {
			s := testServer(b)
			s.MaxConnsPerAddr, s.MaxConnsPerPrefix = -1, -1
			a, cfg := startServer(b, s)
			if resume {
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(8)
				c, _ := dotAsk(b, a.tls, cfg, 0)
				c.Close()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				c, st := dotAsk(b, a.tls, cfg, uint16(i))
				c.Close()
				if st.DidResume != resume {
					b.Fatalf("resumed %v", st.DidResume)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reconnects/s")
		})
	}
}
