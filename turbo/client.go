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
	// an eighth of it); 0 means half the TCP connect time, in whole
	// milliseconds, at least MinWait.
	Wait    time.Duration
	MinWait time.Duration // 0 means 2 ms
	// DialTCP opens the TCP connection (package dial hands over the
	// connect it began when the address came); nil means a net.Dialer.
	DialTCP func(ctx context.Context, addr netip.AddrPort) (net.Conn, error)
	// TakeTCP, when set, replaces DialTCP: it hands over a TCP connect
	// begun before Hello.Dial (package dial begins it when the address
	// comes) and returns how long that connect took from its own start.
	// The default wait is half of that, not of the time since Hello.Dial
	// began, which is shorter by whatever came before it (a Z-data
	// lookup: the wait would end before the flight could come).
	TakeTCP func(ctx context.Context, addr netip.AddrPort) (net.Conn, time.Duration, error)
	// DialUDP opens the connected UDP socket the flights travel on (to
	// bind a source address, set socket options, or observe datagrams);
	// nil means net.DialUDP. The connection it returns must be a
	// syscall.Conn for the wait's last millisecond to be polled.
	DialUDP func(addr netip.AddrPort) (net.Conn, error)
}

// ClientResult is a connected TurboTLS client (Dial) and what happened.
type ClientResult struct {
	Conn *tls13.Conn
	// Turbo is true when the server's flight came over UDP; otherwise
	// Miss says why TLS ran over TCP alone, and FallbackReason is its
	// text.
	Turbo          bool
	Miss           *Miss
	FallbackReason string
	Done           time.Duration // handshake done (client side), from the start of Hello.Dial
	Exchange
}

// Exchange is what the race of the UDP flights with TCP's handshake did.
type Exchange struct {
	// Times from the start of Hello.Dial.
	TCPConnected time.Duration
	FlightAt     time.Duration // the server flight complete (0: never)
	Waited       time.Duration // spent after TCP connected waiting for UDP
	// Connect is how long the TCP connect took from its own start (with
	// TakeTCP, begun before Hello.Dial); WaitArmed is the wait for the
	// UDP flight armed once it connected (0: not armed), and WaitFrom
	// when it began: TCP connected, or Connect when a connect begun
	// before Hello.Dial was done sooner (the flight needs that long).
	Connect, WaitArmed, WaitFrom time.Duration
	// Datagram and byte counts of the UDP exchange.
	RequestsSent, ResponsesReceived int
	BytesSent, BytesReceived        int
	ServerFlight                    int // bytes of the server flight (0: unknown)
}

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

