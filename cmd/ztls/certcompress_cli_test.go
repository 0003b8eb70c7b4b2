package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// TestCLICertCompression: 'ztls serve --cert-compression' compresses the
// chain it sends (RFC 8879) with the first algorithm of its list that the
// client offers; a client offering none of them, or a server without the
// flag, gets and sends it whole. 'ztls connect --cert-compression' offers
// compression and its report says which algorithm the chain came with.
// Bad names are refused with the valid ones.
func TestCLICertCompression(t *testing.T) {
	ztlsBinary(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "rsa2048")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "rsa2048", Intermediate: true, IntermediateKeyType: "rsa2048",
		DNSNames: []string{"localhost"}}).WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)

	line := start(t, "serving TLS 1.3 on", "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key,
		"--respond", "hello", "--cert-compression", "zstd,brotli")
	addr := logAttr(line, "addr")
	plainLine := start(t, "serving TLS 1.3 on", "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key, "--respond", "hello")
	plainAddr := logAttr(plainLine, "addr")

	got := func(addr string, offer ...tls13.CertCompressionAlgorithm) tls13.CertCompressionAlgorithm {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := tls13.DialContext(ctx, "tcp", addr, &tls13.Config{ServerName: "localhost", RootCAs: roots, CertificateCompression: offer})
		if err != nil {
			t.Fatalf("handshake with %s offering %v: %v", addr, offer, err)
		}
		defer c.Close()
		return c.ConnectionState().CertificateCompression
	}
	for _, tc := range []struct {
		addr  string
		offer []tls13.CertCompressionAlgorithm
		want  tls13.CertCompressionAlgorithm
	}{
		{addr, []tls13.CertCompressionAlgorithm{tls13.CertCompressionBrotli}, tls13.CertCompressionBrotli},
		{addr, []tls13.CertCompressionAlgorithm{tls13.CertCompressionZlib, tls13.CertCompressionBrotli, tls13.CertCompressionZstd}, tls13.CertCompressionZstd},
		{addr, []tls13.CertCompressionAlgorithm{tls13.CertCompressionZlib}, 0},
		{addr, nil, 0},
		{plainAddr, []tls13.CertCompressionAlgorithm{tls13.CertCompressionBrotli}, 0},
	} {
		if a := got(tc.addr, tc.offer...); a != tc.want {
			t.Errorf("server at %s, client offering %v: certificate compressed with %v, want %v", tc.addr, tc.offer, a, tc.want)
		}
	}

	// The CLI client: its report names the algorithm.
	out, stderr, code := runCode(t, "connect", addr, "--mode", "tls", "--ca", caFile, "--servername", "localhost",
		"--data", "GET /", "--cert-compression", "brotli", "--json", "--resolver", "127.0.0.1:1")
	var rep dial.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("connect --cert-compression brotli: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	if rep.TLS.CertificateCompression != "brotli" {
		t.Fatalf("connect --cert-compression brotli: report says %q, want brotli", rep.TLS.CertificateCompression)
	}
	out, stderr, code = runCode(t, "connect", addr, "--mode", "tls", "--ca", caFile, "--servername", "localhost",
		"--data", "GET /", "--cert-compression", "zstd", "--resolver", "127.0.0.1:1")
	if code != 0 || !strings.Contains(out+stderr, "zstd-compressed") {
		t.Fatalf("connect --cert-compression zstd: exit %d, the text report does not say zstd-compressed\n%s\n%s", code, out, stderr)
	}

	for bad, want := range map[string]string{"lz4": "zlib, brotli, zstd", "0x0004": "zlib, brotli, zstd", "brotli,brotli": "listed twice"} {
		_, stderr, code := runCode(t, "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key, "--cert-compression", bad)
		if code == 0 || !strings.Contains(stderr, "--cert-compression") || !strings.Contains(stderr, want) {
			t.Errorf("serve --cert-compression %s: exit %d, %s; want %q", bad, code, stderr, want)
		}
	}
}
