package tls13

import (
	"bytes"
	"compress/zlib"
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

var allCertCompression = []CertCompressionAlgorithm{CertCompressionZlib, CertCompressionBrotli, CertCompressionZstd}

// chainPKI is a root, a server chain and a client chain, each of
// intermediates+1 certificates, all of one key type.
type chainPKI struct {
	pool           *x509.CertPool
	server, client Certificate
}

func newChainPKI(t testing.TB, keyType string, intermediates int) *chainPKI {
	t.Helper()
	ca := testpki.NewCA(t, keyType)
	srv := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, Intermediates: intermediates, IntermediateKeyType: keyType})
	cli := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, Intermediates: intermediates, IntermediateKeyType: keyType,
		Client: true, DNSNames: []string{"client.test"}})
	return &chainPKI{
		pool:   ca.Pool(),
		server: Certificate{Chain: srv.Chain, PrivateKey: srv.Key, Leaf: srv.Cert},
		client: Certificate{Chain: cli.Chain, PrivateKey: cli.Key, Leaf: cli.Cert},
	}
}

// configs returns a client and a server with compression lists cc and sc,
// the server requiring and verifying a client certificate.
func (p *chainPKI) configs(cc, sc []CertCompressionAlgorithm) (*Config, *Config) {
	ccfg := &Config{RootCAs: p.pool, ServerName: "localhost", Certificates: []Certificate{p.client}, CertificateCompression: cc}
	scfg := &Config{Certificates: []Certificate{p.server}, ClientAuth: RequireAndVerifyClientCert, ClientCAs: p.pool,
		CertificateCompression: sc}
	return ccfg, scfg
}

// TestCertCompressionBothRoles: with every algorithm, ztls client and ztls
// server each send their chain compressed, verify the other's, and the
// connection carries data.
func TestCertCompressionBothRoles(t *testing.T) {
	for _, kt := range []string{"ecdsa-p256", "rsa2048"} {
		p := newChainPKI(t, kt, 1)
		for _, a := range allCertCompression {
			t.Run(kt+"/"+a.String(), func(t *testing.T) {
				ccfg, scfg := p.configs([]CertCompressionAlgorithm{a}, []CertCompressionAlgorithm{a})
				cli, srv, cerr, serr := pair(t, ccfg, scfg)
				if cerr != nil || serr != nil {
					t.Fatalf("client: %v; server: %v", cerr, serr)
				}
				for role, st := range map[string]ConnectionState{"client": cli.ConnectionState(), "server": srv.ConnectionState()} {
					if st.CertificateCompression != a || st.ClientCertificateCompression != a {
						t.Fatalf("%s: server certificate compressed with %v, client's with %v; want %v",
							role, st.CertificateCompression, st.ClientCertificateCompression, a)
					}
					if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) != 2 {
						t.Fatalf("%s: %d verified chains, %d peer certificates", role, len(st.VerifiedChains), len(st.PeerCertificates))
					}
				}
				go echo(srv)
				roundTrip(t, cli, "compressed "+a.String())
			})
		}
	}
}

// TestCertCompressionNegotiation: each side sends with the first of its
// own list that the peer offered; with none in common, or none offered,
// the Certificate goes uncompressed.
func TestCertCompressionNegotiation(t *testing.T) {
	p := newChainPKI(t, "ecdsa-p256", 1)
	z, b, s := CertCompressionZlib, CertCompressionBrotli, CertCompressionZstd
	for _, tc := range []struct {
		client, server   []CertCompressionAlgorithm
		wantSrv, wantCli CertCompressionAlgorithm
	}{
		{client: []CertCompressionAlgorithm{s, b, z}, server: []CertCompressionAlgorithm{b, z}, wantSrv: b, wantCli: b},
		{client: []CertCompressionAlgorithm{z, b}, server: []CertCompressionAlgorithm{s, b, z}, wantSrv: b, wantCli: z},
		{client: []CertCompressionAlgorithm{z}, server: []CertCompressionAlgorithm{b}},
		{client: nil, server: []CertCompressionAlgorithm{b}},
		{client: []CertCompressionAlgorithm{b}, server: nil},
	} {
		t.Run(fmt.Sprintf("client %v server %v", tc.client, tc.server), func(t *testing.T) {
			ccfg, scfg := p.configs(tc.client, tc.server)
			cli, srv, cerr, serr := pair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatalf("client: %v; server: %v", cerr, serr)
			}
			for _, st := range []ConnectionState{cli.ConnectionState(), srv.ConnectionState()} {
				if st.CertificateCompression != tc.wantSrv || st.ClientCertificateCompression != tc.wantCli {
					t.Fatalf("server's certificate by %v, client's by %v; want %v, %v",
						st.CertificateCompression, st.ClientCertificateCompression, tc.wantSrv, tc.wantCli)
				}
			}
		})
	}
}

