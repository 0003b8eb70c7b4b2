package resolver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// testPKI is a throwaway CA and a server certificate for localhost,
// server.test, 127.0.0.1 and ::1, in memory and as PEM files.
type testPKI struct {
	Pool     *x509.CertPool
	Cert     tls.Certificate
	CAFile   string
	CertFile string
	KeyFile  string
}

func newTestPKI(t testing.TB) *testPKI {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{})
	dir := t.TempDir()
	p := &testPKI{Pool: ca.Pool(), CAFile: ca.WritePEM(t, dir)}
	p.CertFile, p.KeyFile = leaf.WritePEM(t, dir)
	p.Cert = tls.Certificate{Certificate: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}
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
