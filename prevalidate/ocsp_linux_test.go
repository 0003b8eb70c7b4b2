//go:build linux

package prevalidate_test

// OCSP against a real responder started by the test (openssl ocsp with
// an index file, in a network namespace of its own since it binds every
// address): good, revoked, unknown and a responder that is down, under
// soft- and hard-fail; then on the connection's critical path without
// prefetch, and off it with.

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13"
)

// ocspPort is where the responder listens, in its own namespace.
const ocspPort = 8888

// ocspWorld is a CA, leaves whose AIA names the responder, and the
// responder (openssl ocsp) answering for the CA from an index file.
type ocspWorld struct {
	ca                    *testpki.CA
	good, revoked, absent *testpki.Leaf // absent: not in the index ("unknown")
	down                  *testpki.Leaf // its AIA names a port nobody listens on
	responder             *nsProc
}

func startOCSP(t *testing.T) *ocspWorld {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	url := fmt.Sprintf("http://127.0.0.1:%d/", ocspPort)
	leaf := func(aia string) *testpki.Leaf {
		return ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"localhost"}, OCSPServer: []string{aia}})
	}
	w := &ocspWorld{ca: ca, good: leaf(url), revoked: leaf(url), absent: leaf(url),
		down: leaf(fmt.Sprintf("http://127.0.0.1:%d/", ocspPort+1))}
	// The index of openssl ca (and ocsp): status, expiry, revocation
	// time, serial, file, subject.
	line := func(status string, l *testpki.Leaf, revokedAt string) string {
		return fmt.Sprintf("%s\t%s\t%s\t%X\tunknown\t/CN=localhost\n", status, l.Cert.NotAfter.UTC().Format("060102150405Z"), revokedAt, l.Cert.SerialNumber)
	}
	index := line("V", w.good, "") + line("R", w.revoked, clock.Now().Add(-time.Hour).UTC().Format("060102150405Z")) + line("V", w.down, "")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("index.txt", []byte(index))
	write("index.txt.attr", []byte("unique_subject = no\n"))
	keyDER, err := x509.MarshalPKCS8PrivateKey(ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	write("ca.key", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	write("ca.crt", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.DER}))
	w.responder = startInNetns(t, dir, "openssl", ocspPort, "waiting for OCSP client connections", "ocsp", "-index", "index.txt", "-port", fmt.Sprint(ocspPort),
		"-rsigner", "ca.crt", "-rkey", "ca.key", "-CA", "ca.crt", "-nmin", "120", "-ignore_err")
	return w
}

// cache is a new cache whose OCSP requests (to ocspPort and the port
// after it) go into the responder's namespace.
func (w *ocspWorld) cache(t *testing.T) *prevalidate.Cache {
	c := prevalidate.NewCache(prevalidate.CacheOptions{})
	t.Cleanup(func() { c.Close() })
	prevalidate.SetDialer(c, func(ctx context.Context, network, addr string) (net.Conn, error) {
		if strings.HasSuffix(addr, fmt.Sprintf(":%d", ocspPort)) || strings.HasSuffix(addr, fmt.Sprintf(":%d", ocspPort+1)) {
			return w.responder.dial(ctx, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	})
	return c
}

func TestOCSPAgainstOpenSSLResponder(t *testing.T) {
	w := startOCSP(t)
	for _, pol := range []prevalidate.OCSPPolicy{prevalidate.OCSPSoftFail, prevalidate.OCSPHardFail} {
		for _, tc := range []struct {
			name   string
			leaf   *testpki.Leaf
			status string
			hard   error // under hard-fail; soft-fail passes but for revoked
		}{
			{"good", w.good, "good", nil},
			{"revoked", w.revoked, "revoked", prevalidate.ErrOCSPRevoked},
			{"unknown", w.absent, "unknown", prevalidate.ErrOCSPUnknown},
			{"responder down", w.down, "unavailable", prevalidate.ErrOCSPUnavailable},
		} {
			t.Run(pol.String()+"/"+tc.name, func(t *testing.T) {
				c := w.cache(t)
				chain := []*x509.Certificate{tc.leaf.Cert, w.ca.Cert}
				o := prevalidate.CheckOCSPChain(ctxT(t), c, pol, chain, clock.Now())
				want := tc.hard
				if pol == prevalidate.OCSPSoftFail && tc.status != "revoked" {
					want = nil
				}
				if o.Status != tc.status || !errors.Is(o.Err, want) || (want == nil) != (o.Err == nil) || prevalidate.OCSPFetches(c) != 1 {
					t.Fatalf("status %q, error %v, %d requests; want %q, %v, 1", o.Status, o.Err, prevalidate.OCSPFetches(c), tc.status, want)
				}
				if tc.status == "revoked" && !errors.Is(o.Err, revocation.ErrRevoked) {
					t.Fatal("a revoked answer is not a revocation.ErrRevoked")
				}
				// An answer is kept until its nextUpdate (-nmin 120: the
				// responder runs on the system clock, the test's clock may
				// be up to an hour ahead, scripts/clock-offset); so is a
				// soft-fail check that got none, for a while.
				again := prevalidate.CheckOCSPChain(ctxT(t), c, pol, chain, clock.Now())
				cached := tc.status != "unavailable" || pol == prevalidate.OCSPSoftFail
				if again.Cached != cached || again.Status != o.Status {
					t.Fatalf("second check: cached %v, status %q", again.Cached, again.Status)
				}
				sys := time.Now() // real time: the responder's clock
				if tc.status == "good" && (o.Next.Before(sys.Add(119*time.Minute)) || o.Next.After(sys.Add(121*time.Minute))) {
					t.Fatalf("next update %v, want in 120 minutes on the responder's clock", o.Next)
				}
			})
		}
	}
}

// serveLeaf serves TLS 1.3 with leaf on loopback, answering "hello" to
// each request, and returns its address.
func serveLeaf(t *testing.T, leaf *testpki.Leaf) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	cfg := &tls13.Config{Certificates: []tls13.Certificate{{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}}}
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c := tls13.Server(raw, cfg)
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				buf := make([]byte, 1024)
				if n, _ := c.Read(buf); n > 0 {
					c.Write([]byte("hello"))
				}
				c.CloseWrite()
			}()
		}
	}()
	return ln.Addr().String()
}

