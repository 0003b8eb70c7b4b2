package turbo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// ClientConfig configures one TurboTLS connection. Only TLS is required.
type ClientConfig struct {
	// TLS is the client configuration (ServerName or InsecureSkipVerify).
	TLS *tls13.Config
	// Session is offered for resumption; ZData opens with ZTLS.
	Session *tls13.ClientSession
	ZData   *tls13.ZDataOffer
	// Early is sent as early data with the ClientHello when ZData or
	// Session allow it. ReplaySafe resends it after the handshake when the
	// server rejects it; mark only idempotent requests.
	Early      []byte
	ReplaySafe bool
	// ExpectedFlight is the size in bytes of the server flight to make
	// room for (request-based fragmentation); 0: Sizes, else an estimate.
	ExpectedFlight int
	// Sizes remembers servers' flight sizes (may be nil).
	Sizes *SizeCache
	// Wait bounds the wait for the UDP flight after TCP connects, the
	// fallback's start on TCP included (it ends 0.5 ms early, at most
	// an eighth of it); 0 means WaitFraction of the TCP connect time, in
	// whole milliseconds, at least MinWait.
	Wait         time.Duration
	WaitFraction float64       // 0 means 0.5
	MinWait      time.Duration // 0 means 2 ms
	// DialTCP opens the TCP connection; nil means a net.Dialer.
	DialTCP func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// DialUDP opens the connected UDP socket the flights travel on (to
	// bind a source address, set socket options, or observe datagrams);
	// nil means net.DialUDP. The connection it returns must be a
	// syscall.Conn for the wait's last millisecond to be polled.
	DialUDP func(addr netip.AddrPort) (net.Conn, error)
	// Fallback finishes the handshake over tcp when the UDP flight did
	// not make it. same is the handshake already begun: its ClientHello
	// has gone out on tcp unchanged, and Fallback runs its
	// HandshakeContext. same is nil, and tcp has carried nothing, when a
	// new handshake is needed: the server refused the UDP flight
	// (Refused), or the ClientHello carries early data (see Dial). nil
	// Fallback: same's handshake, or a tls13 client with the same
	// Session, ZData and Early.
	Fallback func(ctx context.Context, tcp net.Conn, same *tls13.Conn) (*tls13.Conn, error)
	// Refused, if set, is called before Fallback when the server's flight
	// came over UDP but failed the handshake: err is the engine's error,
	// aborted says the flight opened with an alert, before any
	// ServerHello (the server aborted on the ClientHello, as servers that
	// don't know ztls may: docs/ztls-spec.md, Section 6). Fallback may then retry
	// without what the server refused.
	Refused func(err error, aborted bool)
}

// ClientResult is a connected TurboTLS client and what happened.
type ClientResult struct {
	Conn *tls13.Conn
	// Turbo is true when the server's flight came over UDP; otherwise
	// FallbackReason says why TLS ran over TCP alone.
	Turbo          bool
	FallbackReason string
	// Times from the start of Dial.
	TCPConnected time.Duration
	FlightAt     time.Duration // the server flight complete (0: never)
	Waited       time.Duration // spent after TCP connected waiting for UDP
	Done         time.Duration // handshake done (client side)
	// Datagram and byte counts of the UDP exchange.
	RequestsSent, ResponsesReceived int
	BytesSent, BytesReceived        int
	ServerFlight                    int // bytes of the server flight (0: unknown)
}

// Fallback reasons.
const (
	ReasonUDPTimeout    = "UDP flight incomplete when the wait after TCP connect ran out"
	ReasonUDPError      = "UDP unusable"
	ReasonFlightRefused = "the server's UDP flight failed the handshake"
	ReasonFlightAborted = "the server answered the ClientHello sent over UDP with an alert"
)

// defaultFlight is the server flight size assumed without better
// knowledge: an ECDSA or small RSA chain of one or two certificates.
const defaultFlight = 4096

// SizeCache remembers the flight size of servers (by address) so later
// connections ask for the right number of response datagrams. Safe for
// concurrent use; the zero value is ready. It holds at most 4096 servers.
type SizeCache struct {
	mu sync.Mutex
	m  map[netip.AddrPort]int
}

