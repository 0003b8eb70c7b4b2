// Package server runs a TLS 1.3 (and ZTLS, and TurboTLS) server on a
// listener: it accepts connections within Limits, gives each a handshake
// deadline whichever path it takes, begins the handshake, and hands the
// connection to a Handler or to a ztlshttp.Proxy. Shutdown stops it
// gracefully.
//
//	srv, err := server.New(server.Config{
//		TLS:              func() *tls13.Config { return cfg },
//		Handler:          func(c *server.Conn) { ... },
//		HandshakeTimeout: 10 * time.Second,
//	})
//	go srv.Serve(ln)
//	...
//	srv.Shutdown(ctx) // stop accepting, let connections finish until ctx ends
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/ztls-project/ztls/internal/connlimit"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// ErrServerClosed is what Serve returns after Shutdown or Close.
var ErrServerClosed = errors.New("server: closed")

// Limits bound the connections a server holds; zero values mean no bound.
type Limits struct {
	// Max is the most connections held at once; more wait in the
	// kernel's backlog until one closes.
	Max int
	// PerSource is the most connections held at once from one IP address;
	// more are closed at once.
	PerSource int
	// PerNetwork is the most connections held at once from one client
	// network (a /24 for IPv4, a /56 for IPv6); more are closed at once.
	PerNetwork int
}

// Stats count the connections of a server's listeners.
type Stats struct {
	Open           int64 // connections held now
	RefusedSource  int64 // closed at accept: over Limits.PerSource
	RefusedNetwork int64 // closed at accept: over Limits.PerNetwork
}

// Metrics receives what the server counts; internal/metrics.Registry is
// one. Its methods are called from many goroutines at once.
type Metrics interface {
	// Flight: a connection's first flight was handled (turbo: over UDP).
	Flight(st tls13.ConnectionState, turbo bool)
	// EarlyBytes: n bytes of early data were read.
	EarlyBytes(n int)
	// HandshakeFailed: a handshake did not complete.
	HandshakeFailed()
}

// Handler serves one connection whose handshake has begun (its first
// flight is sent; early data may wait to be read). The server closes the
// connection when the handler returns. A handler that serves several
// requests on a connection (a ztlshttp.Proxy) says when it waits for the
// next one (Conn.SetIdle), so that Shutdown closes it then, and ends its
// work when Conn.Context is done.
type Handler func(c *Conn)

// Config configures a Server. TLS (or Turbo) and Handler are required.
type Config struct {
	// TLS returns the configuration for each new connection, so a reload
	// (a certificate replaced on SIGHUP) applies to the handshakes that
	// start after it. TurboTLS connections take Turbo's configuration.
	TLS func() *tls13.Config
	// Turbo, if set, accepts every connection: one that links to a
	// TurboTLS UDP flight continues its handshake, the others are plain
	// TLS 1.3. The caller serves its UDP side and closes it.
	Turbo *turbo.TLSServer
	// Handler serves each connection.
	Handler Handler
	// HandshakeTimeout is the time a connection has from its accept to
	// its handshake's end (a client that sends nothing is closed after
	// it); 0 means 10 s.
	HandshakeTimeout time.Duration
	// Limits bound the connections held.
	Limits Limits
	// Metrics, if set, counts flights, early data and failed handshakes.
	Metrics Metrics
	// Log receives the server's lines; nil means none.
	Log *slog.Logger
	// LogConns logs one line per connection (its mode, suite and group)
	// and one when a connection ends in an error.
	LogConns bool
}

// Server accepts and serves connections. Its methods are safe for
// concurrent use.
type Server struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	lns      []*connlimit.Listener
	conns    map[*tracked]struct{}
	closing  bool
	draining bool
	wg       sync.WaitGroup
}

// tracked is one open connection.
type tracked struct {
	raw    net.Conn
	ctx    context.Context // Conn.Context
	cancel context.CancelFunc
	idle   bool // waiting for its next request
}

