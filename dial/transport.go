package dial

// The transport step and its TCP variant; TurboTLS's is in turbo.go.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// A transport is the step from the first address to a finished
// handshake: connecting while the Z-data is verified, the handshake with
// what was verified in time, and the one retry without ztls of a server
// that aborts on it.
type transport interface {
	connect(ctx context.Context) (*tls13.Conn, error)
}

// transport is TurboTLS when asked for, else TCP alone.
func (a *attempt) transport(ctx context.Context) transport {
	if a.o.Turbo {
		return newTurboTransport(ctx, a)
	}
	return &tcpTransport{a: a}
}

// tcpTransport is TLS over TCP alone: the Z-data budget runs from TCP
// up, and the handshake opens with what was verified by then.
type tcpTransport struct {
	a *attempt
	// syn is the connect begun at address time, when TurboTLS meant to
	// use it and then did not (nil: dial now).
	syn *synConn
}

func (t *tcpTransport) connect(ctx context.Context) (*tls13.Conn, error) {
	a := t.a
	raw, err := t.dialTCP(ctx)
	if err != nil {
		return nil, err
	}
	if err := a.awaitZData(ctx, nil); err != nil {
		raw.Close()
		return nil, err
	}
	if err := a.settleALPN(); err != nil {
		raw.Close()
		return nil, err
	}
	return a.handshakeTCP(ctx, raw, nil)
}

// dialTCP connects to the first address that answers, or takes the
// connection begun at address time.
func (t *tcpTransport) dialTCP(ctx context.Context) (net.Conn, error) {
	a := t.a
	var raw net.Conn
	var took time.Duration
	if t.syn != nil {
		raw, took, _ = t.syn.take(ctx) // if it failed, dial again
	}
	if raw == nil {
		tcpStart := time.Now() // real time: elapsed
		var err error
		if raw, err = dialFirst(ctx, a.ips, a.port); err != nil {
			return nil, err
		}
		took = time.Since(tcpStart)
	}
	a.r.Address = raw.RemoteAddr().String()
	a.r.Timing.TCPConnect = ms(took)
	a.step("tcp_connected")
	return raw, nil
}

// handshakeTCP runs the handshake on the TCP connection raw, or goes on
// with same, the one TurboTLS began on it. When the server aborts on the
// ztls ClientHello, the one retry without ztls goes on a new connection.
func (a *attempt) handshakeTCP(ctx context.Context, raw net.Conn, same *tls13.Conn) (*tls13.Conn, error) {
	var c *tls13.Conn
	var err error
	if err := a.settleECH(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	if same != nil {
		c, err = same, a.runHandshake(ctx, same)
	} else {
		c, err = a.handshake(ctx, raw)
	}
	if a.abortedOnZTLS(c, err) {
		raw.Close()
		a.dropZTLS()
		if raw, err = dialFirst(ctx, a.ips, a.port); err != nil {
			return nil, err
		}
		c, err = a.handshake(ctx, raw)
	}
	if err != nil && a.retryECH(err) {
		// Rejected ECH: nothing was delivered; once more with the
		// server's retry configs (dial/ech.go).
		raw.Close()
		if raw, err = dialFirst(ctx, a.ips, a.port); err != nil {
			return nil, err
		}
		c, err = a.handshake(ctx, raw)
	}
	if err != nil {
		raw.Close()
		return nil, a.echError(err)
	}
	return c, nil
}

// handshake runs a new handshake on raw: ZTLS with the verified offer,
// else TLS 1.3 (resuming Options.Session if set), the Request as early
// data when it may go early.
func (a *attempt) handshake(ctx context.Context, raw net.Conn) (c *tls13.Conn, err error) {
	sniff := &firstBytes{Conn: raw}
	c = tls13.Client(sniff, a.echConfig())
	defer func() {
		// A server that does not speak TLS at all (plain HTTP) fails the
		// handshake with a record error: say what it sent instead.
		if err != nil {
			err = sniff.notTLS(err)
		}
	}()
	if a.offer != nil {
		c.SetZData(a.offer)
	} else if a.o.Session != nil {
		c.SetSession(a.o.Session)
	}
	if a.o.sendsEarly(a.offer) {
		// Not resent by the engine when rejected: sendRequest does that,
		// in the protocol negotiated only.
		c.SetEarlyData(a.o.Request, false)
		a.r.EarlyData.Bytes = len(a.o.Request)
	}
	return c, a.runHandshake(ctx, c)
}

// sendsEarly says whether the Request goes as early data: with ZTLS (an
// offer), or with a resumed session that allows 0-RTT when ResumeEarly
// asks for it. Early data is replayable, so only a request marked
// ReplaySafe ever goes early (RFC 8470, Section 4.1).
func (o *Options) sendsEarly(offer *tls13.ZDataOffer) bool {
	if len(o.Request) == 0 || !o.ReplaySafe {
		return false
	}
	if offer != nil {
		return true
	}
	return o.Session != nil && o.ResumeEarly && o.Session.MaxEarlyData > 0
}

// runHandshake runs c's handshake and puts its time and trace in the
// report.
func (a *attempt) runHandshake(ctx context.Context, c *tls13.Conn) error {
	hsStart := time.Now() // real time: elapsed
	err := c.HandshakeContext(ctx)
	a.r.Timing.Handshake = ms(time.Since(hsStart))
	a.reportECH(c.ConnectionState())
	a.traceConn(c)
	return err
}

// traceConn puts the engine's events of c in the report's trace.
func (a *attempt) traceConn(c *tls13.Conn) {
	for _, ev := range c.Trace() {
		a.r.Trace = append(a.r.Trace, TraceStep{Step: ev.Event.String(), AtMS: ms(ev.At.Sub(a.start))})
	}
}

func dialFirst(ctx context.Context, ips []netip.Addr, port int) (net.Conn, error) {
	var d net.Dialer
	var err error
	for _, ip := range ips {
		var c net.Conn
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return c, nil
		}
	}
	if err == nil {
		err = errors.New("no address")
	}
	return nil, fmt.Errorf("dial: connecting to port %d: %w", port, err)
}

// synConn is a TCP connect begun ahead of need (TurboTLS's, at address
// time): whoever needs the connection takes it; release closes it once
// made when nobody did.
type synConn struct {
	ch     chan dialed // the outcome; after take, errTaken
	start  time.Time
	cancel context.CancelFunc
}

// dialed is the outcome of a synConn's connect.
type dialed struct {
	c   net.Conn
	err error
	at  time.Time // when the connect finished
}

// errTaken marks a synConn's connection as taken.
var errTaken = errors.New("dial: connection taken")

func startSYN(ctx context.Context, addr netip.AddrPort) *synConn {
	ctx, cancel := context.WithCancel(ctx)
	s := &synConn{ch: make(chan dialed, 1), start: time.Now(), cancel: cancel} // real time: elapsed
	go func() {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr.String())
		s.ch <- dialed{c, err, time.Now()} // real time: elapsed
	}()
	return s
}

// take waits for the connect and returns the connection, now the
// caller's, and how long the connect took. It may run on any goroutine.
func (s *synConn) take(ctx context.Context) (net.Conn, time.Duration, error) {
	select {
	case d := <-s.ch:
		s.ch <- dialed{err: errTaken}
		return d.c, d.at.Sub(s.start), d.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// release closes the connection, once made, unless it was taken.
func (s *synConn) release() {
	s.cancel()
	select {
	case d := <-s.ch:
		if d.c != nil {
			d.c.Close()
		}
	default:
		go func() {
			if d := <-s.ch; d.c != nil {
				d.c.Close()
			}
		}()
	}
}
