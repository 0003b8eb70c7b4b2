package turbo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ztls-project/ztls/tls13"
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
	// Wait is how long to wait for the UDP flight after TCP connects;
	// 0 means WaitFraction of the TCP connect time, at least MinWait.
	Wait         time.Duration
	WaitFraction float64       // 0 means 0.5
	MinWait      time.Duration // 0 means 2 ms
	// DialTCP opens the TCP connection; nil means a net.Dialer.
	DialTCP func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// WrapUDP wraps the client's connected UDP socket (tests drop
	// datagrams with it; nil: none).
	WrapUDP func(net.Conn) net.Conn
	// Fallback runs TLS over tcp when the UDP flight did not make it;
	// nil means a tls13 client with the same Session, ZData and Early.
	Fallback func(ctx context.Context, tcp net.Conn) (*tls13.Conn, error)
	// Refused, if set, is called before Fallback when the server's flight
	// came over UDP but failed the handshake: err is the engine's error,
	// aborted says the flight opened with an alert, before any
	// ServerHello (the server aborted on the ClientHello, as servers that
	// don't know ztls may: ZTLS-SPEC §6). Fallback may then retry
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
		return 2 * MaxFragment
	}
	return defaultFlight
}

type flightResult struct {
	flight []byte
	at     time.Duration
	err    error
}

type tcpResult struct {
	c   net.Conn
	err error
	at  time.Duration
}

// Dial runs a TurboTLS handshake with the server at tcpAddr whose
// TurboTLS UDP port is udpAddr: the client flight goes over UDP while
// TCP's handshake runs; the connection continues on TCP. If the server's
// flight is not complete over UDP within the wait after TCP connects, TLS
// runs over the TCP connection alone (cfg.Fallback). The returned
// connection has finished its handshake.
func Dial(ctx context.Context, tcpAddr, udpAddr netip.AddrPort, cfg *ClientConfig) (*ClientResult, error) {
	start := time.Now()
	if cfg == nil || cfg.TLS == nil {
		return nil, errors.New("turbo: Dial needs a ClientConfig with TLS")
	}
	eng := tls13.NewClientEngine(cfg.TLS)
	if err := eng.Start(cfg.Session, cfg.ZData, cfg.Early); err != nil {
		return nil, fmt.Errorf("turbo: starting the handshake: %w", err)
	}
	clientFlight := append([]byte(nil), eng.Output()...)
	rr, err := race(ctx, start, tcpAddr, udpAddr, clientFlight, cfg.expected(udpAddr), cfg)
	if err != nil {
		return nil, err
	}
	res := &rr.ClientResult
	tcp := rr.tcp
	if rr.flight != nil {
		if ferr := eng.Feed(rr.flight); ferr != nil {
			aborted := AbortedFlight(rr.flight, ferr)
			res.FallbackReason = ReasonFlightRefused + ": " + ferr.Error()
			if aborted {
				res.FallbackReason = ReasonFlightAborted + ": " + ferr.Error()
			}
			if cfg.Refused != nil {
				cfg.Refused(ferr, aborted)
			}
		} else {
			out := AppendLink(nil, rr.id)
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
	}
	fb := cfg.Fallback
	if fb == nil {
		fb = cfg.plainTLS
	}
	c, err := fb(ctx, tcp)
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
func race(ctx context.Context, start time.Time, tcpAddr, udpAddr netip.AddrPort, clientFlight []byte, expected int, cfg *ClientConfig) (*raceResult, error) {
	res := &raceResult{}
	id, err := NewConnID()
	if err != nil {
		return nil, err
	}
	res.id = id
	dgrams, err := Fragment(TypeRequest, id, clientFlight)
	if err != nil {
		return nil, err
	}
	for n := DatagramsFor(expected); len(dgrams) < n; {
		dgrams = append(dgrams, PaddingRequest(id, len(clientFlight)))
	}

	dctx, cancelDial := context.WithCancel(ctx)
	defer cancelDial()
	tcpCh := make(chan tcpResult, 1)
	go func() {
		dial := cfg.DialTCP
		if dial == nil {
			dial = func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "tcp", a.String())
			}
		}
		c, err := dial(dctx, tcpAddr)
		tcpCh <- tcpResult{c: c, err: err, at: time.Since(start)}
	}()

	flightCh := make(chan flightResult, 1)
	var udp net.Conn
	var udpStats udpCounters
	if raw, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(udpAddr)); err != nil {
		flightCh <- flightResult{err: err}
	} else {
		udp = raw
		if cfg.WrapUDP != nil {
			udp = cfg.WrapUDP(raw)
		}
		defer udp.Close()
		var werr error
		for _, d := range dgrams {
			if _, werr = udp.Write(d); werr != nil {
				break
			}
			udpStats.add(1, len(d), 0, 0)
		}
		if werr != nil {
			flightCh <- flightResult{err: werr}
		} else {
			go receiveFlight(udp, id, len(clientFlight), len(dgrams), start, &udpStats, flightCh)
		}
	}

	var tcp net.Conn
	var fl *flightResult
	var timer <-chan time.Time
	reason := ""
