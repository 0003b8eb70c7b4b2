package ztlshttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
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
// Package dial writes that first request, early or not; a connection
// that turns out to need the other protocol is handed over to the
// Transport's other client (opening.go), and this one ends with a
// protocolSwitch error.
type lazyConn struct {
	ctx       context.Context
	addr      string
	opts      dial.Options
	proto     string     // "h2" or "http/1.1": what the client writes
	resolvErr error      // why the Transport has no default resolver
	t         *Transport // nil: no other client to hand a connection to
	// dead: the connection failed, was closed or handed over; set with
	// err, read without mu (the HTTP/2 pool asks while a connect holds
	// mu).
	dead atomic.Bool
	open atomic.Bool // the connection is open, its handshake done

	mu      sync.Mutex
	ready   chan struct{}
	pending []byte   // h2: written before the connection opened
	op      *opening // the connection being opened for this one, if any
	handed  *opening // the connection handed over, and to which client:
	handTo  string
	conn    *tls13.Conn
	err     error
	report  *dial.Report
	start   time.Time // of the connection's lookups (about: of its opening)
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
	err := l.connect(first, early)
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// connect opens the connection with first as its request, early when
// early, or gives first to the connection handed over before its
// ClientHello; l.mu is held.
func (l *lazyConn) connect(first []byte, early bool) error {
	defer close(l.ready)
	op := l.op
	if op == nil {
		op = open(l.ctx, l.addr, l.opts, l.proto, first, early, l.t != nil)
		l.op = op
	} else {
		op.give <- firstWrite{append([]byte(nil), first...), early}
	}
	select {
	case proto := <-op.ask:
		if l.t == nil || !l.t.missedEarly(l.addr, proto) {
			// The Z-data's early data is for proto: the connection waits
			// for the request in it, before its ClientHello.
			return l.handOff(proto, false)
		}
		// The server did not take early data in proto before: the
		// request stays as it is, sent after the handshake.
		op.give <- firstWrite{}
		<-op.done
	case <-op.done:
	}
	res, err := op.res, op.err
	l.start = op.start
	if res != nil {
		l.report = l.reportOf(res)
	}
	if err != nil {
		var ae *tls13.AlertError
		if l.proto == "h2" && !l.speaks("http/1.1") && errors.As(err, &ae) && ae.Alert == tls13.AlertNoApplicationProto {
			err = fmt.Errorf("%w: %v", errNoH2, err)
		}
		l.err = err
		l.dead.Store(true)
		return err
	}
	if errors.Is(res.Err, dial.ErrRequestNotSent) {
		// The server selected the other protocol; the request is unsent.
		proto := res.Conn.ConnectionState().NegotiatedProtocol
		if proto == "" {
			proto = "http/1.1" // what a connection without ALPN carries
		}
		if res.Report.EarlyData.Offered && l.t != nil {
			l.t.missEarly(l.addr, l.proto)
		}
		return l.handOff(proto, true)
	}
	l.conn = res.Conn
	l.open.Store(true)
	l.remember()
	return nil
}

// handOff hands the connection being opened to the Transport's client
// for proto, and ends this one; l.mu is held. negotiated: the server
// selected proto (else the Z-data names it, before the ClientHello).
func (l *lazyConn) handOff(proto string, negotiated bool) error {
	op := l.op
	l.op = nil
	l.dead.Store(true)
	if !l.speaks(proto) {
		op.abandon()
		if proto != "h2" && l.proto == "h2" {
			l.err = errNoH2
		} else {
			l.err = fmt.Errorf("ztlshttp: the server selected ALPN %q, which this client does not speak", proto)
		}
		return l.err
	}
	if negotiated {
		l.t.remember(l.addr, proto)
	} else {
		l.t.expect(l.addr, proto)
	}
	l.t.handOver(proto, l.addr, op)
	l.handed, l.handTo = op, proto
	l.err = &protocolSwitch{proto}
	return l.err
}

// speaks reports whether a client of l's Transport speaks proto.
func (l *lazyConn) speaks(proto string) bool {
	if l.t == nil {
		return proto == l.proto
	}
	return l.t.speaks(proto)
}

// adopt takes over op, a connection handed over by the other client:
// before its ClientHello (the first Write gives it the request), or
// open (the request unsent, for this client to write).
func (l *lazyConn) adopt(op *opening) {
	l.op = op
	if !op.established() {
		return
	}
	l.conn, l.report, l.start = op.res.Conn, l.reportOf(op.res), op.start
	l.open.Store(true)
	l.report.Error = "" // the request not sent in the other protocol: it is now
	l.remember()
	close(l.ready)
}

// responseReport is a copy of the connection report for a response that
// has just arrived, its status and header; the first sets the
// connection's first byte, timed from the start of its lookups.
func (l *lazyConn) responseReport() *dial.Report {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.report == nil {
		return nil
	}
	if l.report.Timing.FirstByte == 0 && !l.start.IsZero() {
		l.report.Timing.FirstByte = math.Round(float64(time.Since(l.start).Microseconds())) / 1000
	}
	rep := *l.report
	return &rep
}

// reportOf is the connection report of res, for this connection.
func (l *lazyConn) reportOf(res *dial.Result) *dial.Report {
	rep := res.Report
	if l.resolvErr != nil && rep.FallbackReason == dial.ReasonNoResolver {
		rep.FallbackReason += " (" + l.resolvErr.Error() + ")"
	}
	return &rep
}

// remember notes the protocol the connection speaks, for the
// Transport's next connections to its server.
func (l *lazyConn) remember() {
	if l.t != nil {
		l.t.remember(l.addr, l.proto)
	}
}

// handedTo is the protocol of the client the connection was handed to
// ("" when it was not), and handedOp that connection.
func (l *lazyConn) handedTo() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handTo
}

func (l *lazyConn) handedOp() *opening {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.handed
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
	l.dead.Store(true)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		if l.err == nil {
			l.err = net.ErrClosed
			close(l.ready)
			if l.op != nil {
				// Handed over before its ClientHello and never written to.
				l.op.abandon()
				l.op = nil
			}
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
