package tls13

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
)

// ConnectionState describes a connection.
type ConnectionState struct {
	Version            uint16 // always 0x0304
	HandshakeComplete  bool
	DidResume          bool
	CipherSuite        CipherSuite
	Group              CurveID         // 0 when resumed with psk_ke
	SignatureScheme    SignatureScheme // the peer's CertificateVerify scheme (0 if none)
	NegotiatedProtocol string
	ServerName         string // server: the SNI the client sent
	EarlyDataOffered   bool
	EarlyDataAccepted  bool
	// ZTLS: whether the client offered ztls and the server accepted it
	// (echoed it); on a server, ZTLSRejectReason says why an offer was not
	// accepted, on a client ZTLSSkipped why Z-data in hand was not offered.
	ZTLSOffered      bool
	ZTLS             bool
	ZTLSRejectReason string
	ZTLSSkipped      string
	// ZTLSBFE: the accepted ztls early secret also rests on a Bloom filter
	// encryption key (docs/ztls-spec.md, Section 7).
	ZTLSBFE bool
	// ZTLSKEM: the accepted ztls early secret rests on an X25519MLKEM768
	// Z-data key (docs/ztls-spec.md, Section 9): ML-KEM-768 and x25519.
	ZTLSKEM            bool
	CertificateOmitted bool // ZTLS: the server left out its Certificate (cert_hash matched)
	// CertificateCompression is the algorithm (RFC 8879) that compressed
	// the server's Certificate, ClientCertificateCompression the client's;
	// 0 when it went uncompressed, was omitted or not sent.
	CertificateCompression       CertCompressionAlgorithm
	ClientCertificateCompression CertCompressionAlgorithm
	// AnswerInFirstFlight (client): application data arrived with the
	// server's first flight, before our Finished was handed to the network.
	AnswerInFirstFlight bool
	PeerCertificates    []*x509.Certificate
	VerifiedChains      [][]*x509.Certificate
	// ChainSource (client) says where VerifiedChains came from:
	// ChainVerified, ChainCached or ChainPrevalidated; "" when no chain
	// was verified (InsecureSkipVerify, resumption).
	ChainSource string
	// ECH is what became of Encrypted ClientHello (RFC 9849): accepted,
	// rejected, grease, or none ("").
	ECH ECHStatus
}

// TraceEvent is one step of the handshake and when it happened.
type TraceEvent struct {
	Event Event
	At    time.Time
}

// Conn is a TLS 1.3 connection over a net.Conn. Read and Write may be
// called concurrently with each other; several concurrent Reads (or
// Writes) are serialised.
type Conn struct {
	conn     net.Conn
	cfg      *Config
	isClient bool

	hsMu      sync.Mutex  // serialises handshakes
	hsDone    atomic.Bool // Handshake succeeded: later calls return at once
	readMu    sync.Mutex  // one reader at a time
	writeMu   sync.Mutex  // output order: taken engine bytes are written under it
	mu        sync.Mutex  // guards e and the fields below
	e         *engine
	started   bool
	trace     []TraceEvent
	session   *ClientSession
	zoffer    *ZDataOffer
	early     []byte
	resend    bool
	earlyLost bool
	readBuf   []byte // small: what an idle connection waits with (readInput)
	bulk      bool   // the last read filled readBuf: read with a large one
	bulkShort bool   // the last bulk read did not fill its room
	busy      bool   // the last read was large or filled readBuf
	wbuf      []byte // guarded by writeMu
	closed    bool
}

// ErrClosedDuringHandshake is returned when the peer closes the
// connection before the handshake completes.
var ErrClosedDuringHandshake = errors.New("tls13: connection closed by peer during the handshake")

// Client returns a client connection over conn. cfg must set ServerName or
// InsecureSkipVerify.
func Client(conn net.Conn, cfg *Config) *Conn {
	return &Conn{conn: conn, cfg: cfg, isClient: true, e: newConnEngine(cfg, true)}
}

// Server returns a server connection over conn. cfg must hold at least one Certificate.
func Server(conn net.Conn, cfg *Config) *Conn {
	return &Conn{conn: conn, cfg: cfg, e: newConnEngine(cfg, false)}
}

