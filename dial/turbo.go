package dial

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/dialhook"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// TurboOptions tune TurboTLS (Options.Turbo).
//
// A server that aborts on the ztls ClientHello (ZTLS-SPEC §6) gets one
// retry without ztls in TurboTLS too, and is remembered in
// Options.Memory: if its UDP flight is an alert, the retry is TLS 1.3 on
// the TCP connection TurboTLS already opened (Report.TurboFallback says
// the server answered the UDP ClientHello with an alert); if the UDP
// flight did not come in time and the server aborts the ztls ClientHello
// on that TCP connection, the retry is TLS 1.3 on a new TCP connection,
// without UDP. Either way Report.FallbackReason is ReasonServerAborted and
// the next Connect sends no ztls (ReasonRemembered), over TurboTLS.
type TurboOptions struct {
	// TurboPort is the server's TurboTLS UDP port when known without DNS
	// (an address given as an IP); 0 means the HTTPS record's key65280.
	TurboPort int
	// TurboWait is how long to wait for the UDP flight once TCP is up; 0
	// means half the TCP connect time, at least 2 ms.
	TurboWait time.Duration
	// TurboSizes remembers servers' flight sizes; nil means a
	// process-wide cache.
	TurboSizes *turbo.SizeCache
}

// Reasons TurboTLS was not tried (Report.TurboFallback); the reasons it
// was tried and fell back come from package turbo.
const (
	ReasonTurboNoAdvert = "no TurboTLS advertisement (HTTPS key65280)"
	ReasonTurboNoHTTPS  = "HTTPS record not answered within the budget after the address"
	ReasonTurboNoDNS    = "UDP port unknown: no TurboPort, and no HTTPS record to look up (no DNS resolver, or an IP address)"
)

var defaultSizes = &turbo.SizeCache{}

// turboDial is one TurboTLS attempt inside Connect.
type turboDial struct {
	o      Options
	cfg    *tls13.Config
	r      *Report
	res    *Result
	start  time.Time
	host   string
	port   int
	ips    []netip.Addr
	wantZ  bool
	isIP   bool
	reason string // the ZTLS fallback reason so far
	zdone  <-chan zresult
	likely <-chan likelyOffer // nil without ZTLS
	https  <-chan *resolver.Answer
	mem    *Memory // remembers servers that abort on ztls
	now    func() time.Time
	// wrapUDP wraps the UDP socket (internal/dialhook: the testbed's
	// loss emulation, tests).
	wrapUDP func(net.Conn) net.Conn

	// When TurboTLS is not used after all, the TCP connection whose SYN
	// left at address time is handed to Connect's plain path.
	syn       chan dialed
	synStart  time.Time
	cancelSyn context.CancelFunc
}

// dialed is the outcome of the TCP connect started at address time.
type dialed struct {
	c   net.Conn
	err error
	at  time.Time // when the connect finished
}

// plainConn returns the TCP connection started at address time (nil
// if there is none or it failed: Connect then dials as usual) and how
// long its connect took.
func (t *turboDial) plainConn() (net.Conn, time.Duration) {
	if t.syn == nil {
		return nil, 0
	}
	d := <-t.syn
	t.cancelSyn()
	if d.err != nil {
		return nil, 0
	}
	return d.c, d.at.Sub(t.synStart)
}

