package ztlshttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/tls13"
)

// lazyConn connects on the first Write that completes a request. That
// write goes as early data only if it is a whole idempotent request:
// net/http may write a request in several pieces (headers and body
// apart, or a large request in buffer-sized parts), and the part that
// goes early must be the whole request or nothing, so anything else is
// sent after the handshake. The HTTP/2 client writes its connection
// preface and its first request apart: they are held (up to
// maxEarlyH2 bytes) until the request is complete, then go together.
type lazyConn struct {
	ctx       context.Context
	addr      string
	opts      dial.Options
	proto     string // "h2" or "http/1.1": what the client writes
	resolvErr error  // why the Transport has no default resolver
	noH2      func() // the server did not select h2 (proto h2)

	mu      sync.Mutex
	ready   chan struct{}
	pending []byte // h2: written before the connection opened
	conn    *tls13.Conn
	err     error
	report  *dial.Report
}

func newLazyConn(ctx context.Context, addr string, o dial.Options, proto string, resolvErr error) *lazyConn {
	return &lazyConn{ctx: context.WithoutCancel(ctx), addr: addr, opts: o, proto: proto, resolvErr: resolvErr, ready: make(chan struct{})}
}

func (l *lazyConn) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.conn != nil || l.err != nil {
		c, err := l.conn, l.err
		l.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return c.Write(p)
	}
	var first []byte
	var early bool
	if l.proto == "h2" {
		l.pending = append(l.pending, p...)
		v := h2Early(l.pending)
		if v == h2NeedMore {
			l.mu.Unlock()
			return len(p), nil
		}
		first, early, l.pending = l.pending, v == h2Whole, nil
	} else {
		first, early = p, sendEarly(p)
	}
	c, err := l.connect(first, early)
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if !early {
		if _, err := c.Write(first); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// connect opens the connection, with first as its early request when
// early; l.mu is held.
func (l *lazyConn) connect(first []byte, early bool) (*tls13.Conn, error) {
	defer close(l.ready)
	o := l.opts
	if early {
		o.Request, o.ReplaySafe = append([]byte(nil), first...), true
	}
	res, err := dial.Connect(l.ctx, l.addr, o)
	if res != nil {
		rep := res.Report
		if l.resolvErr != nil && rep.FallbackReason == dial.ReasonNoResolver {
			rep.FallbackReason += " (" + l.resolvErr.Error() + ")"
		}
		l.report = &rep
	}
	if err != nil {
		var ae *tls13.AlertError
		if l.proto == "h2" && errors.As(err, &ae) && ae.Alert == tls13.AlertNoApplicationProto {
			l.noH2()
			err = fmt.Errorf("%w: %v", errNoH2, err)
		}
		l.err = err
		return nil, err
	}
	if l.proto == "h2" && res.Conn.ConnectionState().NegotiatedProtocol != "h2" {
		res.Conn.Close()
		l.noH2()
		l.err = errNoH2
		return nil, l.err
	}
	l.conn = res.Conn
	return res.Conn, nil
}

// sendEarly: p, the transport's first write, is one whole HTTP/1.x
// request with an idempotent method.
func sendEarly(p []byte) bool {
	ok, _ := earlyVerdict(p, false)
	return ok
}

// current waits for the connection: the HTTP clients start reading
// before their first write.
func (l *lazyConn) current() (*tls13.Conn, error) {
	<-l.ready
	return l.peek()
}

func (l *lazyConn) Read(p []byte) (int, error) {
	c, err := l.current()
	if err != nil {
		return 0, err
	}
	return c.Read(p)
}

// Report is the connection report, once the connection is open (or
// failed to open); nil before.
func (l *lazyConn) Report() *dial.Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.report
}

// ConnectionState is the connection's TLS state as crypto/tls reports
// it, for net/http (resp.TLS) and golang.org/x/net/http2; the zero value
// until the connection is open. It does not wait: the HTTP/2 client asks
// before it writes the request that opens the connection.
func (l *lazyConn) ConnectionState() tls.ConnectionState {
	c, _ := l.peek()
	if c == nil {
		return tls.ConnectionState{}
	}
	name := l.opts.TLS.ServerName
	if name == "" {
		name, _, _ = net.SplitHostPort(l.addr)
	}
	return stdState(c.ConnectionState(), name)
}

// stdState converts a tls13 state to crypto/tls's. serverName is the
// name sent (a client) or received (a server) as SNI.
func stdState(st tls13.ConnectionState, serverName string) tls.ConnectionState {
	return tls.ConnectionState{
		Version:            tls.VersionTLS13,
		HandshakeComplete:  st.HandshakeComplete,
		DidResume:          st.DidResume,
		CipherSuite:        uint16(st.CipherSuite),
		CurveID:            tls.CurveID(st.Group),
		NegotiatedProtocol: st.NegotiatedProtocol,
		ServerName:         serverName,
		PeerCertificates:   st.PeerCertificates,
		VerifiedChains:     st.VerifiedChains,
	}
}

func (l *lazyConn) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		if l.err == nil {
			l.err = net.ErrClosed
			close(l.ready)
		}
		return nil
	}
	return l.conn.Close()
}

func (l *lazyConn) LocalAddr() net.Addr {
	if c, _ := l.peek(); c != nil {
		return c.LocalAddr()
	}
	return &net.TCPAddr{}
}

func (l *lazyConn) RemoteAddr() net.Addr {
	if c, _ := l.peek(); c != nil {
		return c.RemoteAddr()
	}
	return &net.TCPAddr{}
}

// peek returns the connection or its error without waiting; l.mu is
// free while a connection is open, and a connect in progress holds it.
func (l *lazyConn) peek() (*tls13.Conn, error) {
	select {
	case <-l.ready:
	default:
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn, l.err
}

func (l *lazyConn) SetDeadline(t time.Time) error {
	if c, _ := l.peek(); c != nil {
		return c.SetDeadline(t)
	}
	return nil
}

func (l *lazyConn) SetReadDeadline(t time.Time) error {
	if c, _ := l.peek(); c != nil {
		return c.SetReadDeadline(t)
	}
	return nil
}

func (l *lazyConn) SetWriteDeadline(t time.Time) error {
	if c, _ := l.peek(); c != nil {
		return c.SetWriteDeadline(t)
	}
	return nil
}