func TestCertCompressionConfigErrors(t *testing.T) {
	p := newChainPKI(t, "ecdsa-p256", 1)
	for _, bad := range [][]CertCompressionAlgorithm{{4}, {CertCompressionZlib, CertCompressionZlib}} {
		ccfg, _ := p.configs(bad, nil)
		c := newEngine(ccfg, true)
		if err := c.startClient(nil, nil, nil); err == nil || !strings.Contains(err.Error(), "CertificateCompression") {
			t.Fatalf("%v: startClient = %v", bad, err)
		}
		if out := c.takeOutput(); len(out) != 0 {
			t.Fatalf("%v: sent %x", bad, out)
		}
	}
	if s := CertCompressionAlgorithm(9).String(); s != "0x0009" {
		t.Fatalf("String() = %q", s)
	}
}

// serverFlight runs a ClientHello through a server engine and returns the
// server's first flight (ServerHello through Finished) as records.
func serverFlight(t testing.TB, ccfg, scfg *Config) (client *engine, flight []byte) {
	t.Helper()
	c, s := newEngine(ccfg, true), newEngine(scfg, false)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	if err := s.feed(c.takeOutput()); err != nil {
		t.Fatal(err)
	}
	return c, s.takeOutput()
}

// TestCertCompressionShrinksFlight: the point for TurboTLS, the server's
// first flight is smaller with each algorithm.
func TestCertCompressionShrinksFlight(t *testing.T) {
	p := newChainPKI(t, "rsa2048", 2)
	ccfg, scfg := p.configs(nil, nil)
	scfg.ClientAuth = NoClientCert
	_, plain := serverFlight(t, ccfg, scfg)
	for _, a := range allCertCompression {
		ccfg.CertificateCompression = []CertCompressionAlgorithm{a}
		scfg.CertificateCompression = []CertCompressionAlgorithm{a}
		c, flight := serverFlight(t, ccfg, scfg)
		if err := c.feed(flight); err != nil {
			t.Fatalf("%v: %v", a, err)
		}
		if c.info.CertificateCompression != a || len(flight) >= len(plain)-300 {
			t.Fatalf("%v: compressed %v, flight of %d bytes, %d without", a, c.info.CertificateCompression, len(flight), len(plain))
		}
	}
}

// TestCertCompressionTranscript: the server's CertificateVerify signs a
// transcript holding the CompressedCertificate message as sent (RFC 8879,
// Section 4), checked here outside the engine from the decrypted flight.
func TestCertCompressionTranscript(t *testing.T) {
	p := newChainPKI(t, "ecdsa-p256", 1)
	ccfg, scfg := p.configs([]CertCompressionAlgorithm{CertCompressionBrotli}, []CertCompressionAlgorithm{CertCompressionBrotli})
	scfg.ClientAuth = NoClientCert
	var keys bytes.Buffer
	scfg.KeyLogWriter = &keys
	scfg.CipherSuites = []CipherSuite{TLS_AES_128_GCM_SHA256}
	c, s := newEngine(ccfg, true), newEngine(scfg, false)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	ch := c.takeOutput()
	if err := s.feed(ch); err != nil {
		t.Fatal(err)
	}
	flight := s.takeOutput()

	var shs []byte
	for _, line := range strings.Split(keys.String(), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "SERVER_HANDSHAKE_TRAFFIC_SECRET" {
			fmt.Sscanf(f[2], "%x", &shs)
		}
	}
	su := suite.Lookup(uint16(TLS_AES_128_GCM_SHA256))
	hc, err := record.NewHalfConn(su, shs)
	if err != nil {
		t.Fatal(err)
	}
	var d record.Deframer
	d.Write(ch)
	_, chMsg, _, _ := d.Next()
	chMsg = append([]byte(nil), chMsg...)
	d.Write(flight)
	var hs []byte
	for {
		typ, payload, ok, err := d.Next()
		if err != nil || !ok {
			break
		}
		switch typ {
		case record.TypeHandshake:
			hs = append(hs, payload...) // the ServerHello, in the clear
		case record.TypeApplicationData:
			_, pt, err := hc.Open(payload, 0)
			if err != nil {
				t.Fatal(err)
			}
			hs = append(hs, pt...)
		}
	}
	var hb wire.HandshakeBuffer
	hb.Write(hs)
	tr := keyschedule.NewTranscript(su.Hash)
	tr.Write(chMsg)
	var sawCompressed bool
	for {
		typ, msg, ok, err := hb.Next()
		if err != nil || !ok {
			t.Fatalf("no CertificateVerify in the flight (%v)", err)
		}
		if typ == wire.TypeCertificate {
			t.Fatal("the server sent its Certificate uncompressed")
		}
		if typ == wire.TypeCertificateVerify {
			cv, err := wire.ParseCertificateVerify(msg)
			if err != nil {
				t.Fatal(err)
			}
			if !sawCompressed {
				t.Fatal("no CompressedCertificate before CertificateVerify")
			}
			if err := sig.Verify(p.server.Leaf.PublicKey, cv.Scheme, sig.ServerContext, tr.Sum(), cv.Signature); err != nil {
				t.Fatalf("CertificateVerify does not cover the CompressedCertificate as sent: %v", err)
			}
			break
		}
		sawCompressed = sawCompressed || typ == wire.TypeCompressedCertificate
		tr.Write(msg)
	}
	if err := c.feed(flight); err != nil || c.info.CertificateCompression != CertCompressionBrotli {
		t.Fatalf("client: %v, %v", err, c.info.CertificateCompression)
	}
}