// connect runs the TurboTLS handshake when the server advertises it:
// used reports whether it did (then res is complete or err is set).
func (t *turboDial) connect(ctx context.Context) (bool, error) {
	r := t.r
	t.wrapUDP = dialhook.WrapUDP(ctx)
	budget := t.o.ZDataBudget
	if budget <= 0 {
		budget = 20 * time.Millisecond
	}
	step := func(name string) { r.Trace = append(r.Trace, TraceStep{Step: name, AtMS: ms(time.Since(t.start))}) }
	// TCP's SYN leaves now, at address time as without TurboTLS: the
	// HTTPS answer that says whether to use UDP may land a little later,
	// and TCP is needed either way. The UDP flight follows as soon as
	// the advertisement (and, for ZTLS, the verified Z-data) is in hand,
	// which then overlaps the SYN's round trip.
	ip := t.ips[0]
	t.synStart = time.Now()
	synCtx, cancelSyn := context.WithCancel(ctx)
	t.syn, t.cancelSyn = make(chan dialed, 1), cancelSyn
	go func() {
		var d net.Dialer
		c, err := d.DialContext(synCtx, "tcp", netip.AddrPortFrom(ip, uint16(t.port)).String())
		t.syn <- dialed{c, err, time.Now()}
	}()
	handOver := false
	defer func() {
		if handOver {
			return
		}
		// Nobody takes the connection: close it once it is made.
		cancelSyn()
		select {
		case d := <-t.syn:
			if d.c != nil {
				d.c.Close()
			}
		default:
			go func(ch chan dialed) {
				if d := <-ch; d.c != nil {
					d.c.Close()
				}
			}(t.syn)
		}
		t.syn = nil
	}()
	udpPort := t.o.TurboPort
	if udpPort == 0 {
		if t.o.Resolver == nil || t.isIP {
			r.TurboFallback = ReasonTurboNoDNS
			handOver = true
			return false, nil
		}
		timer := time.NewTimer(budget)
		select {
		case a := <-t.https:
			p, err := turbo.UDPPortFrom(a.RRs)
			if err != nil {
				r.TurboFallback = ReasonTurboNoAdvert
				if !errors.Is(err, turbo.ErrNoAdvert) {
					r.TurboFallback += ": " + err.Error()
				}
			}
			udpPort = int(p)
		case <-timer.C:
			r.TurboFallback = ReasonTurboNoHTTPS
		}
		timer.Stop()
		if udpPort == 0 {
			handOver = true
			return false, nil
		}
		step("turbo_advert")
	}
	if udpPort < 1 || udpPort > 65535 {
		return false, fmt.Errorf("dial: bad TurboTLS UDP port %d", udpPort)
	}
	udpAddr := netip.AddrPortFrom(ip, uint16(udpPort))
	var offer *tls13.ZDataOffer
	reason := t.reason
	// With ZTLS the first flight is made from the likeliest Z-data record
	// while the lookup goroutine checks the records (both are public-key
	// and cold-cache work on the critical path, here on two cores); it is
	// sent only if the checks select that very record.
	var early *turbo.Hello
	var earlyCfg *turbo.ClientConfig // early's, with the likely offer as ZData
	defer func() {
		if early != nil {
			early.Close()
		}
	}()
	if t.wantZ {
		timer := time.NewTimer(budget)
		likely := t.likely
		makeEarly := func(l likelyOffer) {
			l.offer.Prepared = l.prepared.get()
			cc := t.turboConfig(l.offer)
			if h, err := turbo.NewHello(udpAddr, cc); err == nil {
				early, earlyCfg = h, cc
			}
		}
	wait:
		for {
			// The likely offer is sent before the verdict: take it first
			// when both are in.
			select {
			case l := <-likely:
				likely = nil
				makeEarly(l)
				continue
			default:
			}
			select {
			case l := <-likely:
				likely = nil
				makeEarly(l)
			case z := <-t.zdone:
				offer = z.offer
				if z.err != nil {
					reason = string(zdata.ReasonOf(z.err)) + ": " + z.err.Error()
				}
				r.Trace = append(r.Trace, TraceStep{Step: "zdata_verified", AtMS: ms(z.at)})
				break wait
			case <-timer.C:
				reason = ReasonBudget
				break wait
			}
		}
		timer.Stop()
		if offer == nil && t.o.Mode == "ztls" {
			return true, fmt.Errorf("%w: %s", ErrZTLSImpossible, reason)
		}
	}
	hello := early
	cc := earlyCfg
	if early != nil && offer != nil && sameOffer(offer, earlyCfg.ZData) {
		early = nil // sent below
	} else {
		hello, cc = nil, t.turboConfig(offer)
	}
	if len(cc.Early) > 0 {
		r.EarlyData.Bytes = len(cc.Early)
	}
	syn := t.syn
	cc.DialTCP = func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
		select {
		case d := <-syn:
			// turbo.Dial owns the connection now; the deferred cleanup
			// finds the channel empty and leaves it alone.
			syn <- dialed{err: errTaken}
			return d.c, d.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	udpAborted := false
	cc.Refused = func(_ error, aborted bool) { udpAborted = aborted }
	cc.Fallback = func(ctx context.Context, tcp net.Conn, same *tls13.Conn) (*tls13.Conn, error) {
		if udpAborted && offer != nil {
			// The server answered the ztls ClientHello sent over UDP with
			// an alert (ZTLS-SPEC §6): the one retry without ztls runs as
			// TLS 1.3 on the TCP connection already open, which has
			// carried nothing yet.
			t.aborted()
			offer, reason = nil, ReasonServerAborted
			return handshake(ctx, tcp, t.cfg, nil, t.o, r, t.start)
		}
		// TLS (or ZTLS) over the TCP connection already open, as Connect
		// does without TurboTLS: the handshake already begun when the
		// flight just did not come, else a new one.
		var c *tls13.Conn
		var err error
		if same != nil {
			c, err = same, runHandshake(ctx, same, r, t.start)
		} else {
			c, err = handshake(ctx, tcp, t.cfg, offer, t.o, r, t.start)
		}
		if err == nil || offer == nil || !abortedOnHello(c, err) {
			return c, err
		}
		// The UDP flight did not come and the server aborted on the ztls
		// ClientHello over TCP: the one retry without ztls goes on a new
		// TCP connection, without UDP (it just failed to arrive in time).
		tcp.Close()
		t.aborted()
		offer, reason = nil, ReasonServerAborted
		raw, err := dialFirst(ctx, t.ips, t.port)
		if err != nil {
			return nil, err
		}
		c, err = handshake(ctx, raw, t.cfg, nil, t.o, r, t.start)
		if err != nil {
			raw.Close()
		}
		return c, err
	}
	if hello == nil {
		h, err := turbo.NewHello(udpAddr, cc)
		if err != nil {
			return true, fmt.Errorf("dial: %w", err)
		}
		hello = h
	} else {
		step("turbo_hello_made_early")
	}
	step("turbo_udp_sent")
	dialAt := time.Since(t.start)
	tr, err := hello.Dial(ctx, netip.AddrPortFrom(ip, uint16(t.port)))
	if err != nil {
		return true, fmt.Errorf("dial: %w", err)
	}
	r.Address = tr.Conn.RemoteAddr().String()
	r.Timing.TCPConnect = ms(tr.TCPConnected)
	r.Timing.Handshake = ms(tr.Done - tr.TCPConnected)
	r.Trace = append(r.Trace, TraceStep{Step: "tcp_connected", AtMS: ms(dialAt + tr.TCPConnected)})
	if tr.FlightAt > 0 {
		r.Trace = append(r.Trace, TraceStep{Step: "turbo_flight_complete", AtMS: ms(dialAt + tr.FlightAt)})
	}
	r.Turbo = &TurboReport{Requests: tr.RequestsSent, Responses: tr.ResponsesReceived, BytesSent: tr.BytesSent,
		BytesReceived: tr.BytesReceived, ServerFlight: tr.ServerFlight, UDPPort: udpPort, WaitedMS: ms(tr.Waited)}
	if tr.Turbo {
		r.Transport = "turbo"
		for _, ev := range tr.Conn.Trace() {
			r.Trace = append(r.Trace, TraceStep{Step: ev.Event.String(), AtMS: ms(ev.At.Sub(t.start))})
		}
	} else {
		r.TurboFallback = tr.FallbackReason
	}
	_, err = finish(ctx, tr.Conn, offer, reason, t.o, t.res, t.start, func(name string) {
		r.Trace = append(r.Trace, TraceStep{Step: name, AtMS: ms(time.Since(t.start))})
	})
	return true, err
}

// turboConfig is the TurboTLS client configuration for ZTLS with offer
// (nil: TLS 1.3, resuming Options.Session if set), early data included.
func (t *turboDial) turboConfig(offer *tls13.ZDataOffer) *turbo.ClientConfig {
	cc := &turbo.ClientConfig{TLS: t.cfg, Wait: t.o.TurboWait, Sizes: t.o.TurboSizes, WrapUDP: t.wrapUDP, ReplaySafe: t.o.ReplaySafe}
	if cc.Sizes == nil {
		cc.Sizes = defaultSizes
	}
	if offer != nil {
		cc.ZData = offer
	} else if t.o.Session != nil {
		cc.Session = t.o.Session
	}
	if t.o.sendsEarly(offer) {
		cc.Early = t.o.Request
	}
	return cc
}

// errTaken marks the address-time connection as taken by turbo.Dial.
var errTaken = errors.New("dial: connection taken by TurboTLS")

// aborted remembers that the server aborted on the ztls ClientHello and
// clears what the report said about the early data of that attempt.
func (t *turboDial) aborted() {
	t.mem.RememberAbort(t.host, t.port, t.now())
	t.r.EarlyData.Bytes = 0
	t.r.Trace = append(t.r.Trace, TraceStep{Step: "ztls_aborted_retry", AtMS: ms(time.Since(t.start))})
}