// leafOptions are Options for a connection to a server with a leaf of
// w's CA, by IP address, checking the name localhost.
func (w *ocspWorld) options(c *prevalidate.Cache, pol prevalidate.OCSPPolicy) dial.Options {
	return dial.Options{Mode: "auto", TLS: &tls13.Config{RootCAs: w.ca.Pool(), ServerName: "localhost"}, Cache: c, OCSP: pol,
		Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: dial.NewMemory()}
}

// Without prefetch an enabled OCSP check is on the critical path (a
// request per connection until an answer is kept); with prefetch it is
// done before: the responder can be gone by the time of the connection,
// even under hard-fail, and nothing is verified or asked.
func TestOCSPOnAndOffTheCriticalPath(t *testing.T) {
	w := startOCSP(t)
	good := serveLeaf(t, w.good)

	c := w.cache(t)
	r, err := dial.Connect(ctxT(t), good, w.options(c, prevalidate.OCSPHardFail))
	if err != nil {
		t.Fatal(err)
	}
	r.Conn.Close()
	if prevalidate.OCSPFetches(c) != 1 || r.Report.Prefetch != "" {
		t.Fatalf("without prefetch: %d OCSP requests during the connection, want 1", prevalidate.OCSPFetches(c))
	}

	c = w.cache(t)
	p := prevalidate.Prefetch(ctxT(t), w.options(c, prevalidate.OCSPHardFail).Prevalidation(), good)[0]
	if p.Err != nil || p.OCSP != "good" || p.ChainFrom != "handshake" || !p.ServerContacted {
		t.Fatalf("prefetched %+v", p)
	}
	if p.ExpiresBy != "OCSP nextUpdate" {
		t.Fatalf("expires by %q, want the OCSP answer's nextUpdate (10 minutes, before the certificate)", p.ExpiresBy)
	}
	w.responder.stop()
	v0 := tls13.ChainVerifications()
	r, err = dial.Connect(ctxT(t), good, w.options(c, prevalidate.OCSPHardFail))
	if err != nil {
		t.Fatalf("hard-fail with the answer prefetched, responder gone: %v", err)
	}
	r.Conn.Close()
	if r.Report.Prefetch != dial.PrefetchValidated || prevalidate.OCSPFetches(c) != 1 || tls13.ChainVerifications() != v0 {
		t.Fatalf("prefetched: %q, %d OCSP requests, %d chain verifications", r.Report.Prefetch, prevalidate.OCSPFetches(c), tls13.ChainVerifications()-v0)
	}
	// The responder is down now: without the prefetched answer, hard-fail
	// refuses and soft-fail lets the connection through.
	if _, err := dial.Connect(ctxT(t), good, w.options(w.cache(t), prevalidate.OCSPHardFail)); !errors.Is(err, prevalidate.ErrOCSPUnavailable) {
		t.Fatalf("hard-fail, responder down: %v", err)
	}
	r, err = dial.Connect(ctxT(t), good, w.options(w.cache(t), prevalidate.OCSPSoftFail))
	if err != nil {
		t.Fatalf("soft-fail, responder down: %v", err)
	}
	r.Conn.Close()
}

// A revoked certificate is refused under either policy, prefetched or
// not; its prefetch caches no verified chain.
func TestOCSPRevokedServer(t *testing.T) {
	w := startOCSP(t)
	revoked := serveLeaf(t, w.revoked)
	for _, pol := range []prevalidate.OCSPPolicy{prevalidate.OCSPSoftFail, prevalidate.OCSPHardFail} {
		c := w.cache(t)
		if _, err := dial.Connect(ctxT(t), revoked, w.options(c, pol)); !errors.Is(err, revocation.ErrRevoked) {
			t.Fatalf("%s: %v", pol, err)
		}
		p := prevalidate.Prefetch(ctxT(t), w.options(c, pol).Prevalidation(), revoked)[0]
		if p.Err == nil || !strings.Contains(p.Error, "revoked") || !strings.Contains(p.ChainError, "revoked") || len(p.Chain) != 0 || c.Len() != 0 {
			t.Fatalf("%s: prefetched %+v", pol, p)
		}
		if _, err := dial.Connect(ctxT(t), revoked, w.options(c, pol)); !errors.Is(err, revocation.ErrRevoked) {
			t.Fatalf("%s after prefetch: %v", pol, err)
		}
	}
}