wait:
	for {
		select {
		case t := <-tcpCh:
			if t.err != nil {
				return nil, fmt.Errorf("turbo: connecting to %s: %w", tcpAddr, t.err)
			}
			tcp, res.TCPConnected = t.c, t.at
			if fl != nil || reason != "" {
				break wait
			}
			w := cfg.Wait
			if w <= 0 {
				frac := cfg.WaitFraction
				if frac <= 0 {
					frac = 0.5
				}
				minW := cfg.MinWait
				if minW <= 0 {
					minW = 2 * time.Millisecond
				}
				// Whole milliseconds: Go's runtime sleeps in its
				// network poller in whole milliseconds, so a timer with
				// a fraction left fires up to 1 ms late (a 4.2 ms wait
				// took 5.3 ms on the testbed); 4 ms takes 4 ms.
				w = max(time.Duration(float64(t.at)*frac).Truncate(time.Millisecond), minW)
			}
			timer = time.After(w)
		case f := <-flightCh:
			if f.err != nil {
				reason = ReasonUDPError + ": " + f.err.Error()
				if tcp != nil {
					break wait
				}
				flightCh = nil // wait for TCP only
				continue
			}
			fl = &f
			if tcp != nil {
				break wait
			}
		case <-timer:
			reason = ReasonUDPTimeout
			break wait
		case <-ctx.Done():
			if tcp != nil {
				tcp.Close()
			} else {
				go func() {
					if t := <-tcpCh; t.c != nil {
						t.c.Close()
					}
				}()
			}
			return nil, fmt.Errorf("turbo: %w", ctx.Err())
		}
	}
	res.tcp = tcp
	res.Waited = time.Since(start) - res.TCPConnected
	res.RequestsSent, res.BytesSent, res.ResponsesReceived, res.BytesReceived = udpStats.get()
	res.FallbackReason = reason
	if fl != nil && fl.err == nil {
		res.FlightAt = fl.at
		res.ServerFlight = len(fl.flight)
		res.flight = fl.flight
		res.FallbackReason = ""
		cfg.Sizes.Put(udpAddr, len(fl.flight))
	}
	return res, nil
}

// plainTLS is the default fallback: a new client engine on the TCP
// connection, with the same resumption, Z-data and early data.
func (cfg *ClientConfig) plainTLS(ctx context.Context, tcp net.Conn) (*tls13.Conn, error) {
	c := tls13.Client(tcp, cfg.TLS)
	if cfg.Session != nil {
		c.SetSession(cfg.Session)
	}
	if cfg.ZData != nil {
		c.SetZData(cfg.ZData)
	}
	if len(cfg.Early) > 0 && (cfg.ZData != nil || cfg.Session != nil) {
		c.SetEarlyData(cfg.Early, cfg.ReplaySafe)
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

// receiveFlight reassembles the server's flight. When the first response
// shows the flight needs more datagrams than were requested, it sends the
// missing padding requests at once (the flight then completes a round
// trip later instead of never).
func receiveFlight(udp net.Conn, id ConnID, clientLen, requested int, start time.Time, st *udpCounters, out chan<- flightResult) {
	var asm Reassembler
	buf := make([]byte, 2048)
	topped := false
	for {
		n, err := udp.Read(buf)
		if err != nil {
			out <- flightResult{err: err}
			return
		}
		d, perr := ParseDatagram(buf[:n])
		if perr != nil || d.Type != TypeResponse || d.ID != id {
			continue // not ours: ignore
		}
		st.add(0, 0, 1, n)
		if err := asm.Add(d.FlightLength, d.Offset, d.Fragment); err != nil {
			out <- flightResult{err: err}
			return
		}
		if need := DatagramsFor(asm.Total()); !topped && need > requested {
			topped = true
			for i := requested; i < need; i++ {
				p := PaddingRequest(id, clientLen)
				if _, err := udp.Write(p); err == nil {
					st.add(1, len(p), 0, 0)
				}
			}
		}
		if asm.Complete() {
			out <- flightResult{flight: asm.Flight(), at: time.Since(start)}
			return
		}
	}
}
