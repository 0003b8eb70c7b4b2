package bench

// DNS over TLS (RFC 7858) at the testbed's resolver, for the contenders
// that fetch their Z-data over a kept-open DoT connection (issue 30's
// T-DNS measurement: ztls-dot, ztls-pq-dot and their TurboTLS forms).
// The resolver host listens on port 853 beside 53, with a certificate
// from the benchmark's CA for ResolverName; behind TLS it is the same
// caching resolver (the same cache, the same query count). Its idle
// timeout is long, so the connection a client opened before its visit
// stays open through it, and it answers pipelined queries concurrently,
// as resolvers do; the listener counts the connections it accepts, and a visit during which one was accepted did not use a
// kept-open connection and is refused.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/testbed/hosts"
)

// ResolverName is the name the resolver's DoT certificate carries, which
// the clients check (the authentication domain name of RFC 8310).
const ResolverName = "resolver.ztls.test"

// DoTPort is DNS over TLS's port (RFC 7858, Section 3.1).
const DoTPort = 853

// dotIdleTimeout is how long the DoT listener keeps an idle connection:
// longer than the gap between a contender's visits (a kept-open
// connection must not close between the unmeasured query that opened it
// and the measured visit).
const dotIdleTimeout = 10 * time.Minute

// dotServer is the resolver's DoT listener.
type dotServer struct {
	addr    netip.AddrPort
	accepts atomic.Uint64 // connections accepted (TCP, before TLS)
	stop    func()

	mu     sync.Mutex
	conns  map[net.Conn]bool // open, closed by stop
	closed bool
	wg     sync.WaitGroup // the accept loop and the connections
}

// dotUser is implemented by contenders whose client asks the resolver
// over DoT; Run starts the listener only when one runs.
type dotUser interface {
	usesDoT() bool
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Uint64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// startDoT serves h (the caching resolver) over DoT on addr, from host
// (nil: here, for loopback tests), with a certificate for ResolverName
// issued by ca.
func startDoT(host *hosts.Host, addr netip.AddrPort, h dns.Handler, ca *testpki.CA) (*dotServer, error) {
	leaf, err := ca.Make(testpki.LeafOpts{DNSNames: []string{ResolverName}})
	if err != nil {
		return nil, fmt.Errorf("bench: DoT certificate: %w", err)
	}
	certPEM, keyPEM, err := leaf.PEM()
	if err != nil {
		return nil, fmt.Errorf("bench: DoT certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("bench: DoT certificate: %w", err)
	}
	var ln net.Listener
	if host != nil {
		ln, err = host.Listen("tcp4", addr.String())
	} else {
		ln, err = net.Listen("tcp4", addr.String())
	}
	if err != nil {
		return nil, fmt.Errorf("bench: DoT listener: %w", err)
	}
	s := &dotServer{addr: ln.Addr().(*net.TCPAddr).AddrPort(), conns: map[net.Conn]bool{}}
	tl := tls.NewListener(countingListener{Listener: ln, n: &s.accepts}, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	s.wg.Add(1)
	go s.serve(tl, h)
	s.stop = func() {
		tl.Close()
		s.mu.Lock()
		s.closed = true
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	}
	return s, nil
}

// serve accepts DoT connections until ln closes.
func (s *dotServer) serve(ln net.Listener, h dns.Handler) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = true
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c, h)
	}
}

// serveConn answers the queries of one connection, each as soon as it
// is read and concurrently (RFC 7766, Section 6.2.1.1: a resolver
// processes pipelined queries in parallel and answers them out of
// order), as resolvers such as Unbound do: otherwise the six questions
// of a cold lookup, pipelined on the kept-open connection, would go to
// the authority one after the other. An idle connection is closed after
// dotIdleTimeout; there is no limit of queries per connection.
func (s *dotServer) serveConn(c net.Conn, h dns.Handler) {
	var pending sync.WaitGroup
	defer func() {
		pending.Wait()
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	w := &streamWriter{c: c}
	for {
		c.SetReadDeadline(time.Now().Add(dotIdleTimeout))
		var l [2]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		buf := make([]byte, int(l[0])<<8|int(l[1]))
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		q := new(dns.Msg)
		if q.Unpack(buf) != nil {
			return // not DNS: close, as RFC 7766 allows
		}
		pending.Add(1)
		go func() {
			defer pending.Done()
			h.ServeDNS(w, q)
		}()
	}
}

// streamWriter is a dns.ResponseWriter on a DoT connection: each answer
// written whole, with its two-byte length, under a lock (answers of
// concurrent queries never interleave).
type streamWriter struct {
	c  net.Conn
	mu sync.Mutex
}

func (w *streamWriter) LocalAddr() net.Addr  { return w.c.LocalAddr() }
func (w *streamWriter) RemoteAddr() net.Addr { return w.c.RemoteAddr() }

func (w *streamWriter) WriteMsg(m *dns.Msg) error {
	b, err := m.Pack()
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func (w *streamWriter) Write(b []byte) (int, error) {
	if len(b) > 0xffff {
		return 0, fmt.Errorf("bench: DoT answer of %d bytes", len(b))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.c.Write(append([]byte{byte(len(b) >> 8), byte(len(b))}, b...)); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (w *streamWriter) Close() error        { return w.c.Close() }
func (w *streamWriter) TsigStatus() error   { return nil }
func (w *streamWriter) TsigTimersOnly(bool) {}
func (w *streamWriter) Hijack()             {}

// needsDoT reports whether any of cs asks the resolver over DoT.
func needsDoT(cs []Contender) bool {
	for _, c := range cs {
		if u, ok := c.(dotUser); ok && u.usesDoT() {
			return true
		}
	}
	return false
}

// dotWindow is the resolver's count of accepted DoT connections around
// a measured visit.
type dotWindow struct {
	before, after uint64
	// stub: the visit's answers came from the client's own cache, filled
	// at the start of the visit over a connection of its own.
	stub bool
}

// dotWindow starts the window of a visit of c.
func (c *Client) dotWindow() dotWindow {
	w := dotWindow{stub: c.Scenario.StubCache}
	if c.dot != nil {
		w.before = c.dot.accepts.Load()
	}
	return w
}

// end closes the window after the visit.
func (w dotWindow) end(c *Client) dotWindow {
	if c.dot != nil {
		w.after = c.dot.accepts.Load()
	}
	return w
}

// check refuses a visit that did not ask over a kept-open connection:
// the resolver accepted one during it (the Z-data did not come over the
// connection opened before), or none was ever opened.
func (w dotWindow) check(name string) error {
	switch {
	case w.after == 0:
		return fmt.Errorf("bench: %s: the resolver has no DoT listener, or no DoT connection reached it", name)
	case w.after != w.before && !w.stub:
		return fmt.Errorf("bench: %s: the resolver accepted %d DoT connection(s) during the visit: the lookup did not use the kept-open connection", name, w.after-w.before)
	}
	return nil
}