// Get returns the remembered size, or 0.
func (c *SizeCache) Get(a netip.AddrPort) int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[a]
}

// Put remembers n for a.
func (c *SizeCache) Put(a netip.AddrPort, n int) {
	if c == nil || n <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= 4096 {
		c.m = map[netip.AddrPort]int{}
	}
	c.m[a] = n
}

// expected is the flight size to make room for.
func (cfg *ClientConfig) expected(udp netip.AddrPort) int {
	if cfg.ExpectedFlight > 0 {
		return cfg.ExpectedFlight
	}
	if n := cfg.Sizes.Get(udp); n > 0 {
		return n
	}
	if cfg.ZData != nil && cfg.ZData.Leaf != nil {
		// ZTLS with cert_hash: the server may omit its Certificate; the
		// flight is the hellos, a signature, Finished and the answer.
		return 2 * wire.MaxFragment
	}
	return defaultFlight
}

type tcpResult struct {
	c   net.Conn
	err error
	at  time.Duration
}

// Dial runs a TurboTLS handshake with the server at tcpAddr whose
// TurboTLS UDP port is udpAddr: the client flight goes over UDP while
// TCP's handshake runs; the connection continues on TCP. If the server's
// flight is not complete over UDP within the wait after TCP connects, the
// handshake runs over the TCP connection (cfg.Fallback): the same
// ClientHello, unchanged, unless it carries early data. The returned
// connection has finished its handshake. Dial is NewHello, then
// Hello.Dial.
func Dial(ctx context.Context, tcpAddr, udpAddr netip.AddrPort, cfg *ClientConfig) (*ClientResult, error) {
	h, err := NewHello(udpAddr, cfg)
	if err != nil {
		return nil, err
	}
	return h.Dial(ctx, tcpAddr)
}

// Hello is a TurboTLS client's first flight made before it may be sent:
// the handshake started (its ClientHello and any early data encrypted)
// and the UDP socket to the server's TurboTLS port open. All of that is
// work on a first connection's critical path, several tenths of a
// millisecond with cold caches; a caller that must wait before sending
// (package dial checks the Z-data the early data is encrypted to) can do
// it meanwhile. Nothing is sent before Dial. A Hello serves one Dial;
// Close drops an unused one.
type Hello struct {
	cfg     *ClientConfig
	udpAddr netip.AddrPort
	eng     *tls13.Engine
	flight  []byte
	udp     net.Conn // nil: udpErr
	udpErr  error
	used    bool
}

// NewHello starts cfg's handshake (cfg.Session, cfg.ZData, cfg.Early)
// and opens the UDP socket to udpAddr, in the calling goroutine's network
// namespace. A UDP socket that cannot be opened is not an error here:
// Dial then falls back to TCP alone.
func NewHello(udpAddr netip.AddrPort, cfg *ClientConfig) (*Hello, error) {
	if cfg == nil || cfg.TLS == nil {
		return nil, errors.New("turbo: Dial needs a ClientConfig with TLS")
	}
	eng := tls13.NewClientEngine(cfg.TLS)
	eng.CheckConcurrently() // the server's chain beside its signature, as a tls13.Conn does
	if err := eng.Start(cfg.Session, cfg.ZData, cfg.Early); err != nil {
		return nil, fmt.Errorf("turbo: starting the handshake: %w", err)
	}
	return newHello(udpAddr, append([]byte(nil), eng.Output()...), eng, cfg), nil
}

// newHello opens the UDP socket for flight (eng may be nil: the proxy
// relays another client's flight).
func newHello(udpAddr netip.AddrPort, flight []byte, eng *tls13.Engine, cfg *ClientConfig) *Hello {
	h := &Hello{cfg: cfg, udpAddr: udpAddr, eng: eng, flight: flight}
	dialUDP := cfg.DialUDP
	if dialUDP == nil {
		dialUDP = dialUDPDefault
	}
	h.udp, h.udpErr = dialUDP(udpAddr)
	return h
}

func dialUDPDefault(addr netip.AddrPort) (net.Conn, error) {
	return net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
}

