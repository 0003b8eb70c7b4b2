package dial

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/ztls-project/ztls/internal/dialhook"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// TurboOptions tune TurboTLS (Options.Turbo).
//
// A server that aborts on the ztls ClientHello (docs/ztls-spec.md, Section 6) gets one
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

var defaultSizes = &turbo.SizeCache{}

// turboTransport is TurboTLS (package turbo): the first flights over UDP
// while TCP connects. TCP's SYN leaves at address time as without
// TurboTLS: the HTTPS answer that says whether to use UDP may land a
// little later, and TCP is needed either way. The UDP flight follows as
// soon as the advertisement (and, for ZTLS, the verified Z-data) is in
// hand, which then overlaps the SYN's round trip.
//
// Control goes one way: connect hands turbo the Hello and the connect
// begun at address time (Hello.Dial), turbo returns its outcome (the
// connection, or a turbo.Miss and the TCP connection), and on a Miss
// dial decides the handshake over TCP (turboFallback, in fallback.go,
// beside the TCP transport's rules), then tls13 runs it.
type turboTransport struct {
	a       *attempt
	dialUDP func(netip.AddrPort) (net.Conn, error) // internal/dialhook (nil: turbo's)
	syn     *synConn                               // the TCP connect begun at address time
	udp     netip.AddrPort                         // the server's TurboTLS port
	// With ZTLS the first flight is made from the likeliest Z-data record
	// while the lookup goroutine checks the records (both are public-key
	// and cold-cache work on the critical path, here on two cores); it is
	// sent only if the checks select that very record.
	early    *turbo.Hello
	earlyCfg *turbo.ClientConfig // early's, with the likely offer as ZData
}

func newTurboTransport(ctx context.Context, a *attempt) *turboTransport {
	return &turboTransport{a: a, dialUDP: dialhook.DialUDP(ctx)}
}

