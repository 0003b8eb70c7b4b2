package ztlshttp

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/tls13"
)

// DialTLSContext returns a function for http.Transport.DialTLSContext that
// connects with ZTLS when the server publishes Z-data (else TLS 1.3):
//
//	tr := &http.Transport{DialTLSContext: ztlshttp.DialTLSContext(opts)}
//
// The connection is opened when the transport writes its first request,
// so an idempotent request (GET, HEAD, OPTIONS) that net/http writes
// whole in one piece rides as early data and its response can come in the
// server's first flight; any other request is sent after the handshake.
func DialTLSContext(opts dial.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		o := opts
		if o.TLS == nil {
			o.TLS = &tls13.Config{}
		}
		o.TLS = o.TLS.Clone()
		if len(o.TLS.NextProtos) == 0 {
			o.TLS.NextProtos = []string{"http/1.1"}
		}
		return &lazyConn{ctx: context.WithoutCancel(ctx), addr: addr, opts: o, ready: make(chan struct{})}, nil
	}
}

// NewTransport is an http.Transport that speaks ztls.
func NewTransport(opts dial.Options) *http.Transport {
	return &http.Transport{DialTLSContext: DialTLSContext(opts), ForceAttemptHTTP2: false}
}

// lazyConn connects on the first Write. That write goes as early data
// only if it is a whole idempotent request: net/http may write a request
// in several pieces (headers and body apart, or a large request in
// buffer-sized parts), and the part that goes early must be the whole
// request or nothing, so anything else is sent after the handshake.
type lazyConn struct {
	ctx  context.Context
	addr string
	opts dial.Options

	mu     sync.Mutex
	ready  chan struct{}
	conn   *tls13.Conn
	err    error
	report *dial.Report
}

func (l *lazyConn) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.conn == nil && l.err == nil {
		o := l.opts
		o.Request, o.ReplaySafe = nil, false // never early: sent after the handshake
		if sendEarly(p) {
			o.Request, o.ReplaySafe = append([]byte(nil), p...), true
		}
		res, err := dial.Connect(l.ctx, l.addr, o)
		if err != nil {
			l.err = err
			close(l.ready)
			l.mu.Unlock()
			return 0, err
		}
		l.conn, l.report = res.Conn, &res.Report
		close(l.ready)
		l.mu.Unlock()
		if !o.ReplaySafe {
			return res.Conn.Write(p)
		}
		return len(p), nil
	}
	c, err := l.conn, l.err
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return c.Write(p)
}

// sendEarly: p, the transport's first write, is one whole HTTP/1.x
// request with an idempotent method.
func sendEarly(p []byte) bool {
	ok, _ := earlyVerdict(p, false)
	return ok
}

// current waits for the connection: http.Transport starts its reader
// before the first write.
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

// Report is the connection report, once the connection is open.
func (l *lazyConn) Report() *dial.Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.report
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

func (l *lazyConn) peek() (*tls13.Conn, error) {
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
