package bench

// DNS over TLS (RFC 7858) at the testbed's resolver, for the contenders
// that fetch their Z-data over a kept-open DoT connection (issue 30's
// T-DNS measurement: ztls-dot, ztls-pq-dot and their TurboTLS forms).
// The resolver host listens on port 853 beside 53, with a certificate
// from the benchmark's CA for ResolverName; behind TLS it is the same
// caching resolver (the same cache, the same query count). Its idle
// timeout is long, so the connection a client opened before its visit
// stays open through it; the listener counts the connections it
// accepts, and a visit during which one was accepted did not use a
// kept-open connection and is refused.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
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
	s := &dotServer{addr: ln.Addr().(*net.TCPAddr).AddrPort()}
	tl := tls.NewListener(countingListener{Listener: ln, n: &s.accepts}, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	// No limit on the queries per connection (miekg/dns closes one after
	// 128 by default: the kept-open connection of a long run would be
	// closed, and reopened, in the middle of a measured visit).
	srv := &dns.Server{Listener: tl, Net: "tcp-tls", Handler: h, MaxTCPQueries: -1,
		IdleTimeout: func() time.Duration { return dotIdleTimeout }}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go srv.ActivateAndServe()
	<-started
	s.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		srv.ShutdownContext(ctx)
	}
	return s, nil
}

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