// newConnEngine is the engine of a Conn, which lends it goroutines: the
// client checks the server's chain beside its CertificateVerify.
func newConnEngine(cfg *Config, isClient bool) *engine {
	e := newEngine(cfg, isClient)
	e.run = runConcurrently
	return e
}

// runConcurrently runs job on a goroutine of its own and returns a
// function that waits for it to finish.
func runConcurrently(job func()) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		job()
	}()
	return func() { <-done }
}

// Dial connects to addr and runs the handshake. An empty cfg.ServerName is
// taken from addr.
func Dial(network, addr string, cfg *Config) (*Conn, error) {
	return DialContext(context.Background(), network, addr, cfg)
}

// DialContext is Dial with a context bounding the connect and the handshake.
func DialContext(ctx context.Context, network, addr string, cfg *Config) (*Conn, error) {
	if cfg == nil {
		cfg = &Config{}
	}
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		c := cfg.Clone()
		c.ServerName = host
		cfg = c
	}
	var d net.Dialer
	raw, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	return c, nil
}

// Clone returns a copy of c with its own lazily made secrets.
func (c *Config) Clone() *Config {
	n := &Config{}
	*n = Config{
		Rand: c.Rand, Time: c.Time, Certificates: c.Certificates, RootCAs: c.RootCAs,
		ServerName: c.ServerName, InsecureSkipVerify: c.InsecureSkipVerify,
		VerifyPeerCertificate: c.VerifyPeerCertificate, VerifiedChains: c.VerifiedChains, ChainCache: c.ChainCache, ClientAuth: c.ClientAuth, ClientCAs: c.ClientCAs,
		CipherSuites: c.CipherSuites, Groups: c.Groups, KeyShareGroups: c.KeyShareGroups,
		SignatureSchemes: c.SignatureSchemes, NextProtos: c.NextProtos, RecordSizeLimit: c.RecordSizeLimit,
		PadTo: c.PadTo, SessionTicketsDisabled: c.SessionTicketsDisabled, CertificateCompression: c.CertificateCompression,
		ClientSessionCache: c.ClientSessionCache, TicketKey: c.TicketKey, TicketKeys: c.TicketKeys, TicketLifetime: c.TicketLifetime,
		PSKModes: c.PSKModes, MaxEarlyData: c.MaxEarlyData, EarlyDataWindow: c.EarlyDataWindow,
		StrikeRegister: c.StrikeRegister, MiddleboxCompat: c.MiddleboxCompat, KeyLogWriter: c.KeyLogWriter,
		MaxHandshakeMessage: c.MaxHandshakeMessage, ZData: c.ZData, ZTLSExtension: c.ZTLSExtension,
		Revocation: c.Revocation, KeySharePool: c.KeySharePool,
		ECHConfigList: c.ECHConfigList, ECHGrease: c.ECHGrease, ECHKeys: c.ECHKeys, ECHKeySet: c.ECHKeySet, ECHBackend: c.ECHBackend,
		testHookClientHello: c.testHookClientHello, testHookServerHello: c.testHookServerHello,
		testHookEncryptedExtensions: c.testHookEncryptedExtensions, testHookTicket: c.testHookTicket,
		testHookFinished: c.testHookFinished,
	}
	return n
}

type listener struct {
	net.Listener
	cfg *Config
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return Server(c, l.cfg), nil
}

// NewListener wraps inner so Accept returns server Conns (handshake on first use).
func NewListener(inner net.Listener, cfg *Config) net.Listener {
	return &listener{Listener: inner, cfg: cfg}
}

// Listen listens on addr and returns a listener of server Conns.
func Listen(network, addr string, cfg *Config) (net.Listener, error) {
	if cfg == nil || len(cfg.Certificates) == 0 {
		return nil, errors.New("tls13: Listen needs a Config with Certificates")
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	return NewListener(l, cfg), nil
}

// SetSession offers s for resumption on the next handshake (client only),
// instead of the session cache's entry.
func (c *Conn) SetSession(s *ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session = s
}

// Session returns the newest session ticket the server sent, or nil. It
// arrives after the handshake: read from the connection first.
func (c *Conn) Session() *ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.e.lastSession()
}

// SetZData makes the next handshake open with ZTLS using verified Z-data
// (client only). Early data set with SetEarlyData then rides under the
// Z-data key; the server's refusal falls back to a plain TLS 1.3 handshake.
func (c *Conn) SetZData(z *ZDataOffer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.zoffer = z
}