// connect sends the first flight over UDP as TCP connects (turbo's
// Hello.Dial), and takes turbo's outcome: the connection when the
// server's flight came over UDP, else the handshake over TCP that
// turboFallback (fallback.go) decides.
func (t *turboTransport) connect(ctx context.Context) (*tls13.Conn, error) {
	a := t.a
	tcpAddr := netip.AddrPortFrom(a.ips[0], uint16(a.port))
	t.syn = startSYN(ctx, tcpAddr)
	defer t.syn.release()
	port, err := a.turboPort()
	if err != nil {
		return nil, err
	}
	if port == 0 {
		// TurboTLS is not used after all: TCP alone, on the connection
		// already begun.
		return (&tcpTransport{a: a, syn: t.syn}).connect(ctx)
	}
	t.udp = netip.AddrPortFrom(a.ips[0], uint16(port))
	// With ECH the UDP flight is the ClientHelloOuter (spec Section 10.4):
	// the config list is settled before any flight is made.
	if err := a.settleECH(ctx); err != nil {
		return nil, err
	}
	defer func() {
		if t.early != nil {
			t.early.Close()
		}
	}()
	if err := a.awaitZData(ctx, t.makeEarly); err != nil {
		return nil, err
	}
	if err := a.settleALPN(); err != nil {
		return nil, err
	}
	hello, err := t.hello()
	if err != nil {
		return nil, err
	}
	a.step("turbo_udp_sent")
	dialAt := time.Since(a.start)
	o, err := hello.Dial(ctx, tcpAddr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	c := o.Conn
	if c == nil {
		if c, err = t.fallback(ctx, o); err != nil {
			return nil, err
		}
	}
	t.report(o, c, dialAt, port)
	return c, nil
}

// fallback is the handshake over TCP after a Miss. When the UDP flight
// rejected ECH (authenticated as the public name, with retry configs),
// the one retry goes on the TCP connection TurboTLS opened, which has
// carried nothing: nothing was delivered over UDP, so the request goes
// once, on the retry (spec Section 10.4). Otherwise turboFallback
// decides (fallback.go).
func (t *turboTransport) fallback(ctx context.Context, o *turbo.Outcome) (*tls13.Conn, error) {
	a := t.a
	var rej *tls13.ECHRejectedError
	if !errors.As(o.Miss.Err, &rej) {
		return a.turboFallback(ctx, o)
	}
	a.step("turbo_ech_rejected")
	if !a.retryECH(o.Miss.Err) {
		o.TCP.Close()
		a.r.ECH = string(tls13.ECHRejected)
		return nil, a.echError(o.Miss.Err)
	}
	return a.handshakeTCP(ctx, o.TCP, nil)
}

// turboPort is the server's TurboTLS UDP port: Options.TurboPort, else
// the HTTPS record's advertisement (key65280) when it lands within the
// budget after the address. 0, with the reason in Report.TurboFallback,
// means TurboTLS is not tried: TCP goes on alone.
func (a *attempt) turboPort() (int, error) {
	port := a.o.TurboPort
	if port == 0 {
		if a.o.Resolver == nil || a.ip.IsValid() {
			a.r.TurboFallback = ReasonTurboNoDNS
			return 0, nil
		}
		timer := time.NewTimer(a.budget())
		select {
		case ans := <-a.look.https:
			a.https = ans
			p, err := turbo.UDPPortFrom(ans.RRs)
			if err != nil {
				a.r.TurboFallback = ReasonTurboNoAdvert
				if !errors.Is(err, turbo.ErrNoAdvert) {
					a.r.TurboFallback += ": " + err.Error()
				}
			}
			port = int(p)
		case <-timer.C:
			a.r.TurboFallback = ReasonTurboNoHTTPS
		}
		timer.Stop()
		if port == 0 {
			return 0, nil
		}
		a.step("turbo_advert")
	}
	if port < 1 || port > 65535 {
		return 0, fmt.Errorf("dial: bad TurboTLS UDP port %d", port)
	}
	return port, nil
}

// makeEarly makes the first flight from the likeliest record's offer.
func (t *turboTransport) makeEarly(l likelyOffer) {
	protos, keep, _ := t.a.alpnFor(l.offer)
	if !keep {
		return // the verified offer will not be made either
	}
	l.offer.Prepared = l.prepared.get()
	cc := t.config(l.offer, t.a.configWith(protos))
	if h, err := turbo.NewHello(t.udp, cc); err == nil {
		t.early, t.earlyCfg = h, cc
	}
}

// hello is the first flight to send: the one made early when the
// verified offer is the likely one it was made from, else a new one.
func (t *turboTransport) hello() (*turbo.Hello, error) {
	a := t.a
	h, cc := t.early, t.earlyCfg
	if h != nil && a.offer != nil && sameOffer(a.offer, cc.ZData) {
		t.early = nil // sent
	} else {
		h, cc = nil, t.config(a.offer, a.cfg)
	}
	if len(cc.Early) > 0 {
		a.r.EarlyData.Bytes = len(cc.Early)
	}
	if h != nil {
		a.step("turbo_hello_made_early")
		return h, nil
	}
	h, err := turbo.NewHello(t.udp, cc)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	return h, nil
}

// config is the TurboTLS client configuration for ZTLS with offer (nil:
// TLS 1.3, resuming Options.Session if set) over tlsCfg, early data
// included, on the TCP connection begun at address time. Rejected early
// data is not resent by turbo: sendRequest does that.
func (t *turboTransport) config(offer *tls13.ZDataOffer, tlsCfg *tls13.Config) *turbo.ClientConfig {
	o := &t.a.o
	cc := &turbo.ClientConfig{TLS: t.a.withECH(tlsCfg), Wait: o.TurboWait, Sizes: o.TurboSizes, DialUDP: t.dialUDP, TakeTCP: t.takeSYN}
	if cc.Sizes == nil {
		cc.Sizes = defaultSizes
	}
	if offer != nil {
		cc.ZData = offer
	} else if o.Session != nil {
		cc.Session = o.Session
	}
	if o.sendsEarly(offer) {
		cc.Early = o.Request
	}
	return cc
}

// takeSYN is turbo's TakeTCP: the connect begun at address time, and
// how long it took from there (turbo's wait after TCP connects is half
// of it; from Hello.Dial's start, after the Z-data, it would be less).
func (t *turboTransport) takeSYN(ctx context.Context, _ netip.AddrPort) (net.Conn, time.Duration, error) {
	return t.syn.take(ctx)
}

// report puts what TurboTLS did in the report: o, turbo's outcome for
// the Hello sent at dialAt, and c, the connection whose handshake is done.
func (t *turboTransport) report(o *turbo.Outcome, c *tls13.Conn, dialAt time.Duration, udpPort int) {
	a, r, tr := t.a, t.a.r, o.Exchange
	done := time.Since(a.start) - dialAt
	r.Address = c.RemoteAddr().String()
	r.Timing.TCPConnect = ms(tr.TCPConnected)
	r.Timing.Handshake = ms(done - tr.TCPConnected)
	r.Trace = append(r.Trace, TraceStep{Step: "tcp_connected", AtMS: ms(dialAt + tr.TCPConnected)})
	if tr.FlightAt > 0 {
		r.Trace = append(r.Trace, TraceStep{Step: "turbo_flight_complete", AtMS: ms(dialAt + tr.FlightAt)})
	}
	r.Turbo = &TurboReport{Requests: tr.RequestsSent, Responses: tr.ResponsesReceived, BytesSent: tr.BytesSent,
		BytesReceived: tr.BytesReceived, ServerFlight: tr.ServerFlight, UDPPort: udpPort, WaitedMS: ms(tr.Waited)}
	if o.Miss == nil {
		r.Transport = "turbo"
		a.reportECH(c.ConnectionState())
		a.traceConn(c)
	} else {
		r.TurboFallback = o.Miss.Error()
	}
}

// sameOffer reports whether a and b offer the same Z-data with the same
// leaf (so a first flight made for one is the one the other would make).
func sameOffer(a, b *tls13.ZDataOffer) bool {
	return a.ID == b.ID && a.Hash == b.Hash && a.Group == b.Group && bytes.Equal(a.Share, b.Share) &&
		a.MaxEarlyData == b.MaxEarlyData && a.ALPN == b.ALPN && slices.Equal(a.NSC, b.NSC) &&
		a.Leaf != nil && b.Leaf != nil && bytes.Equal(a.Leaf.Raw, b.Leaf.Raw)
}
