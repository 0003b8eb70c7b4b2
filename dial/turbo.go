package dial

import (
	"bytes"
	"context"
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
type turboTransport struct {
	a       *attempt
	wrapUDP func(net.Conn) net.Conn // internal/dialhook
	syn     *synConn                // the TCP connect begun at address time
	udp     netip.AddrPort          // the server's TurboTLS port
	// With ZTLS the first flight is made from the likeliest Z-data record
	// while the lookup goroutine checks the records (both are public-key
	// and cold-cache work on the critical path, here on two cores); it is
	// sent only if the checks select that very record.
	early    *turbo.Hello
	earlyCfg *turbo.ClientConfig // early's, with the likely offer as ZData
}

func newTurboTransport(ctx context.Context, a *attempt) *turboTransport {
	return &turboTransport{a: a, wrapUDP: dialhook.WrapUDP(ctx)}
}

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
	tr, err := hello.Dial(ctx, tcpAddr)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	t.report(tr, dialAt, port)
	return tr.Conn, nil
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
	t.setFallback(cc)
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
// included. Rejected early data is not resent by turbo: sendRequest does
// that.
func (t *turboTransport) config(offer *tls13.ZDataOffer, tlsCfg *tls13.Config) *turbo.ClientConfig {
	o := &t.a.o
	cc := &turbo.ClientConfig{TLS: tlsCfg, Wait: o.TurboWait, Sizes: o.TurboSizes}
	if t.wrapUDP != nil {
		cc.DialUDP = turbo.WrapUDP(t.wrapUDP)
	}
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

// setFallback has turbo.Dial take the TCP connection begun at address
// time and, when the UDP flight does not make it, finish over that
// connection as TCP alone would.
func (t *turboTransport) setFallback(cc *turbo.ClientConfig) {
	a := t.a
	cc.DialTCP = func(ctx context.Context, _ netip.AddrPort) (net.Conn, error) {
		c, _, err := t.syn.take(ctx)
		return c, err
	}
	udpAborted := false
	cc.Refused = func(_ error, aborted bool) { udpAborted = aborted }
	cc.Fallback = func(ctx context.Context, tcp net.Conn, same *tls13.Conn) (*tls13.Conn, error) {
		if udpAborted && a.offer != nil {
			// The server answered the ztls ClientHello sent over UDP with
			// an alert (docs/ztls-spec.md, Section 6): the one retry without ztls runs as
			// TLS 1.3 on the TCP connection already open, which has
			// carried nothing yet.
			a.dropZTLS()
			return a.handshake(ctx, tcp)
		}
		// The handshake already begun when the flight just did not come,
		// else a new one; a ztls abort there is retried on a new TCP
		// connection, without UDP (it just failed to arrive in time).
		return a.handshakeTCP(ctx, tcp, same)
	}
}

// report puts what TurboTLS did in the report.
func (t *turboTransport) report(tr *turbo.ClientResult, dialAt time.Duration, udpPort int) {
	a, r := t.a, t.a.r
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
		a.traceConn(tr.Conn)
	} else {
		r.TurboFallback = tr.FallbackReason
	}
}

// sameOffer reports whether a and b offer the same Z-data with the same
// leaf (so a first flight made for one is the one the other would make).
func sameOffer(a, b *tls13.ZDataOffer) bool {
	return a.ID == b.ID && a.Hash == b.Hash && a.Group == b.Group && bytes.Equal(a.Share, b.Share) &&
		a.MaxEarlyData == b.MaxEarlyData && a.ALPN == b.ALPN && slices.Equal(a.NSC, b.NSC) &&
		a.Leaf != nil && b.Leaf != nil && bytes.Equal(a.Leaf.Raw, b.Leaf.Raw)
}