// SetEarlyData queues data to send as 0-RTT early data with the ClientHello
// (client only; needs a session that allows early data). If the server
// rejects it and resendIfRejected is true, the handshake resends it as
// ordinary data; otherwise it is dropped, and EarlyDataLost reports so
// (ConnectionState().EarlyDataAccepted is false either way). Only send
// replay-safe requests early.
func (c *Conn) SetEarlyData(data []byte, resendIfRejected bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.early = append([]byte(nil), data...)
	c.resend = resendIfRejected
}

// Handshake runs the handshake if it has not run yet. A server returns
// after the client's Finished; use HandshakeEarly to answer 0-RTT data
// before that.
func (c *Conn) Handshake() error { return c.HandshakeContext(context.Background()) }

// HandshakeContext is Handshake bounded by ctx.
func (c *Conn) HandshakeContext(ctx context.Context) error {
	if c.hsDone.Load() {
		return nil
	}
	err := c.handshake(ctx, false)
	if err == nil {
		c.hsDone.Store(true)
	}
	return err
}

// HandshakeEarly runs the handshake until this side may send application
// data: for a server that is as soon as its first flight is out, so it can
// read 0-RTT data with ReadEarlyData and answer with 0.5-RTT data before
// the client's Finished; for a client it is Handshake.
//
// What ReadEarlyData then returns is unauthenticated and replayable: the
// client has not yet proved it holds any certificate (a server that
// requires client certificates takes no early data at all), and an
// attacker may have recorded and resent it. The strike register stops a
// replay within one server or a fleet sharing one register, not across
// servers with registers of their own. Act only on requests that are
// safe to run twice (RFC 8470); anything else waits for Handshake.
func (c *Conn) HandshakeEarly(ctx context.Context) error {
	return c.handshake(ctx, true)
}

func (c *Conn) handshake(ctx context.Context, early bool) (err error) {
	c.hsMu.Lock()
	defer c.hsMu.Unlock()
	if done, err := c.handshakeDone(early); done || err != nil {
		if done && err == nil && c.isClient {
			// A handshake finished by the engine before this Conn (TurboTLS
			// feeds the server's UDP flight first) still owes the resend of
			// rejected replay-safe early data; it is done once.
			return c.afterClientHandshake()
		}
		return err
	}
	unbind := c.bindContext(ctx)
	defer func() { err = unbind(err) }()
	c.mu.Lock()
	if !c.started {
		c.started = true
		if c.isClient {
			sess := c.session
			if sess == nil && c.cfg.ClientSessionCache != nil {
				sess = c.cfg.ClientSessionCache.Get(sessionCacheKey(c.cfg))
			}
			c.e.startClient(sess, c.zoffer, c.early)
		} else {
			c.e.startServer()
		}
	}
	c.mu.Unlock()
	if err := c.flush(); err != nil {
		return err
	}
	return c.readHandshake(early)
}

// bindContext makes ctx bound the handshake's I/O: its deadline becomes
// the connection's, and its cancellation interrupts a blocked read. The
// function it returns undoes that and, when ctx ended the handshake,
// says so in the handshake's error.
func (c *Conn) bindContext(ctx context.Context) (unbind func(error) error) {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		c.conn.SetDeadline(deadline)
	}
	stop := func() bool { return false }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	}
	return func(err error) error {
		if ctx.Done() != nil {
			stop()
			if err != nil && ctx.Err() != nil {
				err = fmt.Errorf("tls13: handshake: %w (%v)", ctx.Err(), err)
			}
		}
		if hasDeadline {
			c.conn.SetDeadline(time.Time{})
			if err != nil && ctx.Err() == nil && !time.Now().Before(deadline) { // real time: a deadline
				// The socket's timer fired a moment before the context's.
				err = fmt.Errorf("tls13: handshake: %w (%v)", context.DeadlineExceeded, err)
			}
		}
		return err
	}
}

