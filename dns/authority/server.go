package authority

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsstream"
	"github.com/ztls-project/ztls/internal/clock"
)

// Defaults for the zero fields of a Server.
const (
	DefaultMaxUDPSize = 1232 // RFC 9715 and DNS Flag Day 2020
	// DefaultIdleTimeout: T-DNS (Zhu et al. 2015, Section 4.3) found
	// 20 s at an authority keeps most of a resolver's reuse at a modest
	// count of open connections; RFC 7766, Section 6.2.3 asks for seconds,
	// not milliseconds.
	DefaultIdleTimeout  = 20 * time.Second
	DefaultWriteTimeout = 5 * time.Second
	DefaultMaxConns     = 1000
	DefaultMaxPipelined = 128
	// DefaultUDPBatchWorkers: goroutines per UDP socket; while one waits
	// in recvmmsg the other answers its batch.
	DefaultUDPBatchWorkers = 2
	// DefaultMaxUDPAmplification: a UDP answer to a client without a
	// valid server cookie is at most 10 times its query, or
	// DefaultAmplificationFloor bytes if that is more.
	DefaultMaxUDPAmplification = 10
	// DefaultAmplificationFloor: the amplification cap never cuts an
	// answer that fits the 1232 bytes of DNS Flag Day 2020, so the HTTPS
	// record a browser asks for on every navigation, with its Z-data,
	// ECH and TurboTLS keys (docs/ztls-spec.md, Section 8.3), reaches a
	// resolver that sends no cookie (Unbound, a browser's own stub) over
	// UDP; RRL bounds what a spoofer gets from such answers.
	DefaultAmplificationFloor = 1232
)

// ErrServerClosed is returned by the Serve methods after Close.
var ErrServerClosed = errors.New("authority: server closed")

var errAlreadyWritten = errors.New("authority: answer already written")

