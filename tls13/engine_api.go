package tls13

import (
	"net"
	"time"
)

// Engine is the sans-IO handshake and record core, for transports other
// than one byte stream from the start: TurboTLS carries the first flights
// over UDP and then hands the engine to the TCP connection with Conn.
// Bytes from the peer go in with Feed; records to send come out of
// Output. An Engine is not safe for concurrent use. It does all its work
// on the caller's goroutine unless CheckConcurrently lends it more.
type Engine struct {
	e     *engine
	early []byte // early data offered, resent by Conn if rejected
}

// NewClientEngine returns a client engine; Start queues its ClientHello.
func NewClientEngine(cfg *Config) *Engine { return &Engine{e: newEngine(cfg, true)} }

// NewServerEngine returns a server engine waiting for a ClientHello.
func NewServerEngine(cfg *Config) *Engine {
	x := &Engine{e: newEngine(cfg, false)}
	x.e.startServer()
	return x
}

// Start queues the ClientHello (with session resumption or Z-data, and
// early data, when given) on a client engine.
func (x *Engine) Start(session *ClientSession, z *ZDataOffer, earlyData []byte) error {
	err := x.e.startClient(session, z, earlyData)
	if err == nil && x.e.info.EarlyDataOffered {
		x.early = append([]byte(nil), earlyData...)
	}
	return err
}

// CheckConcurrently lets a client engine check the server's certificate
// chain on a goroutine of its own during Feed, beside the CertificateVerify
// signature, as Conn does: with a second core the two public-key checks
// take the time of one. Call it before Feed.
func (x *Engine) CheckConcurrently() { x.e.run = runConcurrently }

// Feed processes bytes (TLS records) from the peer.
func (x *Engine) Feed(b []byte) error { return x.e.feed(b) }

// Output returns the records to send and forgets them; the slice is
// valid until the next call.
func (x *Engine) Output() []byte { return x.e.takeOutput() }

// HandshakeComplete reports whether the handshake finished.
func (x *Engine) HandshakeComplete() bool { return x.e.done }

// FlightDone reports, on a server, that its first flight is queued (so
// 0.5-RTT data may follow); on a client it is HandshakeComplete.
func (x *Engine) FlightDone() bool { return x.e.canWriteApp }

// Err is the engine's fatal error, if any.
func (x *Engine) Err() error { return x.e.err }

// ConnectionState describes the handshake so far.
func (x *Engine) ConnectionState() ConnectionState { st := x.e.info; st.Version = 0x0304; return st }

// Write protects application data once this side may send it: after the
// handshake, or on a server after its flight (0.5-RTT data). A client's
// 0-RTT data is what it gives Start.
func (x *Engine) Write(p []byte) (int, error) { return x.e.writeApp(p) }

// ReadEarly reads accepted 0-RTT data on a server. Like Conn.ReadEarlyData,
// what it returns is not client-authenticated and may be a replay within
// the anti-replay window's limits: act on it only as a replay-safe request.
func (x *Engine) ReadEarly(p []byte) int { return x.e.readEarly(p) }

// Conn continues the connection over c. Output not yet taken is sent
// first. A client's rejected early data is resent after the handshake when
// resendEarly is set (only for replay-safe data). The engine must not be
// used directly afterwards.
func (x *Engine) Conn(c net.Conn, resendEarly bool) *Conn {
	x.e.run = runConcurrently // the Conn lends goroutines, as its own engine gets
	conn := &Conn{conn: c, cfg: x.e.cfg, isClient: x.e.isClient, e: x.e, started: true,
		early: x.early, resend: resendEarly}
	now := time.Now() // real time: the trace's event times
	for _, ev := range x.e.events {
		conn.trace = append(conn.trace, TraceEvent{Event: ev, At: now})
	}
	x.e.events = x.e.events[:0]
	return conn
}