// readHandshake feeds the peer's bytes to the engine and sends what it
// answers until the handshake is done (for a server with early set: until
// its first flight is out).
func (c *Conn) readHandshake(early bool) error {
	bp := handshakeBufPool.Get().(*[]byte)
	defer handshakeBufPool.Put(bp)
	buf := *bp
	for {
		if done, err := c.handshakeDone(early); done || err != nil {
			if done && c.isClient {
				return c.afterClientHandshake()
			}
			return err
		}
		n, rerr := c.conn.Read(buf)
		if n > 0 {
			c.mu.Lock()
			ferr := c.e.feed(buf[:n])
			// A server returning early with 0-RTT data in hand keeps its
			// flight back so that the application's first answer leaves
			// with it (0.5-RTT in the first flight); the next Write, read
			// or handshake step sends it.
			holdFlight := early && !c.isClient && ferr == nil && c.e.canWriteApp && c.e.earlyBuffered() > 0
			c.mu.Unlock()
			if !holdFlight {
				if err := c.flush(); err != nil && ferr == nil {
					return err
				}
			}
			if ferr != nil {
				return ferr
			}
		}
		if rerr != nil {
			c.mu.Lock()
			herr := c.e.err
			c.mu.Unlock()
			if herr != nil {
				return herr
			}
			if rerr == io.EOF {
				return ErrClosedDuringHandshake
			}
			return rerr
		}
	}
}

// handshakeBufPool recycles the handshake loop's read buffer, which would
// otherwise be a 16.5 KiB allocation per handshake on each side. feed copies what it is given, so nothing keeps
// the buffer after it returns.
var handshakeBufPool = sync.Pool{New: func() any {
	b := make([]byte, 16*1024+512)
	return &b
}}

func (c *Conn) handshakeDone(early bool) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.collectEvents()
	if c.e.err != nil {
		return false, c.e.err
	}
	if c.e.peerClosed && !c.e.done {
		return false, ErrClosedDuringHandshake
	}
	if c.e.done {
		return true, nil
	}
	return early && !c.isClient && c.e.canWriteApp, nil
}

// afterClientHandshake resends rejected early data when asked to.
func (c *Conn) afterClientHandshake() error {
	c.mu.Lock()
	resend := len(c.early) > 0 && !c.e.info.EarlyDataAccepted
	data := c.early
	c.early = nil
	c.mu.Unlock()
	if !resend {
		return nil
	}
	if !c.resend {
		c.earlyLost = true
		return nil
	}
	_, err := c.Write(data)
	return err
}

func (c *Conn) collectEvents() {
	if len(c.e.events) == 0 {
		return
	}
	now := time.Now() // real time: the trace's event times
	for _, ev := range c.e.events {
		// The handshake's events always fit; KeyUpdates go on for the
		// connection's life, so the trace stops growing at maxTrace.
		if len(c.trace) < maxTrace {
			c.trace = append(c.trace, TraceEvent{Event: ev, At: now})
		}
	}
	c.e.events = c.e.events[:0]
}

// maxTrace bounds a connection's trace: a peer sending KeyUpdates with
// a byte of data between them would otherwise grow it without end.
const maxTrace = 256

// flush writes the engine's pending output to the network, in order.
func (c *Conn) flush() error {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	c.mu.Lock()
	c.wbuf = c.e.swapOutput(c.wbuf)
	c.mu.Unlock()
	if len(c.wbuf) == 0 {
		return nil
	}
	_, err := c.conn.Write(c.wbuf)
	return err
}

// flushFromReader sends what reading produced (a KeyUpdate answer, an
// alert) without waiting behind a Write blocked on the network: if a
// writer holds writeMu, that writer sends it when it finishes.
func (c *Conn) flushFromReader() {
	if !c.writeMu.TryLock() {
		return
	}
	c.mu.Lock()
	c.wbuf = c.e.swapOutput(c.wbuf)
	c.mu.Unlock()
	if len(c.wbuf) > 0 {
		c.conn.Write(c.wbuf)
	}
	c.writeMu.Unlock()
}

// pendingOutput reports whether the engine has bytes to send.
func (c *Conn) pendingOutput() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.e.out) > 0
}

