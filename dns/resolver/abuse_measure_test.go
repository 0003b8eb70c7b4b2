package resolver

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"
)

// The measurement behind README.md's reconnect-storm figure, kept out of
// the quick run:
//
//	ZTLS_ABUSE_MEASURE=1 go test ./dns/resolver/ -count=1 -run TestMeasureDoTBadCertificate -v
//
// This file uses only what the package had before the backoff (commit
// d8f45bc), so copied into a checkout of d8f45bc^ it measures the storm
// the backoff ended (docs/security.md gives both commands).

// TestMeasureDoTBadCertificate: one lookup with the default budget (5 s)
// and the default backoff, to a DNS over TLS server whose certificate
// does not verify; how many connections the server accepted, and what
// the lookup said.
func TestMeasureDoTBadCertificate(t *testing.T) {
	if os.Getenv("ZTLS_ABUSE_MEASURE") == "" {
		t.Skip("a measurement: set ZTLS_ABUSE_MEASURE=1 to run it")
	}
	srv := startUntrustedDoT(t)
	pki := newTestPKI(t) // a CA that did not sign the server's certificate
	r, err := New(Config{Servers: []string{srv.addr}, Transport: TLS, CacheSize: -1,
		TLSConfig: &tls.Config{RootCAs: pki.Pool, ServerName: "server.test"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	start := clock.Now()
	_, err = r.Lookup(context.Background(), "q.test", dns.TypeA)
	t.Logf("one lookup: %d connections in %v; error: %v", srv.accepted.Load(), clock.Since(start).Round(time.Millisecond), err)
	if err == nil {
		t.Fatal("untrusted certificate accepted")
	}
}

// untrustedDoT is a DNS over TLS server on loopback whose certificate
// comes from a throwaway CA, so no client trusts it. It counts the connections it
// accepts and runs each handshake until the client gives up.
type untrustedDoT struct {
	addr     string
	accepted atomic.Int64
}

func startUntrustedDoT(t *testing.T) *untrustedDoT {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A certificate of a throwaway CA that no client trusts.
	untrusted := newTestPKI(t).Cert
	ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{untrusted}})
	s := &untrustedDoT{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var open sync.Map
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepted.Add(1)
			open.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer open.Delete(c)
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.(*tls.Conn).Handshake() // fails: the client rejects the certificate
				c.Read(make([]byte, 1))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	return s
}
