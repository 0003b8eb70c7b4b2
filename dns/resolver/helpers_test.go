package resolver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
)

// testPKI is a throwaway CA and a server certificate for 127.0.0.1, ::1
// and dns.test.
type testPKI struct {
	Pool     *x509.CertPool
	Cert     tls.Certificate
	CAFile   string // PEM files in a temp dir
	CertFile string
	KeyFile  string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "ztls resolver test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "dns.test"},
		DNSNames:     []string{"dns.test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p := &testPKI{
		Pool:     x509.NewCertPool(),
		CAFile:   filepath.Join(dir, "ca.pem"),
		CertFile: filepath.Join(dir, "cert.pem"),
		KeyFile:  filepath.Join(dir, "key.pem"),
	}
	p.Pool.AddCert(ca)
	write := func(path, typ string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.CAFile, "CERTIFICATE", caDER)
	write(p.CertFile, "CERTIFICATE", leafDER)
	write(p.KeyFile, "EC PRIVATE KEY", keyDER)
	p.Cert, err = tls.X509KeyPair(
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// reply builds the answer to q from records in zone-file syntax.
func reply(t testing.TB, q *dns.Msg, records ...string) *dns.Msg {
	t.Helper()
	m := new(dns.Msg)
	m.SetReply(q)
	for _, s := range records {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("bad test record %q: %v", s, err)
		}
		m.Answer = append(m.Answer, rr)
	}
	return m
}

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// udpServer answers each datagram with handle, which writes what it likes
// through pc (the listening socket).
func udpServer(t testing.TB, handle func(pc net.PacketConn, from net.Addr, q *dns.Msg)) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			handle(pc, from, q)
		}
	}()
	return pc.LocalAddr().String()
}

// streamServer is a TCP or DNS-over-TLS test server that reads every
// connection continuously and hands each query to handle, which may answer
// at once, later, out of order, or close the connection.
type streamServer struct {
	Addr    string
	conns   atomic.Int32
	resumed atomic.Int32
	handle  func(s *session, q *dns.Msg, raw []byte)
	closed  chan *session // each session, when its client went away
}

type session struct {
	n    int // 1 for the first connection
	conn net.Conn
	wmu  sync.Mutex
}

func (s *session) send(t testing.TB, m *dns.Msg) {
	b, err := m.Pack()
	if err != nil {
		t.Error(err)
		return
	}
	frame, _ := dnsstream.AppendFrame(nil, b)
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.conn.Write(frame)
}

func startStreamServer(t testing.TB, pki *testPKI, handle func(s *session, q *dns.Msg, raw []byte)) *streamServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if pki != nil {
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{pki.Cert}})
	}
	srv := &streamServer{Addr: ln.Addr().String(), handle: handle}
	serveStream(t, srv, ln)
	return srv
}

// firstA returns the first A record's address of an answer.
func firstA(a *Answer) string {
	if a == nil {
		return ""
	}
	for _, rr := range a.RRs {
		if r, ok := rr.(*dns.A); ok {
			return r.A.String()
		}
	}
	return ""
}

// serveStream accepts connections on ln for srv, in the background, until
// the test ends.
func serveStream(t testing.TB, srv *streamServer, ln net.Listener) {
	if srv.closed == nil {
		srv.closed = make(chan *session, 16)
	}
	var wg sync.WaitGroup
	var open sync.Map
	done := make(chan struct{})
	t.Cleanup(func() {
		ln.Close()
		open.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		<-done
		wg.Wait()
	})
	go acceptLoop(srv, ln, &wg, &open, done)
}

func acceptLoop(srv *streamServer, ln net.Listener, wg *sync.WaitGroup, open *sync.Map, done chan struct{}) {
	defer close(done)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		open.Store(c, true)
		s := &session{n: int(srv.conns.Add(1)), conn: c}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			if tc, ok := c.(*tls.Conn); ok {
				if tc.Handshake() != nil {
					return
				}
				if tc.ConnectionState().DidResume {
					srv.resumed.Add(1)
				}
			}
			buf := make([]byte, dnsstream.MaxMessageSize)
			for {
				frame, err := dnsstream.ReadFrame(c, buf)
				if err != nil {
					if !errors.Is(err, net.ErrClosed) {
						select {
						case srv.closed <- s:
						default:
						}
					}
					return
				}
				q := new(dns.Msg)
				if q.Unpack(frame) != nil {
					continue
				}
				srv.handle(s, q, append([]byte(nil), frame...))
			}
		}()
	}
}
