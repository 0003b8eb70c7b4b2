//go:build linux

package prevalidate_test

// The truncated handshake (a host without Z-data) against OpenSSL,
// GnuTLS and crypto/tls servers: the prefetch reads the server's
// Certificate, verifies it and closes; the real handshake that meets
// the same leaf then verifies no chain, and one that meets another leaf
// verifies it as usual.

import (
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/tls13"
)

// truncatedPKI is a CA and a leaf for localhost signed through an
// intermediate, written for the external servers.
type truncatedPKI struct {
	ca            *testpki.CA
	leaf          *testpki.Leaf
	certFile, key string
	dir           string
}

func newTruncatedPKI(t *testing.T) *truncatedPKI {
	p := &truncatedPKI{ca: testpki.NewCA(t, "ecdsa-p256"), dir: t.TempDir()}
	p.leaf = p.ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"localhost"}, Intermediate: true})
	p.certFile, p.key = p.leaf.WritePEM(t, p.dir)
	return p
}

func (p *truncatedPKI) options(c *prevalidate.Cache) dial.Options {
	return dial.Options{Mode: "auto", TLS: &tls13.Config{RootCAs: p.ca.Pool(), ServerName: "localhost"}, Cache: c,
		Request: []byte("ping\n"), ReplaySafe: true, Memory: dial.NewMemory()}
}

// prefetchHandshake prefetches addr by a truncated handshake and checks
// what it says.
func (p *truncatedPKI) prefetchHandshake(t *testing.T, c *prevalidate.Cache, addr string) {
	t.Helper()
	v0 := tls13.ChainVerifications()
	got := prevalidate.Prefetch(ctxT(t), p.options(c).Prevalidation(), addr)[0]
	if got.Err != nil {
		t.Fatal(got.Err)
	}
	if got.ChainFrom != "handshake" || !got.ServerContacted || len(got.Chain) != 3 || got.ExpiresBy != "certificate NotAfter" {
		t.Fatalf("prefetched %+v", got)
	}
	if n := tls13.ChainVerifications() - v0; n != 1 {
		t.Fatalf("the prefetch verified %d chains, want 1", n)
	}
}

// connectPrefetched connects to addr with c and returns the chain
// verifications the connection made.
func (p *truncatedPKI) connectPrefetched(t *testing.T, c *prevalidate.Cache, addr string) (uint64, *dial.Result) {
	t.Helper()
	v0 := tls13.ChainVerifications()
	r, err := dial.Connect(ctxT(t), addr, p.options(c))
	if err != nil {
		t.Fatal(err)
	}
	r.Conn.Close()
	return tls13.ChainVerifications() - v0, r
}

func TestTruncatedHandshakeOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed (make deps installs it)")
	}
	p := newTruncatedPKI(t)
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// s_server sends the first certificate of -cert, the rest from -cert_chain.
	inter := filepath.Join(p.dir, "intermediate.pem")
	if err := os.WriteFile(inter, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.leaf.Chain[1]}), 0o600); err != nil {
		t.Fatal(err)
	}
	testproc.Start(t, "openssl", "s_server", "-accept", addr, "-cert", p.certFile, "-cert_chain", inter, "-key", p.key, "-tls1_3", "-quiet")
	testproc.WaitListening(t, addr)
	c := prevalidate.NewCache(prevalidate.CacheOptions{})
	p.prefetchHandshake(t, c, addr)
	if n, r := p.connectPrefetched(t, c, addr); n != 0 || r.Report.Prefetch != dial.PrefetchValidated || len(r.Report.PeerChain) != 2 || !hasStep(r.Report, "prefetched") {
		t.Fatalf("OpenSSL, prefetched: %d chain verifications, %+v", n, r.Report)
	}
}

func TestTruncatedHandshakeGnuTLS(t *testing.T) {
	p := newTruncatedPKI(t)
	const port = 4433 // a namespace of its own has every port free
	srv := startInNetns(t, p.dir, "gnutls-serv", port, "", "--port", strconv.Itoa(port), "--echo",
		"--x509certfile", p.certFile, "--x509keyfile", p.key, "--disable-client-cert", "--priority", "NORMAL:-VERS-ALL:+VERS-TLS1.3")
	c := prevalidate.NewCache(prevalidate.CacheOptions{})
	prevalidate.SetDialer(c, func(ctx context.Context, _, addr string) (net.Conn, error) { return srv.dial(ctx, addr) })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	p.prefetchHandshake(t, c, addr)

	// The connection's handshake as Connect makes it from the entry
	// (dial's TCP reaches no other namespace): the same leaf, no chain
	// verification.
	cfg := p.options(c).TLS
	h := c.Lookup("127.0.0.1", port, prevalidate.Policy{TLS: cfg}, clock.Now())
	if h == nil || !h.Validated {
		t.Fatal("no validated entry")
	}
	cfg = cfg.Clone()
	cfg.VerifiedChains = h.VerifiedChains
	raw, err := srv.dial(ctxT(t), addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	conn := tls13.Client(raw, cfg)
	defer conn.Close()
	v0 := tls13.ChainVerifications()
	if err := conn.Handshake(); err != nil {
		t.Fatal(err)
	}
	if n := tls13.ChainVerifications() - v0; n != 0 || len(conn.ConnectionState().VerifiedChains) == 0 {
		t.Fatalf("GnuTLS, prefetched: %d chain verifications", n)
	}
	conn.Write([]byte("ping\n"))
	buf := make([]byte, 5)
	if n, err := conn.Read(buf); err != nil || string(buf[:n]) != "ping\n" {
		t.Fatalf("echo: %q %v", buf[:n], err)
	}
}

func TestTruncatedHandshakeGoServer(t *testing.T) {
	p := newTruncatedPKI(t)
	other := p.ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"localhost"}, Intermediate: true})
	var serveOther, handshakes atomic.Int32
	pair := func(l *testpki.Leaf) tls.Certificate { return tls.Certificate{Certificate: l.Chain, PrivateKey: l.Key} }
	first, second := pair(p.leaf), pair(other)
	ln := testproc.ServeGoTLS(t, "127.0.0.1:0", &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		if serveOther.Load() != 0 {
			return &second, nil
		}
		return &first, nil
	}}, func(c *tls.Conn) {
		if c.Handshake() == nil {
			handshakes.Add(1)
		}
		buf := make([]byte, 100)
		if n, err := c.Read(buf); err == nil {
			c.Write(buf[:n])
		}
	})
	addr := ln.Addr().String()
	c := prevalidate.NewCache(prevalidate.CacheOptions{})
	p.prefetchHandshake(t, c, addr)
	if handshakes.Load() != 0 {
		t.Fatal("the truncated handshake completed a handshake on the server")
	}
	if n, r := p.connectPrefetched(t, c, addr); n != 0 || r.Report.Prefetch != dial.PrefetchValidated {
		t.Fatalf("crypto/tls, prefetched: %d chain verifications, %+v", n, r.Report)
	}
	// The server now presents another leaf: verified as usual.
	serveOther.Store(1)
	if n, r := p.connectPrefetched(t, c, addr); n != 1 || r.Report.Prefetch != dial.PrefetchValidated {
		t.Fatalf("crypto/tls, another leaf: %d chain verifications, want 1", n)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