// A Server serves DNS over UDP, TCP and TLS with one Handler.
//
// UDP is served by a fixed pool of goroutines reading the socket. A stream
// connection is read continuously: each query is handed to its own
// goroutine (at most MaxPipelined at once per connection; reading pauses
// when the limit is reached) and each answer is written as soon as it is
// ready, so answers leave out of order (RFC 7766, Section 7). A packet
// whose header cannot be parsed, or that is itself a response, gets no
// answer; on a stream it also closes the connection. A packet with a header
// that does not otherwise parse gets FORMERR.
//
// Set the fields before the first Serve call and do not change them after.
// The zero value (apart from Handler) uses the defaults above. The Serve
// methods may be called several times, concurrently, on different sockets.
type Server struct {
	// Handler answers queries; usually Chain(zones, CheckQuery).
	Handler Handler
	// MaxUDPSize is the largest UDP answer, and the size advertised in
	// the server's OPT record (RFC 6891, Section 6.2.5); clients asking
	// for more get this much. 0 means DefaultMaxUDPSize.
	MaxUDPSize int
	// UDPWorkers is the number of goroutines answering one UDP socket.
	// 0 means DefaultUDPBatchWorkers for a *net.UDPConn (each reads and
	// writes batches of datagrams) and 4 × GOMAXPROCS for another
	// PacketConn.
	UDPWorkers int
	// IdleTimeout closes a stream connection that sent no query for that
	// long; it is announced in the edns-tcp-keepalive option (RFC 7828).
	// It also bounds a TLS handshake. 0 means DefaultIdleTimeout.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one answer on a stream. 0 means
	// DefaultWriteTimeout.
	WriteTimeout time.Duration
	// MaxConns limits open stream connections. At the limit a newcomer
	// takes the place of an idle connection (one that never sent a query
	// first, then one from the most crowded network, then the one idle
	// longest); when all are busy it is closed at once. 0 means
	// DefaultMaxConns.
	MaxConns int
	// MaxConnsPerAddr limits the stream connections of one source
	// address, MaxConnsPerPrefix those of one network (/24 for IPv4, /56
	// for IPv6); more are closed at once, so one client cannot hold the
	// connections others need. 0 means DefaultMaxConnsPerAddr and
	// DefaultMaxConnsPerPrefix; a negative value means no limit.
	MaxConnsPerAddr, MaxConnsPerPrefix int
	// FirstQueryTimeout closes a stream connection that has not sent a
	// whole first query (its TLS handshake included) that long after it
	// was accepted; it is never longer than IdleTimeout. 0 means
	// DefaultFirstQueryTimeout.
	FirstQueryTimeout time.Duration
	// MaxPipelined limits the queries of one stream connection handled at
	// once. 0 means DefaultMaxPipelined.
	MaxPipelined int
	// MaxStreamMessageSize is the largest query accepted on a stream; a
	// larger length prefix closes the connection. 0 means 65535.
	MaxStreamMessageSize int
	// RateLimit configures Response Rate Limiting on UDP; nil means
	// DefaultRateLimit, and a RateLimit with ResponsesPerSecond 0 turns
	// it off.
	RateLimit *RateLimit
	// MaxUDPAmplification caps a UDP answer to a client that presented no
	// valid server cookie at this many times the size of its query;
	// a larger answer is truncated (TC=1), so a real client retries over
	// TCP or with its cookie, and a spoofed query amplifies no more.
	// 0 means DefaultMaxUDPAmplification, a negative value no cap; values
	// below 2 are taken as 2 (the truncated answer must fit).
	MaxUDPAmplification int
	// AmplificationFloor is the smallest cap, in bytes: answers up to it
	// are never cut by MaxUDPAmplification. 0 means
	// DefaultAmplificationFloor, a negative value none (the factor alone).
	AmplificationFloor int
	// DisableCookies turns DNS cookies (RFC 7873) off: the COOKIE option
	// is then ignored and never answered. Cookies are on by default, with
	// a random secret per process (RotateCookieSecret, SetCookieSecret).
	DisableCookies bool
	// AnswerCacheSize, when positive, keeps up to this many packed
	// answers per transport, keyed by the bytes of their query (all but
	// the ID; the question's name without regard to letter case, the
	// answer carrying it as asked), and answers a repeated query from them
	// without parsing it or calling Handler. An answer is kept the second
	// time its question is asked, so questions asked once (random names)
	// do not churn the cache. Use it only with a Handler whose answer depends
	// on nothing but the query's bytes and the zone data, such as
	// Chain(zones, CheckQuery): a change through Zone.ReplaceRRset or
	// Zone.Swap outdates every cached answer at once. Queries with a
	// COOKIE option are never cached; RRL and Stats count every answer
	// sent from the cache. The cache holds at most 1 KB per entry on
	// average (queries over 512 bytes and answers over 4 KB are not
	// kept). 0 turns the cache off.
	AnswerCacheSize int
	// CachedAnswer, if set, is called with the query type and RCODE of
	// each answer sent from the cache, which the Handler chain (metrics
	// middleware included) does not see. It must be safe for concurrent
	// use.
	CachedAnswer func(qtype uint16, rcode int)
	// Time returns the current time, for server cookies and rate limiting;
	// nil means the ztls clock (internal/clock: the system clock, unless ZTLS_CLOCK_OFFSET shifts it).
	Time func() time.Time
	// Logf, if set, receives one line per connection or socket error.
	// Queries and answers are never logged.
	Logf func(format string, args ...any)

	once     sync.Once
	ctx      context.Context
	cancel   context.CancelFunc
	mu       sync.Mutex
	closed   bool
	closers  map[interface{ Close() error }]struct{}
	wg       sync.WaitGroup
	conns    *connTable
	bufs     sync.Pool
	rrl      *rrl
	cookies  cookieKeys
	counters counters
	cache    map[Transport]*answerCache // nil when AnswerCacheSize is 0
}