// New checks cfg and returns a server for it.
func New(cfg Config) (*Server, error) {
	if cfg.TLS == nil && cfg.Turbo == nil {
		return nil, errors.New("server: Config.TLS is required")
	}
	if cfg.Handler == nil {
		return nil, errors.New("server: Config.Handler is required")
	}
	if err := cfg.Limits.check(); err != nil {
		return nil, err
	}
	if cfg.HandshakeTimeout < 0 {
		return nil, fmt.Errorf("server: HandshakeTimeout %v: want 0 (10 s) or more", cfg.HandshakeTimeout)
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 10 * time.Second
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Server{cfg: cfg, log: log, conns: map[*tracked]struct{}{}}, nil
}

// check refuses negative limits.
func (l Limits) check() error {
	for _, v := range []struct {
		name string
		n    int
	}{{"Max", l.Max}, {"PerSource", l.PerSource}, {"PerNetwork", l.PerNetwork}} {
		if v.n < 0 {
			return fmt.Errorf("server: Limits.%s %d: want 0 (no limit) or more", v.name, v.n)
		}
	}
	return nil
}

// Serve accepts connections on ln and serves each in its own goroutine
// until ln fails or the server is shut down (then it returns
// ErrServerClosed). It closes ln.
func (s *Server) Serve(ln net.Listener) error {
	l := connlimit.New(ln, connlimit.Limits{Max: s.cfg.Limits.Max, PerSource: s.cfg.Limits.PerSource, PerNetwork: s.cfg.Limits.PerNetwork})
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		l.Close()
		return ErrServerClosed
	}
	s.lns = append(s.lns, l)
	s.wg.Add(1) // Shutdown and Close wait for this loop's end too
	s.mu.Unlock()
	defer s.wg.Done()
	defer l.Close()
	for {
		raw, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			return err
		}
		t, ok := s.track(raw)
		if !ok {
			raw.Close()
			return ErrServerClosed
		}
		go s.serveConn(t)
	}
}

// Stats sums the counts of the listeners being served.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st Stats
	for _, l := range s.lns {
		ls := l.Stats()
		st.Open += ls.Open
		st.RefusedSource += ls.RefusedSource
		st.RefusedNetwork += ls.RefusedNetwork
	}
	return st
}

// Open is the number of connections being served now.
func (s *Server) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}

// Shutdown stops accepting, closes connections that wait for their next
// request, and waits for the others to finish until ctx ends; then it
// closes those still open and returns an error that counts them.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing, s.draining = true, true
	s.closeListenersLocked()
	for t := range s.conns {
		if t.idle {
			t.raw.Close()
		}
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	n := s.closeConns()
	<-done
	if n == 0 {
		return nil
	}
	s.log.Warn("stopping: cut the connections still open", "conns", n)
	return fmt.Errorf("server: %d connections cut at the end of the drain: %w", n, ctx.Err())
}

// Close stops accepting and closes every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closing = true
	s.closeListenersLocked()
	s.mu.Unlock()
	s.closeConns()
	s.wg.Wait()
	return nil
}

func (s *Server) closeListenersLocked() {
	for _, l := range s.lns {
		l.Close()
	}
}

// closeConns closes the open connections and ends their work; it returns
// how many there were.
func (s *Server) closeConns() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for t := range s.conns {
		t.cancel()
		t.raw.Close()
	}
	return len(s.conns)
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// track records raw as open, unless the server is closing.
func (s *Server) track(raw net.Conn) (*tracked, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, false
	}
	t := &tracked{raw: raw}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	s.conns[t] = struct{}{}
	s.wg.Add(1)
	return t, true
}

// forget removes t once its connection is closed.
func (s *Server) forget(t *tracked) {
	t.cancel()
	s.mu.Lock()
	delete(s.conns, t)
	s.mu.Unlock()
	s.wg.Done()
}

// setIdle records whether t waits for its next request; a server that
// drains closes it then.
func (s *Server) setIdle(t *tracked, idle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.idle = idle
	if idle && s.draining {
		t.raw.Close()
	}
}