// compressedMsg builds a CompressedCertificate message by hand.
func compressedMsg(t testing.TB, a CertCompressionAlgorithm, n int, data []byte) []byte {
	t.Helper()
	b, err := (&wire.CompressedCertificate{Algorithm: uint16(a), UncompressedLength: uint32(n), Compressed: data}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func zlibBytes(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zlib.NewWriter(&buf)
	w.Write(data)
	w.Close()
	return buf.Bytes()
}

// TestReadCompressedCertificateRejects: what RFC 8879, Section 4 and the
// decompression-bomb bound make the receiver refuse, with the alert.
func TestReadCompressedCertificateRejects(t *testing.T) {
	p := newChainPKI(t, "ecdsa-p256", 1)
	cm := &wire.Certificate{}
	for _, der := range p.server.Chain {
		cm.Entries = append(cm.Entries, wire.CertificateEntry{Data: der})
	}
	plain, err := cm.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	body := plain[4:]
	offer, err := wire.CompressCertificateExtension([]uint16{uint16(CertCompressionZlib), uint16(CertCompressionZstd)})
	if err != nil {
		t.Fatal(err)
	}
	ours := []wire.Extension{offer}
	good := compressedMsg(t, CertCompressionZlib, len(body), zlibBytes(t, body))
	brotliMsg, err := compressedCertificateMessage(CertCompressionBrotli, plain)
	if err != nil {
		t.Fatal(err)
	}
	bomb := zlibBytes(t, make([]byte, 8<<20)) // 8 MiB of zeros in about 8 KiB

	for _, tc := range []struct {
		name  string
		msg   []byte
		ours  []wire.Extension
		max   int
		alert Alert
	}{
		{"algorithm not offered", brotliMsg, ours, 0, AlertIllegalParameter},
		{"nothing offered", good, nil, 0, AlertIllegalParameter},
		{"unknown algorithm", compressedMsg(t, 9, len(body), []byte{1}), ours, 0, AlertIllegalParameter},
		{"length one short", compressedMsg(t, CertCompressionZlib, len(body)-1, zlibBytes(t, body)), ours, 0, AlertBadCertificate},
		{"length one long", compressedMsg(t, CertCompressionZlib, len(body)+1, zlibBytes(t, body)), ours, 0, AlertBadCertificate},
		{"corrupt data", compressedMsg(t, CertCompressionZlib, len(body), []byte("not zlib at all")), ours, 0, AlertBadCertificate},
		{"corrupt zstd", compressedMsg(t, CertCompressionZstd, len(body), []byte{0x28, 0xb5, 0x2f, 0xfd, 1, 2, 3}), ours, 0, AlertBadCertificate},
		{"declared length over the limit", compressedMsg(t, CertCompressionZlib, 8<<20, bomb), ours, 0, AlertBadCertificate},
		{"declared length over a configured limit", good, ours, len(body) - 1, AlertBadCertificate},
		{"bomb under a small declared length", compressedMsg(t, CertCompressionZlib, 1000, bomb), ours, 0, AlertBadCertificate},
		{"decompresses to a malformed Certificate", compressedMsg(t, CertCompressionZlib, 3, zlibBytes(t, []byte{0, 0, 0})), ours, 0, AlertDecodeError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(&Config{MaxHandshakeMessage: tc.max}, true)
			c, err := e.readCertificateMessage(wire.TypeCompressedCertificate, tc.msg, tc.ours)
			if c != nil || alert.Of(err) != tc.alert {
				t.Fatalf("got %v, %v (alert %v); want alert %v", c, err, alert.Of(err), tc.alert)
			}
		})
	}
	e := newEngine(&Config{}, true)
	c, err := e.readCertificateMessage(wire.TypeCompressedCertificate, good, ours)
	if err != nil || !bytes.Equal(c.Raw, good) || len(c.Entries) != 2 || e.info.CertificateCompression != CertCompressionZlib {
		t.Fatalf("good message: %v, %v", c, err)
	}
}

// TestCertCompressionLimitEndToEnd: a client whose handshake message limit
// is below the server's uncompressed chain refuses the compressed one too.
func TestCertCompressionLimitEndToEnd(t *testing.T) {
	p := newChainPKI(t, "rsa2048", 2)
	ccfg, scfg := p.configs([]CertCompressionAlgorithm{CertCompressionZstd}, []CertCompressionAlgorithm{CertCompressionZstd})
	scfg.ClientAuth = NoClientCert
	cm := &wire.Certificate{}
	for _, der := range p.server.Chain {
		cm.Entries = append(cm.Entries, wire.CertificateEntry{Data: der})
	}
	plain, err := cm.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	compressed, err := compressedCertificateMessage(CertCompressionZstd, plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(compressed) > len(plain)-100 {
		t.Fatalf("compressed %d bytes to %d", len(plain), len(compressed))
	}
	// The compressed message fits the limit, the chain it holds does not.
	ccfg.MaxHandshakeMessage = (len(plain) + len(compressed)) / 2
	_, _, cerr, serr := pair(t, ccfg, scfg)
	if alertOf(cerr) != int(AlertBadCertificate) || alertOf(serr) != int(AlertBadCertificate) {
		t.Fatalf("client: %v; server: %v", cerr, serr)
	}
}

// TestCertCompressionZTLSOmissionWins: a ZTLS server that may omit its
// Certificate omits it; there is nothing left to compress.
func TestCertCompressionZTLSOmissionWins(t *testing.T) {
	z := newZTLSSetup(t)
	z.ccfg.CertificateCompression = allCertCompression
	z.scfg.CertificateCompression = allCertCompression
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil || string(answer) != "answer to GET /" {
		t.Fatalf("%v %q", err, answer)
	}
	for _, st := range []ConnectionState{c.info, s.info} {
		if !st.CertificateOmitted || st.CertificateCompression != 0 {
			t.Fatalf("omitted %v, compressed with %v", st.CertificateOmitted, st.CertificateCompression)
		}
	}
	// Without cert_hash the server sends its Certificate, compressed.
	z = newZTLSSetup(t)
	z.ccfg.CertificateCompression = []CertCompressionAlgorithm{CertCompressionZstd}
	z.scfg.CertificateCompression = []CertCompressionAlgorithm{CertCompressionZstd}
	z.scfg.Certificates = []Certificate{newChainPKI(t, "ecdsa-p256", 1).server} // another leaf: no omission
	z.ccfg.InsecureSkipVerify = true
	c, _, _, err = z.run(t, []byte("GET /"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.info.CertificateOmitted || c.info.CertificateCompression != CertCompressionZstd {
		t.Fatalf("omitted %v, compressed with %v", c.info.CertificateOmitted, c.info.CertificateCompression)
	}
}

// FuzzDecompressCertificate: the decompression path never panics, never
// returns other than exactly the declared length, and every failure
// carries an alert.
func FuzzDecompressCertificate(f *testing.F) {
	body := bytes.Repeat([]byte("certificate "), 50)
	for _, a := range allCertCompression {
		data, err := compressCertificateBody(a, body)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(a), uint16(len(body)), data)
	}
	f.Fuzz(func(t *testing.T, alg uint8, n uint16, data []byte) {
		a := CertCompressionAlgorithm(alg % 4)
		out, err := decompressCertificate(a, data, int(n), 1<<16)
		if err != nil {
			if out != nil || alert.Of(err) == AlertInternalError {
				t.Fatalf("%v with %v", out, err)
			}
			return
		}
		if len(out) != int(n) {
			t.Fatalf("%d bytes for a declared %d", len(out), n)
		}
	})
}

// FuzzReadCertificateMessage: any CompressedCertificate message either
// yields a Certificate whose Raw is the message as received, or an error
// with an alert.
func FuzzReadCertificateMessage(f *testing.F) {
	p := newChainPKI(f, "ecdsa-p256", 1)
	cm := &wire.Certificate{}
	for _, der := range p.server.Chain {
		cm.Entries = append(cm.Entries, wire.CertificateEntry{Data: der})
	}
	plain, err := cm.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	for _, a := range allCertCompression {
		msg, err := compressedCertificateMessage(a, plain)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(msg)
	}
	var algs []uint16
	for _, a := range allCertCompression {
		algs = append(algs, uint16(a))
	}
	offer, err := wire.CompressCertificateExtension(algs)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		e := newEngine(&Config{MaxHandshakeMessage: 1 << 16}, true)
		c, err := e.readCertificateMessage(wire.TypeCompressedCertificate, msg, []wire.Extension{offer})
		if err != nil {
			if c != nil || alert.Of(err) == AlertInternalError {
				t.Fatalf("%v with %v", c, err)
			}
			return
		}
		if !bytes.Equal(c.Raw, msg) {
			t.Fatal("Raw is not the message as received")
		}
	})
}