// WrapUDP returns a DialUDP that opens the default socket and hands it to
// wrap (e.g. to count or drop datagrams in a test).
func WrapUDP(wrap func(net.Conn) net.Conn) func(netip.AddrPort) (net.Conn, error) {
	return func(addr netip.AddrPort) (net.Conn, error) {
		c, err := dialUDPDefault(addr)
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

// Close drops a Hello that will not be sent (Dial closes its own).
func (h *Hello) Close() {
	if h.udp != nil {
		h.udp.Close()
	}
	h.used = true
}

// Dial sends the Hello over UDP and connects TCP to tcpAddr at the same
// moment, and goes on as the package's Dial describes.
func (h *Hello) Dial(ctx context.Context, tcpAddr netip.AddrPort) (*ClientResult, error) {
	start := time.Now() // real time: elapsed
	if h.used {
		return nil, errors.New("turbo: a Hello serves one Dial")
	}
	h.used = true
	cfg, eng, clientFlight := h.cfg, h.eng, h.flight
	rr, err := race(ctx, start, tcpAddr, h, cfg.expected(h.udpAddr), cfg)
	if err != nil {
		return nil, err
	}
	res := &rr.ClientResult
	tcp := rr.tcp
	var same *tls13.Conn
	switch {
	case rr.flight != nil:
		ferr := eng.Feed(rr.flight)
		if ferr == nil {
			out := wire.AppendLink(nil, rr.id)
			out = append(out, eng.Output()...)
			if _, err := tcp.Write(out); err != nil {
				tcp.Close()
				return nil, fmt.Errorf("turbo: writing on TCP: %w", err)
			}
			c := eng.Conn(tcp, cfg.ReplaySafe)
			if err := c.HandshakeContext(ctx); err != nil {
				tcp.Close()
				return nil, err
			}
			res.Conn, res.Turbo, res.Done = c, true, time.Since(start)
			return res, nil
		}
		aborted := AbortedFlight(rr.flight, ferr)
		res.FallbackReason = ReasonFlightRefused + ": " + ferr.Error()
		if aborted {
			res.FallbackReason = ReasonFlightAborted + ": " + ferr.Error()
		}
		if cfg.Refused != nil {
			cfg.Refused(ferr, aborted)
		}
	case !eng.ConnectionState().EarlyDataOffered:
		// No flight over UDP: the handshake goes on over TCP with the
		// ClientHello already made, with no new key share to compute (the
		// TurboTLS paper's fallback "without any further delay"). Not with
		// early data: the server may have accepted and answered it over
		// UDP (only the answer lost), and its anti-replay would refuse the
		// same ClientHello's early data on TCP, costing the early data's
		// round trip; a new ClientHello keeps it.
		if _, err := tcp.Write(clientFlight); err != nil {
			tcp.Close()
			return nil, fmt.Errorf("turbo: writing the ClientHello on TCP: %w", err)
		}
		same = eng.Conn(tcp, cfg.ReplaySafe)
	}
	fb := cfg.Fallback
	if fb == nil {
		fb = cfg.plainTLS
	}
	c, err := fb(ctx, tcp, same)
	if err != nil {
		tcp.Close()
		return nil, err
	}
	res.Conn, res.Done = c, time.Since(start)
	return res, nil
}

// AbortedFlight reports whether a server flight that failed the client's
// engine with err is an abort on the ClientHello: its first record is an
// alert (content type 21), so no ServerHello byte came before it, and
// the engine failed on that alert.
func AbortedFlight(flight []byte, err error) bool {
	var ae *tls13.AlertError
	return len(flight) > 0 && flight[0] == 21 && errors.As(err, &ae)
}

// raceResult is the outcome of race: the TCP connection, and the server's
// flight if it came over UDP in time (else FallbackReason is set).
type raceResult struct {
	ClientResult
	tcp    net.Conn
	id     ConnID
	flight []byte
}

// race sends clientFlight over UDP (with padding requests for an
// expected-byte server flight) and starts TCP at the same moment; it
// returns once TCP is up and the server flight is complete, or the wait
// after TCP connected ran out, or UDP failed.
//
// The flight is read on the calling goroutine, which goes on with it: on
// the testbed a hand-over from a reader goroutine cost ~0.1 ms at the
// moment the flight completes, the critical path. TCP connects on its own
// goroutine, which sets the UDP socket's read deadline to the end of the
// wait (or to now, when the connect fails); a cancelled ctx does too.
func race(ctx context.Context, start time.Time, tcpAddr netip.AddrPort, h *Hello, expected int, cfg *ClientConfig) (*raceResult, error) {
	clientFlight, udpAddr := h.flight, h.udpAddr
	udp, udpErr := h.udp, h.udpErr
	if udp != nil {
		defer udp.Close()
	}
	res := &raceResult{}
	id, err := wire.NewConnID()
	if err != nil {
		return nil, err
	}
	res.id = id
	dgrams, err := wire.Fragment(wire.TypeRequest, id, clientFlight)
	if err != nil {
		return nil, err
	}
	for n := wire.DatagramsFor(expected); len(dgrams) < n; {
		dgrams = append(dgrams, wire.PaddingRequest(id, len(clientFlight)))
	}

	dctx, cancelDial := context.WithCancel(ctx)
	defer cancelDial()
	tcpCh := make(chan tcpResult, 1)
	var waitEnd atomic.Int64 // when the wait after TCP connect ends (Unix ns; 0: not connected)
	go func() {
		dial := cfg.DialTCP
		if dial == nil {
			dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", a.String())
			}
		}
		c, err := dial(dctx, tcpAddr)
		at := time.Since(start)
		tcpCh <- tcpResult{c: c, err: err, at: at}
		if udp == nil {
			return
		}
		if err != nil {
			udp.SetReadDeadline(time.Now()) // a failed connect ends the wait at once
			return
		}
		w := cfg.wait(at)
		w -= min(fallbackStart, w/8)
		end := time.Now().Add(w) // real time: a deadline
		waitEnd.Store(end.UnixNano())
		if w > 2*time.Millisecond && canPoll(udp) {
			end = end.Add(-time.Millisecond) // readFlight polls the rest
		}
		udp.SetReadDeadline(end)
	}()

	var udpStats udpCounters
	if udp != nil {
		for _, d := range dgrams {
			if _, udpErr = udp.Write(d); udpErr != nil {
				break
			}
			udpStats.add(1, len(d), 0, 0)
		}
	}
	var flight []byte
	var flightAt time.Duration
	reason := ""
	if udpErr != nil {
		reason = ReasonUDPError + ": " + udpErr.Error()
	} else {
		stop := context.AfterFunc(ctx, func() { udp.SetReadDeadline(time.Unix(1, 0)) })
		flight, udpErr = readFlight(ctx, udp, id, len(clientFlight), len(dgrams), &udpStats, &waitEnd)
		stop()
		flightAt = time.Since(start)
		switch {
		case udpErr == nil:
		case errors.Is(udpErr, os.ErrDeadlineExceeded) && ctx.Err() == nil:
			reason = ReasonUDPTimeout // or the connect failed: below
		case ctx.Err() == nil:
			reason = ReasonUDPError + ": " + udpErr.Error()
		}
	}

	var t tcpResult
	select {
	case t = <-tcpCh:
	case <-ctx.Done():
		go func() {
			if t := <-tcpCh; t.c != nil {
				t.c.Close()
			}
		}()
		return nil, fmt.Errorf("turbo: %w", ctx.Err())
	}
	if t.err != nil {
		return nil, fmt.Errorf("turbo: connecting to %s: %w", tcpAddr, t.err)
	}
	if err := ctx.Err(); err != nil {
		t.c.Close()
		return nil, fmt.Errorf("turbo: %w", err)
	}
	res.tcp, res.TCPConnected = t.c, t.at
	res.Waited = max(time.Since(start)-res.TCPConnected, 0)
	res.RequestsSent, res.BytesSent, res.ResponsesReceived, res.BytesReceived = udpStats.get()
	res.FallbackReason = reason
	if flight != nil {
		res.FlightAt = flightAt
		res.ServerFlight = len(flight)
		res.flight = flight
		cfg.Sizes.Put(udpAddr, len(flight))
	}
	return res, nil
}

// fallbackStart is what starting the handshake on TCP may cost after a
// wait that saw no flight, beyond what TLS 1.3 alone pays to start it:
// cores and caches gone cold during the wait, on both ends and in
// between (paired with TLS 1.3 visit by visit, the testbed measured
// 0.30-0.38 ms at 8.2-180.6 ms RTT, more after longer waits). The wait
// ends that much early, at most an eighth of it, so that a path that
// blocks UDP costs no more than the configured wait on top of TLS 1.3.
const fallbackStart = 500 * time.Microsecond

// wait is how long to wait for the UDP flight after a TCP connect that
// took connect (race ends it fallbackStart early).
func (cfg *ClientConfig) wait(connect time.Duration) time.Duration {
	if cfg.Wait > 0 {
		return cfg.Wait
	}
	frac := cfg.WaitFraction
	if frac <= 0 {
		frac = 0.5
	}
	minW := cfg.MinWait
	if minW <= 0 {
		minW = 2 * time.Millisecond
	}
	// Whole milliseconds: Go's runtime sleeps in its network poller in
	// whole milliseconds, so a deadline with a fraction left fires up to
	// 1 ms late (a 4.2 ms wait took 5.3 ms on the testbed); 4 ms takes 4.
	return max(time.Duration(float64(connect)*frac).Truncate(time.Millisecond), minW)
}

// plainTLS is the default fallback: same's handshake (the ClientHello
// already sent on tcp), or, when the server refused its UDP flight, a new
// client engine on tcp with the same resumption, Z-data and early data.
func (cfg *ClientConfig) plainTLS(ctx context.Context, tcp net.Conn, same *tls13.Conn) (*tls13.Conn, error) {
	c := same
	if c == nil {
		c = tls13.Client(tcp, cfg.TLS)
		if cfg.Session != nil {
			c.SetSession(cfg.Session)
		}
		if cfg.ZData != nil {
			c.SetZData(cfg.ZData)
		}
		if len(cfg.Early) > 0 && (cfg.ZData != nil || cfg.Session != nil) {
			c.SetEarlyData(cfg.Early, cfg.ReplaySafe)
		}
	}
	if err := c.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

type udpCounters struct {
	mu                 sync.Mutex
	sent, sentB        int
	received, receiveB int
}

func (u *udpCounters) add(s, sb, r, rb int) {
	u.mu.Lock()
	u.sent += s
	u.sentB += sb
	u.received += r
	u.receiveB += rb
	u.mu.Unlock()
}

func (u *udpCounters) get() (int, int, int, int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.sent, u.sentB, u.received, u.receiveB
}

// readFlight reassembles the server's flight from udp. When the first
// response shows the flight needs more datagrams than were requested, it
// sends the missing padding requests at once (the flight then completes a
// round trip later instead of never). It returns the read error that
// stopped it (the deadline, when the wait ran out). When the deadline
// fires before waitEnd (race arms it a millisecond early), it polls
// until waitEnd.
func readFlight(ctx context.Context, udp net.Conn, id ConnID, clientLen, requested int, st *udpCounters, waitEnd *atomic.Int64) ([]byte, error) {
	var asm wire.Reassembler
	buf := make([]byte, 2048)
	topped := false
	polling := false
	for {
		var n int
		var err error
		if polling {
			n, err = pollUntil(ctx, udp, buf, time.Unix(0, waitEnd.Load()))
		} else if n, err = udp.Read(buf); err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			if end := waitEnd.Load(); end != 0 && time.Now().UnixNano() < end { // real time: a deadline
				polling = true
				n, err = pollUntil(ctx, udp, buf, time.Unix(0, end))
			}
		}
		if err != nil {
			return nil, err
		}
		d, perr := wire.ParseDatagram(buf[:n])
		if perr != nil || d.Type != wire.TypeResponse || d.ID != id {
			continue // not ours: ignore
		}
		st.add(0, 0, 1, n)
		if err := asm.Add(d.FlightLength, d.Offset, d.Fragment); err != nil {
			return nil, err
		}
		if need := wire.DatagramsFor(asm.Total()); !topped && need > requested {
			topped = true
			for i := requested; i < need; i++ {
				p := wire.PaddingRequest(id, clientLen)
				if _, err := udp.Write(p); err == nil {
					st.add(1, len(p), 0, 0)
				}
			}
		}
		if asm.Complete() {
			return asm.Flight(), nil
		}
	}
}