// Read reads application data, running the handshake first if needed.
func (c *Conn) Read(p []byte) (int, error) {
	if err := c.Handshake(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	return c.readLoop(p, false)
}

// ReadEarlyData reads 0-RTT data on a server after HandshakeEarly. It
// returns io.EOF once the client's EndOfEarlyData arrived, or at once when
// no early data was accepted. The data is unauthenticated (no client
// certificate covers it) and may be a replay: see HandshakeEarly.
func (c *Conn) ReadEarlyData(p []byte) (int, error) {
	if c.isClient {
		return 0, errors.New("tls13: ReadEarlyData is for servers")
	}
	if err := c.HandshakeEarly(context.Background()); err != nil {
		return 0, err
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	return c.readLoop(p, true)
}

// idleReadSize is the read buffer a connection keeps, and waits for
// input with: an idle connection holds this much, not a record's worth.
const idleReadSize = 2 << 10

// readInput reads from the connection and feeds what came to the engine.
// It waits with the connection's small buffer; when a read fills it,
// more is likely queued (a large record, a burst), so the next reads go
// into the engine's record buffer (readBulk), up to bulkReadSize at a
// time, until one brings no more than the small buffer would have held. After a small read that did not fill it
// (light traffic, or none), the connection gives up its other buffers
// before it waits (releaseIdle): an idle connection holds its keys and
// the small buffer, no record's worth of bytes.
func (c *Conn) readInput() (int, error) {
	if c.bulk {
		return c.readBulk()
	}
	if c.readBuf == nil {
		c.readBuf = make([]byte, idleReadSize)
	}
	buf := c.readBuf
	if !c.busy {
		c.releaseIdle()
	}
	n, err := c.conn.Read(buf)
	c.busy = n == len(buf)
	c.bulk = n == len(buf)
	if n > 0 {
		c.mu.Lock()
		c.e.feed(buf[:n])
		c.collectEvents()
		c.mu.Unlock()
	}
	return n, err
}

// bulkReadSize is what readBulk reads at most at once: a few records, so
// a fast sender's records are taken with few reads (and wake-ups of the
// sender), as crypto/tls's growing input buffer does.
const bulkReadSize = 64 * 1024

// readBulk is readInput while reads fill their buffer: it reads straight
// into the engine's record buffer (engine.inputSpace), which feed would
// otherwise copy into. Only the reader (readMu) touches the engine's input
// side, so the room stays ours while we read into it without mu.
func (c *Conn) readBulk() (int, error) {
	size, fit := bulkReadSize, false
	c.mu.Lock()
	if c.bulkShort {
		// The last read did not fill its room: the sender is not keeping
		// up, or has stopped halfway through a record. Wait for that
		// record's rest only, in a buffer no larger than the record, so a
		// peer that stalls there ties up what crypto/tls would hold, not
		// bulkReadSize.
		if m := c.e.deframer.Missing(); m > 0 && m < size {
			size, fit = m, true
		}
	}
	buf := c.e.inputSpace(size, fit)
	c.mu.Unlock()
	if buf == nil {
		// The engine failed: readLoop reports its error.
		c.bulk = false
		return 0, nil
	}
	n, err := c.conn.Read(buf[:size])
	c.busy = true
	c.bulkShort = n < size
	c.mu.Lock()
	c.e.feedSpace(n)
	c.collectEvents()
	// Stay here while reads bring more than the small buffer holds, or a
	// record is half in: its rest comes here, not through the small buffer.
	c.bulk = n > idleReadSize || c.e.deframer.Buffered() > 0
	c.mu.Unlock()
	return n, err
}

// releaseIdle drops the write buffer (unless a writer holds it) and the
// engine's idle buffers.
func (c *Conn) releaseIdle() {
	if c.writeMu.TryLock() {
		c.wbuf = nil
		c.writeMu.Unlock()
	}
	c.mu.Lock()
	c.e.releaseIdle()
	c.mu.Unlock()
}

func (c *Conn) readLoop(p []byte, early bool) (int, error) {
	for {
		c.mu.Lock()
		if early {
			if c.e.earlyBuffered() > 0 {
				n := c.e.readEarly(p)
				c.mu.Unlock()
				return n, nil
			}
			if c.e.earlyEnded() || c.e.err != nil {
				err := c.e.err
				c.mu.Unlock()
				if err != nil {
					return 0, err
				}
				return 0, io.EOF
			}
		} else if c.e.appBuffered() > 0 {
			n := c.e.readApp(p)
			c.mu.Unlock()
			return n, nil
		} else if c.e.recordsWaiting() {
			// readBulk left records behind the data just read.
			c.e.resumeRecords()
			c.collectEvents()
			c.mu.Unlock()
			c.flushFromReader()
			continue
		}
		if c.e.err != nil {
			err := c.e.err
			c.mu.Unlock()
			return 0, err
		}
		if c.e.peerClosed {
			c.mu.Unlock()
			return 0, io.EOF
		}
		pending := len(c.e.out) > 0
		c.mu.Unlock()
		if pending {
			// Output held back (a server's first flight) goes before we wait.
			c.flushFromReader()
		}
		n, rerr := c.readInput()
		if n > 0 {
			c.flushFromReader()
			continue
		}
		if rerr != nil {
			c.mu.Lock()
			ended := c.e.peerClosed
			c.mu.Unlock()
			if rerr == io.EOF && !ended {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, rerr
		}
	}
}

// Write sends application data, running the handshake first if needed
// (a server that used HandshakeEarly writes 0.5-RTT data).
func (c *Conn) Write(p []byte) (int, error) {
	c.mu.Lock()
	ready := c.e.canWriteApp
	c.mu.Unlock()
	if !ready {
		if err := c.Handshake(); err != nil {
			return 0, err
		}
	}
	n, err := c.write(p)
	if c.pendingOutput() {
		// A reader left output for us while we held writeMu.
		c.flush()
	}
	return n, err
}

func (c *Conn) write(p []byte) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	total := 0
	for total < len(p) {
		// Seal at most 64 KiB at a time so the output buffer stays small.
		chunk := p[total:min(len(p), total+64*1024)]
		// Seal under mu, but write without it, so a Read can go on
		// feeding the engine while this write blocks.
		c.mu.Lock()
		n, err := c.e.writeApp(chunk)
		c.wbuf = c.e.swapOutput(c.wbuf)
		c.mu.Unlock()
		var werr error
		if len(c.wbuf) > 0 {
			_, werr = c.conn.Write(c.wbuf)
		}
		total += n
		if err != nil {
			return total, err
		}
		if werr != nil {
			return total, werr
		}
	}
	return total, nil
}

// KeyUpdate moves our sending keys forward (RFC 8446, Section 4.6.3) and,
// with requestPeer, asks the peer to do the same.
func (c *Conn) KeyUpdate(requestPeer bool) error {
	c.mu.Lock()
	err := c.e.sendKeyUpdate(requestPeer)
	c.mu.Unlock()
	if err != nil {
		return err
	}
	return c.flush()
}

// ExportKeyingMaterial derives keying material (RFC 8446, Section 7.5).
func (c *Conn) ExportKeyingMaterial(label string, context []byte, length int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.e.exporter == nil {
		return nil, errors.New("tls13: exporter used before the handshake")
	}
	return keyschedule.Exporter(c.e.hash, c.e.exporter, label, context, length), nil
}

// ConnectionState returns details of the connection.
func (c *Conn) ConnectionState() ConnectionState {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.e.info
	st.Version = 0x0304
	return st
}

// Trace returns the events seen so far with their times: the handshake's,
// then KeyUpdates sent (EventKeyUpdate) and received (EventPeerKeyUpdate),
// up to 256 events in all.
func (c *Conn) Trace() []TraceEvent {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.collectEvents()
	return append([]TraceEvent(nil), c.trace...)
}

// EarlyDataLost reports whether early data was rejected and, as asked by
// SetEarlyData, not resent.
func (c *Conn) EarlyDataLost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.earlyLost
}

// CloseWrite sends close_notify but keeps reading.
func (c *Conn) CloseWrite() error {
	c.mu.Lock()
	c.e.close()
	c.mu.Unlock()
	return c.flush()
}

// Close sends close_notify (if the handshake ran) and closes the connection.
func (c *Conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return net.ErrClosed
	}
	c.closed = true
	started := c.started
	if started {
		c.e.close()
	}
	c.mu.Unlock()
	if started {
		c.conn.SetWriteDeadline(time.Now().Add(time.Second))
		c.flush()
	}
	return c.conn.Close()
}

func (c *Conn) LocalAddr() net.Addr                { return c.conn.LocalAddr() }
func (c *Conn) RemoteAddr() net.Addr               { return c.conn.RemoteAddr() }
func (c *Conn) SetDeadline(t time.Time) error      { return c.conn.SetDeadline(t) }
func (c *Conn) SetReadDeadline(t time.Time) error  { return c.conn.SetReadDeadline(t) }
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.conn.SetWriteDeadline(t) }

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.conn }
