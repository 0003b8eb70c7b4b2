package resolver

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func dotResolver(t testing.TB, pki *testPKI, addr string, mutate func(*Config)) *Resolver {
	t.Helper()
	cfg := Config{
		Servers:   []string{addr},
		Transport: TLS,
		TLSConfig: &tls.Config{RootCAs: pki.Pool, ServerName: "server.test"},
		CacheSize: -1,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func pipeName(i int) string { return fmt.Sprintf("q%d.pipe.test.", i) }
func pipeAddr(i int) string { return fmt.Sprintf("10.0.%d.%d", i/256, i%256) }

// TestDoTPipelining100: 100 concurrent queries go over one DoT connection;
// the server answers every even arrival at once and holds the others until
// all 100 arrived, then answers those in reverse. The answers therefore
// come back out of order, and each must be matched to its own query.
func TestDoTPipelining100(t *testing.T) {
	const n = 100
	pki := newTestPKI(t)
	var (
		mu       sync.Mutex
		arrived  []string
		sent     []string
		held     []*dns.Msg
		sessions = map[*session]bool{}
	)
	answer := func(s *session, q *dns.Msg) {
		var i int
		fmt.Sscanf(q.Question[0].Name, "q%d.", &i)
		s.send(t, reply(t, q, fmt.Sprintf("%s 60 IN A %s", q.Question[0].Name, pipeAddr(i))))
	}
	srv := startStreamServer(t, pki, func(s *session, q *dns.Msg, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		sessions[s] = true
		arrived = append(arrived, q.Question[0].Name)
		if len(arrived)%2 == 1 {
			answer(s, q)
			sent = append(sent, q.Question[0].Name)
		} else {
			held = append(held, q)
		}
		if len(arrived) == n {
			for i := len(held) - 1; i >= 0; i-- {
				answer(s, held[i])
				sent = append(sent, held[i].Question[0].Name)
			}
		}
	})
	r := dotResolver(t, pki, srv.Addr, func(c *Config) { c.Timeout = 20 * time.Second })

	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, err := r.Lookup(context.Background(), pipeName(i), dns.TypeA)
			switch {
			case err != nil:
				errs[i] = err
			case len(a.RRs) != 1 || firstA(a) != pipeAddr(i) || a.Transport != "tls":
				errs[i] = fmt.Errorf("query %d got %v over %s", i, a.RRs, a.Transport)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if srv.conns.Load() != 1 || len(sessions) != 1 {
		t.Fatalf("%d connections, want 1", srv.conns.Load())
	}
	if len(sent) != n || slices.Equal(sent, arrived) {
		t.Fatalf("answers not out of order (%d sent)", len(sent))
	}
}

// TestStreamReconnect: the server closes the first connection with three
// queries in flight; they are retried on a second connection, which over
// TLS resumes the first session.
func TestStreamReconnect(t *testing.T) {
	for _, tr := range []Transport{TCP, TLS} {
		t.Run(string(tr), func(t *testing.T) {
			var pki *testPKI
			if tr == TLS {
				pki = newTestPKI(t)
			}
			var mu sync.Mutex
			firstConn := 0
			srv := startStreamServer(t, pki, func(s *session, q *dns.Msg, _ []byte) {
				if s.n == 1 {
					mu.Lock()
					firstConn++
					if firstConn == 3 {
						s.conn.Close()
					}
					mu.Unlock()
					return
				}
				s.send(t, reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.3"))
			})
			var r *Resolver
			if tr == TLS {
				r = dotResolver(t, pki, srv.Addr, nil)
			} else {
				var err error
				r, err = New(Config{Servers: []string{srv.Addr}, Transport: TCP, CacheSize: -1})
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
			}
			var wg sync.WaitGroup
			for i := 0; i < 3; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a, err := r.Lookup(context.Background(), fmt.Sprintf("r%d.test", i), dns.TypeA)
					if err != nil || firstA(a) != "192.0.2.3" {
						t.Errorf("lookup %d: %v %v", i, a, err)
					}
				}()
			}
			wg.Wait()
			if srv.conns.Load() != 2 {
				t.Fatalf("%d connections, want 2", srv.conns.Load())
			}
			if tr == TLS && srv.resumed.Load() != 1 {
				t.Fatalf("second TLS connection did not resume the session")
			}
			// Later queries reuse the second connection.
			if _, err := r.Lookup(context.Background(), "again.test", dns.TypeA); err != nil || srv.conns.Load() != 2 {
				t.Fatalf("no reuse: %v, %d connections", err, srv.conns.Load())
			}
		})
	}
}

// TestStreamQueryOptions: stream queries carry edns-tcp-keepalive (RFC 7828)
// and, over TLS only, are padded to 128-octet blocks (RFC 8467).
func TestStreamQueryOptions(t *testing.T) {
	for _, tr := range []Transport{TCP, TLS} {
		t.Run(string(tr), func(t *testing.T) {
			var pki *testPKI
			if tr == TLS {
				pki = newTestPKI(t)
			}
			type seen struct {
				size               int
				keepalive, padding bool
			}
			got := make(chan seen, 4)
			srv := startStreamServer(t, pki, func(s *session, q *dns.Msg, raw []byte) {
				var v seen
				v.size = len(raw)
				if opt := q.IsEdns0(); opt != nil {
					for _, o := range opt.Option {
						switch o.(type) {
						case *dns.EDNS0_TCP_KEEPALIVE:
							v.keepalive = true
						case *dns.EDNS0_PADDING:
							v.padding = true
						}
					}
				}
				got <- v
				s.send(t, reply(t, q))
			})
			cfg := Config{Servers: []string{srv.Addr}, Transport: tr, CacheSize: -1}
			if tr == TLS {
				cfg.TLSConfig = &tls.Config{RootCAs: pki.Pool, ServerName: "server.test"}
			}
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for _, name := range []string{"a.test", "a-much-longer-name.with.several.labels.test"} {
				if _, err := r.Lookup(context.Background(), name, dns.TypeAAAA); err != nil {
					t.Fatal(err)
				}
				v := <-got
				if !v.keepalive {
					t.Error("no edns-tcp-keepalive option")
				}
				if tr == TLS && (!v.padding || v.size%PaddingBlock != 0) {
					t.Errorf("TLS query of %d octets, padding %v", v.size, v.padding)
				}
				if tr == TCP && v.padding {
					t.Error("padding over cleartext TCP")
				}
			}
		})
	}
}

// TestStreamKeepaliveIdleClose: the server announces a 100 ms keepalive;
// the resolver closes the idle connection itself, and dials anew later.
func TestStreamKeepaliveIdleClose(t *testing.T) {
	srv := startStreamServer(t, nil, func(s *session, q *dns.Msg, _ []byte) {
		m := reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.4")
		m.SetEdns0(UDPBufferSize, false)
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: 1})
		s.send(t, m)
	})
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TCP, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Lookup(context.Background(), "k.test", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	select {
	case s := <-srv.closed:
		if s.n != 1 {
			t.Fatalf("session %d closed", s.n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("idle connection not closed by the client")
	}
	if a, err := r.Lookup(context.Background(), "k2.test", dns.TypeA); err != nil || firstA(a) != "192.0.2.4" || srv.conns.Load() != 2 {
		t.Fatalf("after idle close: %v, %v, %d connections", a, err, srv.conns.Load())
	}
}

// TestStreamDropsHostileReplies: over a stream, replies with an unknown ID
// or with the right ID but another question are dropped; the true answer
// that follows is returned.
func TestStreamDropsHostileReplies(t *testing.T) {
	srv := startStreamServer(t, nil, func(s *session, q *dns.Msg, _ []byte) {
		bad := reply(t, q, q.Question[0].Name+" 60 IN A 6.6.6.6")
		bad.Id++
		s.send(t, bad)
		bad = reply(t, q, "evil.test. 60 IN A 6.6.6.6")
		bad.Question[0].Name = "evil.test."
		s.send(t, bad)
		s.conn.Write([]byte{0, 3, 1, 2, 3}) // a frame too short for a header
		s.conn.Write([]byte{0, 0})          // an empty frame
		s.send(t, reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.5"))
	})
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TCP, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 3; i++ {
		a, err := r.Lookup(context.Background(), "s.test", dns.TypeA)
		if err != nil || len(a.RRs) != 1 || firstA(a) != "192.0.2.5" {
			t.Fatalf("lookup %d: %v, %v", i, a, err)
		}
	}
	if srv.conns.Load() != 1 {
		t.Fatalf("%d connections, want 1", srv.conns.Load())
	}
}

// TestStreamServerSilentTimesOut: a server that never answers costs the
// query its budget and a clear error, nothing more.
func TestStreamServerSilentTimesOut(t *testing.T) {
	srv := startStreamServer(t, nil, func(*session, *dns.Msg, []byte) {})
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TCP, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Lookup(context.Background(), "q.test", dns.TypeA); err == nil {
		t.Fatal("no error from a silent server")
	}
}

// TestDoTRejectsUntrustedCertificate: DNS over TLS verifies the server.
func TestDoTRejectsUntrustedCertificate(t *testing.T) {
	pki := newTestPKI(t)
	other := newTestPKI(t)
	srv := startStreamServer(t, pki, func(s *session, q *dns.Msg, _ []byte) { s.send(t, reply(t, q)) })
	r := dotResolver(t, other, srv.Addr, func(c *Config) { c.Timeout = time.Second })
	if _, err := r.Lookup(context.Background(), "q.test", dns.TypeA); err == nil {
		t.Fatal("untrusted certificate accepted")
	}
}

// TestCustomDialer: a Dialer replaces the built-in one, so another TLS
// engine can carry DNS over TLS.
func TestCustomDialer(t *testing.T) {
	pki := newTestPKI(t)
	srv := startStreamServer(t, pki, func(s *session, q *dns.Msg, _ []byte) {
		s.send(t, reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.6"))
	})
	d := &countingDialer{inner: &tls.Dialer{Config: &tls.Config{RootCAs: pki.Pool, ServerName: "server.test"}}}
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TLS, Dialer: d})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if a, err := r.Lookup(context.Background(), "d.test", dns.TypeA); err != nil || firstA(a) != "192.0.2.6" || d.n != 1 {
		t.Fatalf("custom dialer: %v, %v, %d dials", a, err, d.n)
	}
}

type countingDialer struct {
	inner Dialer
	n     int
}

func (d *countingDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.n++
	return d.inner.DialContext(ctx, network, addr)
}