func (s *Server) init() {
	s.once.Do(func() {
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.closers = make(map[interface{ Close() error }]struct{})
		s.conns = newConnTable(orDefault(s.MaxConns, DefaultMaxConns),
			limitOrDefault(s.MaxConnsPerAddr, DefaultMaxConnsPerAddr),
			limitOrDefault(s.MaxConnsPerPrefix, DefaultMaxConnsPerPrefix))
		s.rrl = newRRL(s.RateLimit)
		var k cookieSecret
		rand.Read(k[:]) // crypto/rand.Read does not fail (Go 1.24)
		s.cookies.set(k)
		if s.AnswerCacheSize > 0 {
			s.cache = map[Transport]*answerCache{
				TransportUDP: newAnswerCache(s.AnswerCacheSize),
				TransportTCP: newAnswerCache(s.AnswerCacheSize),
				TransportTLS: newAnswerCache(s.AnswerCacheSize),
			}
		}
		s.bufs.New = func() any { b := make([]byte, dnsstream.MaxMessageSize+2); return &b }
	})
}

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// limitOrDefault is orDefault for limits where a negative value means
// none (0 is returned).
func limitOrDefault(v, def int) int {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

// now is the server's clock.
func (s *Server) now() time.Time {
	if s != nil && s.Time != nil {
		return s.Time()
	}
	return clock.Now()
}

func (s *Server) logf(format string, args ...any) {
	if s.Logf != nil {
		s.Logf(format, args...)
	}
}

// track registers c to be closed by Close, and n goroutines for Close to
// wait for; it fails once the server is closed. Both happen under the
// lock Close takes first, so no goroutine is added while Close waits.
func (s *Server) track(c interface{ Close() error }, n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.closers[c] = struct{}{}
	s.wg.Add(n)
	return true
}

func (s *Server) untrack(c interface{ Close() error }) {
	s.mu.Lock()
	delete(s.closers, c)
	s.mu.Unlock()
}

func (s *Server) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// Close stops the server: it closes every socket and connection it serves,
// cancels the handlers' context and waits for its goroutines to end. The
// Serve methods then return ErrServerClosed.
func (s *Server) Close() error {
	s.init()
	s.mu.Lock()
	s.closed = true
	for c := range s.closers {
		c.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// ServeUDP answers queries arriving on pc until Close or a socket error.
// A *net.UDPConn is read and written in batches (recvmmsg and sendmmsg on
// Linux); to use several CPUs, open one socket per CPU on the same port
// (ListenReusePort) and serve each.
func (s *Server) ServeUDP(pc net.PacketConn) error {
	s.init()
	uc, batched := pc.(*net.UDPConn)
	n := s.UDPWorkers
	if n <= 0 {
		n = 4 * runtime.GOMAXPROCS(0)
		if batched {
			n = DefaultUDPBatchWorkers
		}
	}
	if !s.track(pc, n) {
		pc.Close()
		return ErrServerClosed
	}
	defer s.untrack(pc)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer wg.Done()
			if batched {
				w, err := s.newUDPBatchWorker(uc)
				if err != nil {
					errs <- err
					return
				}
				errs <- w.serve()
			} else {
				errs <- s.readUDP(pc)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if s.isClosed() {
		return ErrServerClosed
	}
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// readUDP is one UDP worker: read a datagram, answer it, repeat.
func (s *Server) readUDP(pc net.PacketConn) error {
	buf := make([]byte, dnsstream.MaxMessageSize)
	out := &udpOutlet{pc: pc, local: pc.LocalAddr()}
	out.uc, _ = pc.(*net.UDPConn)
	rw := &responder{}
	for {
		var (
			n   int
			err error
		)
		out.addr = nil
		if out.uc != nil {
			n, out.addrPort, err = out.uc.ReadFromUDPAddrPort(buf)
		} else {
			n, out.addr, err = pc.ReadFrom(buf)
		}
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			pc.Close()
			s.logf("authority: udp %v: %v", pc.LocalAddr(), err)
			return err
		}
		*rw = responder{srv: s, t: TransportUDP, out: out}
		s.serveMsg(s.ctx, buf[:n], rw)
	}
}

// ServeTCP answers DNS over TCP (RFC 7766) on the connections l accepts.
func (s *Server) ServeTCP(l net.Listener) error { return s.ServeStream(l, TransportTCP) }

// ServeTLS answers DNS over TLS (RFC 7858) on the connections l accepts,
// with Go's crypto/tls and cfg. To use another TLS implementation, pass
// its listener to ServeStream with TransportTLS.
func (s *Server) ServeTLS(l net.Listener, cfg *tls.Config) error {
	return s.ServeStream(tls.NewListener(l, cfg), TransportTLS)
}

// ServeStream answers length-prefixed DNS on the connections l accepts;
// t tells handlers (and padding) which transport it is. The listener may
// wrap connections in any TLS implementation: the handshake is expected to
// run on the connection's first Read, bounded by IdleTimeout.
func (s *Server) ServeStream(l net.Listener, t Transport) error {
	s.init()
	if !s.track(l, 0) {
		l.Close()
		return ErrServerClosed
	}
	defer s.untrack(l)
	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if s.isClosed() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.EMFILE) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				s.logf("authority: accept on %v: %v; retrying in %v", l.Addr(), err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		sc := newStreamConn(s, c, t)
		verdict, victim := s.conns.admit(sc)
		if verdict != admitted {
			// Refuse, rather than queue, the client: closing at once
			// frees the descriptor.
			s.countRefusal(verdict)
			c.Close()
			continue
		}
		s.counters.connsAccepted.Add(1)
		if victim != nil {
			s.counters.connsEvicted.Add(1)
			victim.evict()
		}
		if !s.track(c, 1) {
			c.Close()
			s.conns.release(sc)
			return ErrServerClosed
		}
		go s.serveConn(sc)
	}
}

func (s *Server) countRefusal(a admission) {
	switch a {
	case refusedAddr:
		s.counters.connsRefusedAddr.Add(1)
	case refusedPrefix:
		s.counters.connsRefusedPrefix.Add(1)
	case refusedFull:
		s.counters.connsRefusedFull.Add(1)
	}
}

// answerable reports whether raw has a parsable header and is a query
// (QR=0): anything else gets no reply (RFC 1035, Section 4.1.1).
func answerable(raw []byte) bool {
	return len(raw) >= 12 && raw[2]&0x80 == 0
}

// serveMsg is the transport-independent path of one datagram: check the
// header, parse, hand the message to the handler.
func (s *Server) serveMsg(ctx context.Context, raw []byte, rw *responder) {
	if !answerable(raw) {
		return
	}
	if rw.t == TransportUDP {
		s.counters.udpQueries.Add(1)
		s.counters.udpBytesIn.Add(uint64(len(raw)))
	}
	rw.querySize = len(raw)
	if s.cache != nil {
		if s.answerCached(raw, rw) {
			return
		}
		rw.note.key, rw.note.version = raw[2:], zoneVersion.Load()
	}
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		rw.writeFormErr(raw)
		return
	}
	s.serveParsed(ctx, rw, m)
	rw.note.key = nil // raw is the caller's buffer
}

// serveParsed hands a parsed query to the handler, unless its COOKIE
// option is malformed (FORMERR, RFC 7873, Section 5.2.2).
func (s *Server) serveParsed(ctx context.Context, rw *responder, m *dns.Msg) {
	if rcode := rw.readRequest(m); rcode != dns.RcodeSuccess {
		rw.note.key = nil
		rw.WriteMsg(reply(m, rcode))
		return
	}
	s.Handler.ServeDNS(ctx, rw, m)
}

// streamConn is one stream connection's shared write side; it is the
// outlet of all the connection's responders.
type streamConn struct {
	s        *Server
	c        net.Conn
	t        Transport
	local    net.Addr
	remote   net.Addr
	inflight sync.WaitGroup
	mu       sync.Mutex // serialises writes: frames never interleave
	broken   bool

	// The client, for the connection limits; hasIP is false for a
	// non-IP address.
	addr   netip.Addr
	prefix netip.Prefix
	hasIP  bool
	// For choosing an idle connection to close (connTable.pickVictim).
	queried    atomic.Bool   // it sent a query
	busy       atomic.Int32  // queries being answered
	lastActive atomic.Uint64 // connTable.clock at its last activity
}

func newStreamConn(s *Server, c net.Conn, t Transport) *streamConn {
	sc := &streamConn{s: s, c: c, t: t, local: c.LocalAddr(), remote: c.RemoteAddr()}
	sc.addr, sc.prefix, sc.hasIP = clientOf(sc.remote)
	return sc
}

func (sc *streamConn) localAddr() net.Addr  { return sc.local }
func (sc *streamConn) remoteAddr() net.Addr { return sc.remote }
func (sc *streamConn) remoteIP() netip.Addr { return sc.addr }

// evict closes sc for a newcomer, from the accept loop. Under TLS it
// closes the socket beneath: a TLS Close first writes close_notify, which
// waits up to seconds on a client that does not read, and every accept
// would wait with it. sc's serveConn then ends on the closed socket.
func (sc *streamConn) evict() {
	if tc, ok := sc.c.(interface{ NetConn() net.Conn }); ok {
		tc.NetConn().Close()
		return
	}
	sc.c.Close()
}

// send writes one framed answer.
func (sc *streamConn) send(frame []byte) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.broken {
		return net.ErrClosed
	}
	sc.c.SetWriteDeadline(time.Now().Add(orDefault(sc.s.WriteTimeout, DefaultWriteTimeout)))
	if _, err := sc.c.Write(frame); err != nil {
		sc.broken = true
		sc.c.Close() // also ends the reader
		return err
	}
	return nil
}

// udpOutlet sends the answer to the datagram its worker read last.
type udpOutlet struct {
	pc       net.PacketConn
	uc       *net.UDPConn // pc's fast path, or nil
	local    net.Addr
	addr     net.Addr
	addrPort netip.AddrPort
}

func (o *udpOutlet) localAddr() net.Addr { return o.local }

func (o *udpOutlet) remoteAddr() net.Addr {
	if o.addr == nil && o.uc != nil {
		o.addr = net.UDPAddrFromAddrPort(o.addrPort)
	}
	return o.addr
}

func (o *udpOutlet) remoteIP() netip.Addr {
	if o.uc != nil {
		return o.addrPort.Addr().Unmap()
	}
	ip, _, _ := clientOf(o.addr)
	return ip
}

func (o *udpOutlet) send(b []byte) error {
	var err error
	if o.uc != nil {
		_, err = o.uc.WriteToUDPAddrPort(b, o.addrPort)
	} else {
		_, err = o.pc.WriteTo(b, o.addr)
	}
	return err
}

var errTooLarge = errors.New("authority: answer does not fit even when truncated")

// getBuf returns a pack buffer; it works on a zero Server too (tests).
func (s *Server) getBuf() *[]byte {
	if s == nil {
		b := make([]byte, dnsstream.MaxMessageSize+2)
		return &b
	}
	s.init()
	return s.bufs.Get().(*[]byte)
}

func (s *Server) putBuf(b *[]byte) {
	if s != nil {
		s.bufs.Put(b)
	}
}