// Dial runs a TurboTLS handshake with the server at tcpAddr whose
// TurboTLS UDP port is udpAddr: the client flight goes over UDP while
// TCP's handshake runs; the connection continues on TCP. If the server's
// flight does not finish the handshake over UDP (within the wait after
// TCP connects), the handshake runs over the TCP connection: the same
// ClientHello, unchanged, when the outcome can continue (see
// Outcome.ContinueOnTCP), else a new one with the same Session, ZData
// and Early. The returned connection has finished its handshake. Dial is
// NewHello, then Hello.Dial, then that fallback.
func Dial(ctx context.Context, tcpAddr, udpAddr netip.AddrPort, cfg *ClientConfig) (*ClientResult, error) {
	h, err := NewHello(udpAddr, cfg)
	if err != nil {
		return nil, err
	}
	o, err := h.Dial(ctx, tcpAddr)
	if err != nil {
		return nil, err
	}
	res := &ClientResult{Conn: o.Conn, Turbo: o.Conn != nil, Miss: o.Miss, Exchange: o.Exchange}
	if o.Miss != nil {
		res.FallbackReason = o.Miss.Error()
		if res.Conn, err = o.fallback(ctx); err != nil {
			o.TCP.Close()
			return nil, err
		}
	}
	res.Done = time.Since(o.start)
	return res, nil
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
// Dial's outcome is then a Miss (MissUDPError).
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

// Close drops a Hello that will not be sent (Dial closes its own).
func (h *Hello) Close() {
	if h.udp != nil {
		h.udp.Close()
	}
	h.used = true
}

// Outcome is how a Hello's Dial went: the server's flight came over UDP
// and the handshake finished on TCP (Conn), or it did not (Miss) and the
// handshake is the caller's to run on the TCP connection, which has
// carried nothing yet. The caller decides that fallback: the handshake
// already begun (ContinueOnTCP), or a new one with what it chooses to
// offer after what the server refused.
type Outcome struct {
	// Conn is the connection whose handshake finished on TCP after the
	// server's flight came over UDP; nil with Miss.
	Conn *tls13.Conn
	// Miss says why the flight did not finish the handshake over UDP;
	// nil with Conn.
	Miss *Miss
	// TCP is the TCP connection, under Conn when Conn is set. With Miss
	// it has carried nothing, and the caller closes it when done.
	TCP net.Conn
	Exchange

	hello *Hello
	start time.Time // of Hello.Dial
}

// Dial sends the Hello over UDP and connects TCP to tcpAddr at the same
// moment. Once TCP is up it waits for the server's flight over UDP, at
// most the wait after TCP connected (ClientConfig.Wait); if the flight
// came, the handshake goes on with it over TCP, and the outcome is the
// connection. Otherwise the outcome says why not, and the caller
// finishes the handshake over its TCP connection. An error is returned
// when TCP cannot be connected, or ctx ends, or the handshake that went
// on from the UDP flight fails.
func (h *Hello) Dial(ctx context.Context, tcpAddr netip.AddrPort) (*Outcome, error) {
	start := time.Now() // real time: elapsed
	if h.used {
		return nil, errors.New("turbo: a Hello serves one Dial")
	}
	h.used = true
	rr, err := runRace(ctx, start, tcpAddr, h)
	if err != nil {
		return nil, err
	}
	o := &Outcome{Miss: rr.miss, TCP: rr.tcp, Exchange: rr.Exchange, hello: h, start: start}
	if rr.flight != nil {
		if err := o.finishOverUDP(ctx, rr.id, rr.flight); err != nil {
			rr.tcp.Close()
			return nil, err
		}
	}
	return o, nil
}

// finishOverUDP feeds the server's flight that came over UDP to the
// engine and, when the flight passes, finishes the handshake on TCP: the
// link record and the client's second flight go out, and the connection
// goes on there. A flight that fails the engine is a Miss: MissRefused,
// or MissAborted when it is an alert.
func (o *Outcome) finishOverUDP(ctx context.Context, id ConnID, flight []byte) error {
	eng := o.hello.eng
	if err := eng.Feed(flight); err != nil {
		o.Miss = &Miss{Kind: MissRefused, Err: err}
		if abortedFlight(flight, err) {
			o.Miss.Kind = MissAborted
		}
		return nil
	}
	out := wire.AppendLink(nil, id)
	out = append(out, eng.Output()...)
	if _, err := o.TCP.Write(out); err != nil {
		return fmt.Errorf("turbo: writing on TCP: %w", err)
	}
	c := eng.Conn(o.TCP, o.hello.cfg.ReplaySafe)
	if err := c.HandshakeContext(ctx); err != nil {
		return err
	}
	o.Conn = c
	return nil
}

// CanContinue reports whether the handshake begun over UDP can go on over
// TCP (ContinueOnTCP) after a Miss. It cannot when the server's flight
// came and failed (MissRefused, MissAborted), nor when the ClientHello
// carries early data: the server may have accepted and answered it over
// UDP (only the answer lost), and its anti-replay would refuse the same
// ClientHello's early data on TCP, costing the early data's round trip; a
// new ClientHello keeps it.
func (o *Outcome) CanContinue() bool {
	return o.Conn == nil && o.Miss != nil && o.Miss.Kind != MissRefused && o.Miss.Kind != MissAborted &&
		o.hello.eng != nil && !o.hello.eng.ConnectionState().EarlyDataOffered
}

// ContinueOnTCP sends the ClientHello that went over UDP on the TCP
// connection, unchanged, and returns the handshake begun with it, for the
// caller to finish (HandshakeContext). It is the fallback with no new key
// share to compute: the TurboTLS paper's "without any further delay". It
// fails unless CanContinue.
func (o *Outcome) ContinueOnTCP() (*tls13.Conn, error) {
	if !o.CanContinue() {
		return nil, errors.New("turbo: the handshake begun over UDP cannot continue on TCP")
	}
	if _, err := o.TCP.Write(o.hello.flight); err != nil {
		return nil, fmt.Errorf("turbo: writing the ClientHello on TCP: %w", err)
	}
	c := o.hello.eng.Conn(o.TCP, o.hello.cfg.ReplaySafe)
	o.hello.eng = nil // the Conn's now: it continues once
	return c, nil
}

// fallback is Dial's handshake after a Miss: the one begun over UDP when
// it can continue, else a new client on TCP with the same resumption,
// Z-data and early data.
func (o *Outcome) fallback(ctx context.Context) (*tls13.Conn, error) {
	var c *tls13.Conn
	if o.CanContinue() {
		var err error
		if c, err = o.ContinueOnTCP(); err != nil {
			return nil, err
		}
	} else {
		cfg := o.hello.cfg
		c = tls13.Client(o.TCP, cfg.TLS)
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

// abortedFlight reports whether a server flight that failed the client's
// engine with err is an abort on the ClientHello: its first record is an
// alert (content type 21), so no ServerHello byte came before it, and
// the engine failed on that alert.
func abortedFlight(flight []byte, err error) bool {
	var ae *tls13.AlertError
	return len(flight) > 0 && flight[0] == 21 && errors.As(err, &ae)
}
