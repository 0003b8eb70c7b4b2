package server

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// Conn is one accepted connection whose handshake has begun.
type Conn struct {
	*tls13.Conn
	// Turbo: the handshake began over UDP (TurboTLS).
	Turbo bool
	// EarlyAnswered: the early request was answered in the TurboTLS UDP
	// flight (Config.Turbo's AnswerFunc); the handler must not answer it
	// again.
	EarlyAnswered bool
	// HandshakeDeadline is when the handshake must be over, the early
	// data read included.
	HandshakeDeadline time.Time

	s *Server
	t *tracked
}

// Context is done when the server cuts the connection (Close, or
// Shutdown at its deadline) or the handler returned: work done for the
// connection (a backend request) should end with it.
func (c *Conn) Context() context.Context { return c.t.ctx }

// SetIdle says whether the connection waits for its next request (true)
// or serves one (false): a server shutting down closes idle connections
// at once instead of waiting for them.
func (c *Conn) SetIdle(idle bool) { c.s.setIdle(c.t, idle) }

// FinishHandshake waits for the client's Finished until the handshake
// deadline; a failure is counted and logged.
func (c *Conn) FinishHandshake() error {
	ctx, cancel := context.WithDeadline(context.Background(), c.HandshakeDeadline)
	defer cancel()
	err := c.HandshakeContext(ctx)
	if err != nil {
		c.s.handshakeFailed(c.Conn, err)
	}
	return err
}

// serveConn runs one connection from its accept to its close.
func (s *Server) serveConn(t *tracked) {
	defer s.forget(t)
	// Until its handshake is done a connection has HandshakeTimeout,
	// whatever path it takes (slowloris).
	deadline := time.Now().Add(s.cfg.HandshakeTimeout) // real time: a deadline
	t.raw.SetDeadline(deadline)
	c, early, err := s.accept(t.raw)
	if err != nil {
		t.raw.Close()
		return
	}
	c.HandshakeDeadline, c.t = deadline, t
	defer c.Close()
	c.SetDeadline(deadline) // reading a link record cleared it
	if !s.beginHandshake(c) {
		return
	}
	s.metricsEarly(early)
	s.cfg.Handler(c)
}

// accept starts the server side of raw: through Turbo when set.
func (s *Server) accept(raw net.Conn) (c *Conn, early int, err error) {
	if s.cfg.Turbo == nil {
		return &Conn{Conn: tls13.Server(raw, s.cfg.TLS()), s: s}, 0, nil
	}
	sc, err := s.cfg.Turbo.Accept(raw)
	if err != nil {
		return nil, 0, err
	}
	return &Conn{Conn: sc.Conn, Turbo: sc.Turbo, EarlyAnswered: sc.EarlyAnswered, s: s}, len(sc.Early), nil
}

// beginHandshake sends the server's first flight, counts and logs it; it
// reports whether the connection goes on.
func (s *Server) beginHandshake(c *Conn) bool {
	ctx, cancel := context.WithDeadline(context.Background(), c.HandshakeDeadline)
	defer cancel()
	if err := c.HandshakeEarly(ctx); err != nil {
		s.handshakeFailed(c.Conn, err)
		return false
	}
	c.SetDeadline(c.HandshakeDeadline) // reading the early data is part of the handshake
	st := c.ConnectionState()
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.Flight(st, c.Turbo)
	}
	if s.cfg.LogConns {
		s.log.Info("connection", "remote", remote(c.Conn), "state", Describe(st), "hrr", askedRetry(c.Trace()))
	}
	return true
}

func (s *Server) metricsEarly(n int) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.EarlyBytes(n)
	}
}

func (s *Server) handshakeFailed(c *tls13.Conn, err error) {
	if s.cfg.Metrics != nil {
		s.cfg.Metrics.HandshakeFailed()
	}
	if s.cfg.LogConns {
		s.log.Info("connection ended", "remote", remote(c), "err", err)
	}
}

func remote(c net.Conn) string {
	if a := c.RemoteAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Describe is a connection's state in a few words: its mode (TLS 1.3,
// ZTLS accepted or rejected and why, resumed with or without 0-RTT), its
// cipher suite and group.
func Describe(st tls13.ConnectionState) string {
	mode := "TLS 1.3"
	switch {
	case st.ZTLS && st.ZTLSBFE:
		mode = "ZTLS accepted with BFE"
	case st.ZTLS:
		mode = "ZTLS accepted"
	case st.ZTLSOffered:
		mode = "ZTLS offered, rejected (" + st.ZTLSRejectReason + ")"
	case st.DidResume && st.EarlyDataAccepted:
		mode = "resumed, 0-RTT accepted"
	case st.DidResume && st.EarlyDataOffered:
		mode = "resumed, 0-RTT rejected"
	case st.DidResume:
		mode = "resumed"
	}
	return fmt.Sprintf("%s, %s, %s", mode, st.CipherSuite.String(), st.Group.String())
}

// askedRetry reports whether the handshake took a HelloRetryRequest.
func askedRetry(trace []tls13.TraceEvent) bool {
	for _, ev := range trace {
		if ev.Event == tls13.EventHelloRetryRequest {
			return true
		}
	}
	return false
}
