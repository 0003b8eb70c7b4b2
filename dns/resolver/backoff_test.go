package resolver

import (
	"context"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestDoTUntrustedCertificateNoStorm: one lookup to a DNS over TLS server
// whose certificate does not verify used to connect 722 times in 5 s and
// report "no reply". Now the reconnects back off (at least 100, 200, 400
// and 500 ms apart with these settings: at most 4 connects in the 1 s
// budget), and the lookup fails with the certificate's error.
func TestDoTUntrustedCertificateNoStorm(t *testing.T) {
	srv := startUntrustedDoT(t)
	pki := newTestPKI(t) // a CA that did not sign the server's certificate
	r := dotResolver(t, pki, srv.addr, func(c *Config) {
		c.Timeout = time.Second
		c.ReconnectBackoff = 200 * time.Millisecond
		c.MaxReconnectBackoff = time.Second
	})
	_, err := r.Lookup(context.Background(), "q.test", dns.TypeA)
	if err == nil {
		t.Fatal("untrusted certificate accepted")
	}
	n := srv.accepted.Load()
	t.Logf("%d connections; error: %v", n, err)
	if n > 5 {
		t.Fatalf("reconnect storm: %d connections for one lookup", n)
	}
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "DNS over TLS to "+srv.addr+": ") ||
		!strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
		t.Fatalf("the error does not name the certificate problem: %v", err)
	}
	// A second lookup meets the backoff: it connects at most once more
	// (the wait is at most 1 s, the budget) and says the same.
	before := srv.accepted.Load()
	_, err = r.Lookup(context.Background(), "q2.test", dns.TypeA)
	if !errors.As(err, &unknown) {
		t.Fatalf("second lookup: %v", err)
	}
	if n := srv.accepted.Load() - before; n > 3 {
		t.Fatalf("second lookup connected %d times", n)
	}
}

// TestTCPRefusedNoStorm: a server whose port refuses connections is not
// asked again at once either, and the error says the connect was refused.
func TestTCPRefusedNoStorm(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connects are refused
	d := &countingDialer{inner: &net.Dialer{}}
	r, err := New(Config{Servers: []string{addr}, Transport: TCP, Dialer: d, CacheSize: -1,
		Timeout: time.Second, ReconnectBackoff: 200 * time.Millisecond, MaxReconnectBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Lookup(context.Background(), "q.test", dns.TypeA)
	t.Logf("%d connects; error: %v", d.n, err)
	if d.n < 1 || d.n > 5 {
		t.Fatalf("%d connects for one lookup", d.n)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) || !strings.Contains(err.Error(), "DNS over TCP to "+addr+": ") {
		t.Fatalf("the error does not say the connect was refused: %v", err)
	}
}

// TestStreamClosedBeforeReplyNoStorm: a server that accepts and closes
// every connection before answering is reconnected to once at once (as
// after an idle close), then with backoff; a reply ends the backoff.
func TestStreamClosedBeforeReplyNoStorm(t *testing.T) {
	var answer atomic.Bool
	srv := startStreamServer(t, nil, func(s *session, q *dns.Msg, _ []byte) {
		if answer.Load() {
			s.send(t, reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.9"))
			return
		}
		s.conn.Close()
	})
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TCP, CacheSize: -1,
		Timeout: time.Second, ReconnectBackoff: 200 * time.Millisecond, MaxReconnectBackoff: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, err = r.Lookup(context.Background(), "q.test", dns.TypeA)
	n := srv.conns.Load()
	t.Logf("%d connections; error: %v", n, err)
	if err == nil || n > 6 {
		t.Fatalf("%d connections for one lookup (%v)", n, err)
	}
	// The server mends; once the backoff has passed, the next lookup is
	// answered and later failures start from the shortest wait again.
	answer.Store(true)
	for i := 0; ; i++ {
		a, err := r.Lookup(context.Background(), "ok.test", dns.TypeA)
		if err == nil && firstA(a) == "192.0.2.9" {
			break
		}
		if i == 10 {
			t.Fatalf("no answer after the server mended: %v", err)
		}
	}
	u, _ := r.stream(TCP, r.servers[0])
	u.mu.Lock()
	failures := u.failures
	u.mu.Unlock()
	if failures != 0 {
		t.Fatalf("a reply left %d failures counted", failures)
	}
}

// TestBackoffLongFirstWait: a first wait above 2^34 ns (17 s) once
// overflowed when doubled 29 times, into a negative wait and a panic in
// the jitter; the wait stays within MaxReconnectBackoff however many
// failures in a row.
func TestBackoffLongFirstWait(t *testing.T) {
	u := &streamUpstream{backoff: 20 * time.Second, maxBackoff: time.Hour}
	for i := range 64 {
		start := time.Now() // real time: retryAt is a deadline
		u.noteFailureLocked(errConnLost, false)
		if wait := u.retryAt.Sub(start); wait < 0 || wait > time.Hour {
			t.Fatalf("failure %d: wait %v", i+1, wait)
		}
	}
}
