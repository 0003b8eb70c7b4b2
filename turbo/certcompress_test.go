package turbo_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"testing/cryptotest"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// Certificate compression (RFC 8879) shrinks the server's first flight,
// so TurboTLS needs fewer response datagrams.

type compressChain struct {
	pool *x509.CertPool
	cert tls13.Certificate
	now  time.Time // when the chain is valid; zero: clock.Now()
}

// newCompressChain issues a server chain of intermediates+1 certificates,
// every key of keyType.
func newCompressChain(t testing.TB, keyType string, intermediates int) compressChain {
	t.Helper()
	ca := testpki.NewCA(t, keyType)
	l := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, Intermediates: intermediates, IntermediateKeyType: keyType})
	return compressChain{pool: ca.Pool(), cert: tls13.Certificate{Chain: l.Chain, PrivateKey: l.Key, Leaf: l.Cert}}
}

// fixedChain is newCompressChain with the same bytes on every run, so
// that the flight table's figures are too: keys and signatures from a
// deterministic random source (testing/cryptotest, seeded per chain),
// fixed validity, names as testpki gives them. Random chains move a
// flight by a few bytes from run to run (an ECDSA signature's DER length
// varies, a serial's, and what the compressors find to match), which is
// enough to cross a datagram boundary (a multiple of 1179 bytes).
func fixedChain(t *testing.T, keyType string, intermediates int) compressChain {
	t.Helper()
	cryptotest.SetGlobalRandom(t, chainSeed(keyType, intermediates))
	notBefore := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	newKey := func() crypto.Signer {
		var k crypto.Signer
		var err error
		if keyType == "rsa2048" {
			k, err = rsa.GenerateKey(rand.Reader, 2048)
		} else {
			k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		}
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := func() *big.Int { // 127 bits, as testpki's
		n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
		if err != nil {
			t.Fatal(err)
		}
		return n.Add(n, big.NewInt(1))
	}
	issue := func(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte) {
		tmpl.SerialNumber = serial()
		tmpl.NotBefore, tmpl.NotAfter = notBefore, notBefore.AddDate(10, 0, 0)
		tmpl.BasicConstraintsValid = true
		if parent == nil {
			parent = tmpl
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c, der
	}
	caTmpl := func(cn string, pathLen int) *x509.Certificate {
		return &x509.Certificate{
			Subject:  pkix.Name{CommonName: cn, Organization: []string{"ztls tests"}},
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
			IsCA:     true, MaxPathLen: pathLen, MaxPathLenZero: pathLen == 0,
		}
	}
	rootKey := newKey()
	root, _ := issue(caTmpl("ztls test CA ("+keyType+")", 3), nil, rootKey.Public(), rootKey)
	issuer, issuerKey := root, rootKey
	var inters [][]byte // root side first
	for i := range intermediates {
		cn := "ztls test intermediate CA"
		if i > 0 {
			cn = fmt.Sprintf("ztls test intermediate CA %d", i+1)
		}
		k := newKey()
		var der []byte
		issuer, der = issue(caTmpl(cn, intermediates-1-i), issuer, k.Public(), issuerKey)
		issuerKey = k
		inters = append(inters, der)
	}
	leafKey := newKey()
	usage := x509.KeyUsageDigitalSignature
	if keyType == "rsa2048" {
		usage |= x509.KeyUsageKeyEncipherment
	}
	leaf, der := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "localhost", Organization: []string{"ztls tests"}},
		KeyUsage:    usage,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "server.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}, issuer, leafKey.Public(), issuerKey)
	chain := [][]byte{der}
	for i := len(inters) - 1; i >= 0; i-- {
		chain = append(chain, inters[i])
	}
	pool := x509.NewCertPool()
	pool.AddCert(root)
	return compressChain{pool: pool, cert: tls13.Certificate{Chain: chain, PrivateKey: leafKey, Leaf: leaf}, now: notBefore.AddDate(1, 0, 0)}
}

// chainSeed names a deterministic random stream after what it makes.
func chainSeed(parts ...any) uint64 {
	var h uint64 = 14695981039346656037 // FNV-1a
	for _, c := range fmt.Sprint(parts...) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// startCompressServer serves TurboTLS (UDP and TCP on one port number)
// with cfg; each TCP connection gets its handshake and an echo of one read.
func startCompressServer(t *testing.T, cfg *tls13.Config) (tcp, udp netip.AddrPort, srv *turbo.TLSServer) {
	t.Helper()
	srv = turbo.NewTLSServer(cfg, nil, turbo.Config{})
	tcp, stop := serveTurbo(t, srv, nil, echoOnce)
	t.Cleanup(stop)
	return tcp, tcp, srv
}

// TestTurboCertCompression: a TurboTLS handshake whose server flight is
// compressed completes over UDP, each response datagram answering one
// request, and the flight takes fewer datagrams than uncompressed.
func TestTurboCertCompression(t *testing.T) {
	// An ECDSA chain of three certificates: with the default group
	// (X25519MLKEM768) its flight needs 3 datagrams, 2 when compressed.
	ch := newCompressChain(t, "ecdsa-p256", 2)
	flights := map[bool]int{}
	for _, compress := range []bool{false, true} {
		scfg := &tls13.Config{Certificates: []tls13.Certificate{ch.cert}}
		ccfg := &tls13.Config{RootCAs: ch.pool, ServerName: "localhost"}
		if compress {
			scfg.CertificateCompression = []tls13.CertCompressionAlgorithm{tls13.CertCompressionBrotli}
			ccfg.CertificateCompression = []tls13.CertCompressionAlgorithm{tls13.CertCompressionZstd, tls13.CertCompressionBrotli}
		}
		tcp, udp, _ := startCompressServer(t, scfg)
		res, err := turbo.Dial(dialCtx(t), tcp, udp, &turbo.ClientConfig{TLS: ccfg, Wait: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if !res.Turbo {
			t.Fatalf("compress=%v: not turbo: %s", compress, res.FallbackReason)
		}
		c := res.Conn
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 4)
		if _, err := c.Read(buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q, %v", buf, err)
		}
		c.Close()
		st := c.ConnectionState()
		want := tls13.CertCompressionAlgorithm(0)
		if compress {
			want = tls13.CertCompressionBrotli
		}
		if st.CertificateCompression != want || len(st.VerifiedChains) == 0 {
			t.Fatalf("compress=%v: compressed with %v, %d chains", compress, st.CertificateCompression, len(st.VerifiedChains))
		}
		if res.ResponsesReceived != wire.DatagramsFor(res.ServerFlight) || res.RequestsSent < res.ResponsesReceived {
			t.Fatalf("compress=%v: %+v", compress, res)
		}
		flights[compress] = res.ServerFlight
	}
	if wire.DatagramsFor(flights[true]) >= wire.DatagramsFor(flights[false]) {
		t.Fatalf("flight of %d bytes compressed, %d not: no datagram saved", flights[true], flights[false])
	}
}

// firstFlight runs a ClientHello through a server engine and returns the
// server's first flight (ServerHello .. Finished), checked by the client.
func firstFlight(t testing.TB, ch compressChain, group uint16, alg tls13.CertCompressionAlgorithm) int {
	t.Helper()
	ccfg := &tls13.Config{RootCAs: ch.pool, ServerName: "localhost", Groups: []tls13.CurveID{tls13.CurveID(group)}}
	if !ch.now.IsZero() {
		ccfg.Time = func() time.Time { return ch.now }
	}
	scfg := &tls13.Config{Certificates: []tls13.Certificate{ch.cert}}
	if alg != 0 {
		ccfg.CertificateCompression = []tls13.CertCompressionAlgorithm{alg}
		scfg.CertificateCompression = []tls13.CertCompressionAlgorithm{alg}
	}
	c, s := tls13.NewClientEngine(ccfg), tls13.NewServerEngine(scfg)
	if err := c.Start(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Feed(c.Output()); err != nil {
		t.Fatal(err)
	}
	flight := append([]byte(nil), s.Output()...)
	if err := c.Feed(flight); err != nil || !c.HandshakeComplete() {
		t.Fatalf("client on the flight: %v", err)
	}
	if got := c.ConnectionState().CertificateCompression; got != alg {
		t.Fatalf("compressed with %v, want %v", got, alg)
	}
	var id turbo.ConnID
	dgrams, err := wire.Fragment(wire.TypeResponse, id, flight)
	if err != nil || len(dgrams) != wire.DatagramsFor(len(flight)) {
		t.Fatalf("%d datagrams, %v", len(dgrams), err)
	}
	return len(flight)
}

// TestCertCompressionFlightTable measures the server's first flight and
// its TurboTLS datagrams for RSA-2048 and ECDSA P-256 chains of 2 and 3
// certificates, with each algorithm and without. Every algorithm must
// shrink every flight. With -v it prints the table of docs/benchmarks.md
// ("Certificate compression"). Chains, keys and every handshake's
// randomness are deterministic (fixedChain; each flight reseeds), so the
// table is the same on every run of one Go version.
func TestCertCompressionFlightTable(t *testing.T) {
	algs := []tls13.CertCompressionAlgorithm{0, tls13.CertCompressionZlib, tls13.CertCompressionBrotli, tls13.CertCompressionZstd}
	var b strings.Builder
	fmt.Fprintf(&b, "| chain | group | %s |\n|---|---|", "none | zlib | brotli | zstd")
	for range algs {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, kt := range []string{"rsa2048", "ecdsa-p256"} {
		for _, inter := range []int{1, 2} {
			ch := fixedChain(t, kt, inter)
			chainBytes := 0
			for _, der := range ch.cert.Chain {
				chainBytes += len(der)
			}
			for _, g := range []uint16{uint16(tls13.X25519MLKEM768), uint16(tls13.X25519)} {
				fmt.Fprintf(&b, "| %s, %d certs (%d B DER) | %s |", kt, inter+1, chainBytes, tls13.CurveID(g).String())
				var plain int
				for _, a := range algs {
					cryptotest.SetGlobalRandom(t, chainSeed(kt, inter, g, a))
					n := firstFlight(t, ch, g, a)
					if a == 0 {
						plain = n
						fmt.Fprintf(&b, " %d B, %d dgrams |", n, wire.DatagramsFor(n))
						continue
					}
					if n >= plain {
						t.Errorf("%s, %d certs, %s, %v: flight %d bytes, %d uncompressed", kt, inter+1, tls13.CurveID(g).String(), a, n, plain)
					}
					fmt.Fprintf(&b, " %d B (−%.0f %%), %d dgrams |", n, 100*float64(plain-n)/float64(plain), wire.DatagramsFor(n))
				}
				b.WriteString("\n")
			}
		}
	}
	t.Log("\n" + b.String())
}
