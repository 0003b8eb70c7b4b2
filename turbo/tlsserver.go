package turbo

import (
	"context"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// AnswerFunc answers early data (ZTLS or 0-RTT) before the server's first
// flight leaves, so the answer travels in it (0.5-RTT data). It gets all
// early data the client flight carried; a nil or empty result sends no
// answer. It must not block for long: the client is waiting.
//
// The early data is unauthenticated and may be a replay (see
// tls13.Conn.HandshakeEarly): no client certificate covers it (a server
// that requires client certificates takes none, so the func is not
// called), and a copy sent to a server with another strike register is
// accepted there too. Answer only requests that are safe to run twice.
type AnswerFunc func(early []byte, st tls13.ConnectionState) []byte

// TLSServer is a TurboTLS server in front of package tls13: client
// flights over UDP go into a server Engine; the TCP connection that links
// to one continues that engine, any other is plain TLS 1.3. Safe for
// concurrent use.
type TLSServer struct {
	*Server
	tls    atomic.Pointer[tls13.Config]
	answer AnswerFunc
	// LinkTimeout bounds the read of a new connection's first bytes; 0
	// means 10 s.
	LinkTimeout time.Duration
}

// ServerConn is an accepted connection.
type ServerConn struct {
	*tls13.Conn
	// Turbo: the handshake began over UDP and continues on this connection.
	Turbo bool
	// ID is the TurboTLS connection id (Turbo only).
	ID ConnID
	// EarlyAnswered: the early data was answered in the UDP flight by the
	// AnswerFunc; the application must not answer it again.
	EarlyAnswered bool
	// Early is the early data the AnswerFunc saw (EarlyAnswered only).
	Early []byte
}

// tlsState is what a UDP entry keeps for its TCP link.
type tlsState struct {
	eng      *tls13.Engine
	answered bool
	early    []byte
}

// NewTLSServer returns a server answering client flights with tls13
// engines configured by cfg; answer (may be nil) answers early data in the
// first flight. opt bounds the UDP table; its Flight field is set here.
func NewTLSServer(cfg *tls13.Config, answer AnswerFunc, opt Config) *TLSServer {
	t := &TLSServer{answer: answer}
	t.tls.Store(cfg)
	opt.Flight = t.flight
	t.Server = NewServer(opt)
	return t
}

// SetConfig makes cfg the configuration of the handshakes that start
// from now on (a certificate reloaded on SIGHUP); those under way keep
// theirs.
func (t *TLSServer) SetConfig(cfg *tls13.Config) { t.tls.Store(cfg) }

func (t *TLSServer) flight(ctx context.Context, from netip.AddrPort, clientFlight []byte) ([]byte, any, error) {
	eng := tls13.NewServerEngine(t.tls.Load())
	if err := eng.Feed(clientFlight); err != nil {
		return nil, nil, err
	}
	st := &tlsState{eng: eng}
	if eng.FlightDone() && t.answer != nil {
		buf := make([]byte, 4096)
		for {
			n := eng.ReadEarly(buf)
			if n == 0 {
				break
			}
			st.early = append(st.early, buf[:n]...)
		}
		if len(st.early) > 0 {
			if resp := t.answer(st.early, eng.ConnectionState()); len(resp) > 0 {
				if _, err := eng.Write(resp); err != nil {
					return nil, nil, err
				}
			}
			st.answered = true
		}
	}
	out := append([]byte(nil), eng.Output()...)
	if len(out) == 0 {
		return nil, nil, errNoFlight
	}
	return out, st, nil
}

var errNoFlight = errorString("turbo: the engine produced no flight")

type errorString string

func (e errorString) Error() string { return string(e) }

// Accept starts a server connection on raw, a new TCP connection: if it
// opens with the link record of a ready UDP entry from the same address,
// the entry's engine continues on it; otherwise (no link record, or an
// unknown or expired id, whose record is then stripped) it is a plain TLS
// 1.3 server connection. The handshake is not run.
func (t *TLSServer) Accept(raw net.Conn) (*ServerConn, error) {
	id, linked, c, err := readLink(raw, t.LinkTimeout)
	if err != nil {
		return nil, err
	}
	if linked {
		var remote netip.Addr
		if ta, ok := raw.RemoteAddr().(*net.TCPAddr); ok {
			remote = ta.AddrPort().Addr()
		}
		if v, ok := t.Link(id, remote); ok {
			st := v.(*tlsState)
			sc := &ServerConn{Conn: st.eng.Conn(c, false), Turbo: true, ID: id, EarlyAnswered: st.answered}
			if st.answered {
				sc.Early = st.early
			}
			return sc, nil
		}
	}
	return &ServerConn{Conn: tls13.Server(c, t.tls.Load())}, nil
}

// ListenAndServe is a convenience: it serves UDP on udp, accepts TCP on
// ln and calls handle for each connection in its own goroutine, until ln
// fails (close it, and the server, to stop).
func (t *TLSServer) ListenAndServe(ln net.Listener, udp net.PacketConn, handle func(*ServerConn)) error {
	go t.ServeUDP(udp)
	for {
		raw, err := ln.Accept()
		if err != nil {
			return err
		}
		go func() {
			sc, err := t.Accept(raw)
			if err != nil {
				raw.Close()
				return
			}
			handle(sc)
		}()
	}
}
