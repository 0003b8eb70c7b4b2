package turbo_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/turbo/internal/wire"
)

const answer = "hello over turbo"

// world is a lab world (CA, certificate, Z-data) plus a TurboTLS server
// on loopback: TCP and UDP on the same port number.
type world struct {
	w        *lab.World
	srv      *turbo.TLSServer
	tcp, udp netip.AddrPort
	mu       sync.Mutex
	conns    []*turbo.ServerConn
}

func startWorld(t *testing.T, opt turbo.Config) *world {
	t.Helper()
	w, err := lab.Start(lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	tw := &world{w: w}
	tw.srv = turbo.NewTLSServer(w.ServerTLS, func(early []byte, st tls13.ConnectionState) []byte {
		return []byte(answer)
	}, opt)
	var stop func()
	tw.tcp, stop = serveTurbo(t, tw.srv, nil, func(sc *turbo.ServerConn) {
		tw.mu.Lock()
		tw.conns = append(tw.conns, sc)
		tw.mu.Unlock()
		serve(sc)
	})
	tw.udp = tw.tcp
	t.Cleanup(stop)
	return tw
}

// serveTurbo serves srv on loopback, TCP and UDP on one port number: the
// UDP table on the socket (wrapped by wrap, if not nil), and each TCP
// connection srv accepts handed to serve. stop closes the listener and
// srv and waits for every goroutine.
func serveTurbo(tb testing.TB, srv *turbo.TLSServer, wrap func(net.PacketConn) net.PacketConn, serve func(*turbo.ServerConn)) (addr netip.AddrPort, stop func()) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		ln.Close()
		tb.Fatal(err)
	}
	if wrap != nil {
		pc = wrap(pc)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); srv.ServeUDP(pc) }()
	go func() {
		defer wg.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sc, err := srv.Accept(raw)
				if err != nil {
					raw.Close()
					return
				}
				serve(sc)
			}()
		}
	}()
	return netip.MustParseAddrPort(ln.Addr().String()), func() { ln.Close(); srv.Close(); wg.Wait() }
}

// serve answers one request: the UDP flight already did when EarlyAnswered.
func serve(sc *turbo.ServerConn) {
	defer sc.Close()
	sc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := sc.HandshakeEarly(context.Background()); err != nil {
		return
	}
	buf := make([]byte, 4096)
	if !sc.EarlyAnswered {
		if n, _ := sc.ReadEarlyData(buf); n > 0 {
			sc.Write([]byte(answer))
			sc.Handshake()
			sc.CloseWrite()
			return
		}
		if err := sc.Handshake(); err != nil {
			return
		}
		if n, _ := sc.Read(buf); n == 0 {
			return
		}
		sc.Write([]byte(answer))
	} else if err := sc.Handshake(); err != nil {
		return
	}
	sc.CloseWrite()
}

func (tw *world) lastConn(t *testing.T) *turbo.ServerConn {
	t.Helper()
	tw.mu.Lock()
	defer tw.mu.Unlock()
	if len(tw.conns) == 0 {
		t.Fatal("server accepted no connection")
	}
	return tw.conns[len(tw.conns)-1]
}

func (tw *world) clientTLS() *tls13.Config {
	c := tw.w.ClientTLS()
	c.ServerName = tw.w.Host
	return c
}

func (tw *world) zdata(t *testing.T) *tls13.ZDataOffer {
	recs := tw.w.Service.Records(clock.Now())
	if len(recs) == 0 {
		t.Fatal("no Z-data records")
	}
	return recs[0].Offer(tw.w.Cert.Leaf)
}

// exchange sends req (unless it went early) and reads the whole answer.
func exchange(t *testing.T, res *turbo.ClientResult, req []byte) string {
	t.Helper()
	c := res.Conn
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if !c.ConnectionState().EarlyDataOffered {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
	}
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(got)
}

func dialCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestTurboTLS(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	res, err := turbo.Dial(dialCtx(t), tw.tcp, tw.udp, &turbo.ClientConfig{TLS: tw.clientTLS(), Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Turbo {
		t.Fatalf("not turbo: %s", res.FallbackReason)
	}
	if got := exchange(t, res, []byte("GET /")); got != answer {
		t.Fatalf("answer %q", got)
	}
	st := res.Conn.ConnectionState()
	if !st.HandshakeComplete || len(st.VerifiedChains) == 0 || st.ZTLS {
		t.Fatalf("state %+v", st)
	}
	if sc := tw.lastConn(t); !sc.Turbo || sc.EarlyAnswered {
		t.Fatalf("server side: turbo %v, early answered %v", sc.Turbo, sc.EarlyAnswered)
	}
	if res.ServerFlight == 0 || res.RequestsSent < wire.DatagramsFor(res.ServerFlight) || res.ResponsesReceived != wire.DatagramsFor(res.ServerFlight) {
		t.Fatalf("datagrams: %+v", res)
	}
	s := tw.srv.Stats()
	if s.Linked != 1 || s.BytesOut > 3*s.BytesIn {
		t.Fatalf("stats %+v", s)
	}
}

func TestZTLSTurboAnswerInUDPFlight(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	req := []byte("GET / HTTP/1.0\r\n\r\n")
	res, err := turbo.Dial(dialCtx(t), tw.tcp, tw.udp, &turbo.ClientConfig{
		TLS: tw.clientTLS(), ZData: tw.zdata(t), Early: req, ReplaySafe: true, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Turbo {
		t.Fatalf("not turbo: %s", res.FallbackReason)
	}
	st := res.Conn.ConnectionState()
	if !st.ZTLS || !st.EarlyDataAccepted || !st.AnswerInFirstFlight {
		t.Fatalf("ztls %v, early accepted %v, answer in first flight %v", st.ZTLS, st.EarlyDataAccepted, st.AnswerInFirstFlight)
	}
	if got := exchange(t, res, req); got != answer {
		t.Fatalf("answer %q", got)
	}
	sc := tw.lastConn(t)
	if !sc.Turbo || !sc.EarlyAnswered || !bytes.Equal(sc.Early, req) {
		t.Fatalf("server: turbo %v, answered %v, early %q", sc.Turbo, sc.EarlyAnswered, sc.Early)
	}
}

// A server that does not answer on UDP (port closed: ICMP unreachable;
// or a black hole) leads to TLS over the TCP connection already open.
func TestUDPBlockedFallsBack(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	hole, err := net.ListenPacket("udp", "127.0.0.1:0") // reads nothing, answers nothing
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hole.Close() })
	closed, _ := net.ListenPacket("udp", "127.0.0.1:0")
	closedAddr := netip.MustParseAddrPort(closed.LocalAddr().String())
	closed.Close()
	for _, tc := range []struct {
		name string
		udp  netip.AddrPort
		want string
		kind turbo.MissKind
	}{
		{"black hole", netip.MustParseAddrPort(hole.LocalAddr().String()), turbo.ReasonUDPTimeout, turbo.MissTimeout},
		{"port unreachable", closedAddr, "", turbo.MissUDPError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := turbo.Dial(dialCtx(t), tw.tcp, tc.udp, &turbo.ClientConfig{TLS: tw.clientTLS(), Wait: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if res.Turbo || res.FallbackReason == "" || (tc.want != "" && res.FallbackReason != tc.want) {
				t.Fatalf("turbo %v, reason %q", res.Turbo, res.FallbackReason)
			}
			if res.Miss.Kind != tc.kind || res.FallbackReason != res.Miss.Error() {
				t.Fatalf("miss %v (%q), want %v", res.Miss.Kind, res.Miss, tc.kind)
			}
			if tc.kind == turbo.MissUDPError && !errors.Is(res.Miss, syscall.ECONNREFUSED) {
				t.Fatalf("miss %q, want the ICMP port unreachable's ECONNREFUSED", res.Miss)
			}
			if got := exchange(t, res, []byte("GET /")); got != answer {
				t.Fatalf("answer %q", got)
			}
			if tw.lastConn(t).Turbo {
				t.Fatal("server says turbo")
			}
		})
	}
}

// A flight that comes whole and fails the client's checks (here a
// certificate for another name) is MissRefused: the handshake begun over
// UDP cannot continue, and TCP has carried nothing.
func TestDialOutcomeRefused(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	cfg := tw.clientTLS()
	cfg.ServerName = "other.example"
	h, err := turbo.NewHello(tw.udp, &turbo.ClientConfig{TLS: cfg, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.Dial(dialCtx(t), tw.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer o.TCP.Close()
	if o.Conn != nil || o.Miss == nil || o.Miss.Kind != turbo.MissRefused || o.Miss.Err == nil || o.CanContinue() {
		t.Fatalf("outcome conn %v, miss %v", o.Conn, o.Miss)
	}
	if !strings.HasPrefix(o.Miss.Error(), turbo.ReasonFlightRefused+": ") || o.ServerFlight == 0 {
		t.Fatalf("miss %q, server flight %d", o.Miss, o.ServerFlight)
	}
	// A new handshake on the TCP connection, as a caller's fallback runs.
	c := tls13.Client(o.TCP, tw.clientTLS())
	if err := c.HandshakeContext(dialCtx(t)); err != nil {
		t.Fatalf("handshake on the TCP connection: %v", err)
	}
	if tw.lastConn(t).Turbo {
		t.Fatal("server says turbo")
	}
}

// fallBack dials with cfg (ZTLS with an early request when z) and checks
// that the wait ran out, TLS ran over TCP, and the answer came.
func (tw *world) fallBack(t *testing.T, cfg *turbo.ClientConfig, z bool) *turbo.ClientResult {
	t.Helper()
	if z {
		cfg.ZData, cfg.Early, cfg.ReplaySafe = tw.zdata(t), []byte("GET /"), true
	}
	res, err := turbo.Dial(dialCtx(t), tw.tcp, tw.udp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Turbo || res.FallbackReason != turbo.ReasonUDPTimeout {
		t.Fatalf("ztls %v: turbo %v, reason %q", z, res.Turbo, res.FallbackReason)
	}
	if got := exchange(t, res, []byte("GET /")); got != answer {
		t.Fatalf("ztls %v: answer %q", z, got)
	}
	return res
}

// wrapUDP returns a ClientConfig.DialUDP that opens the default socket
// and hands it to wrap (to count, delay or drop datagrams).
func wrapUDP(wrap func(net.Conn) net.Conn) func(netip.AddrPort) (net.Conn, error) {
	return func(addr netip.AddrPort) (net.Conn, error) {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}

// dropper drops chosen datagrams of the client's UDP socket.
type dropper struct {
	net.Conn
	dropOut func(i int) bool
	dropIn  func(i int) bool
	out, in atomic.Int32
}

func (d *dropper) Write(b []byte) (int, error) {
	if i := int(d.out.Add(1)) - 1; d.dropOut != nil && d.dropOut(i) {
		return len(b), nil
	}
	return d.Conn.Write(b)
}

func (d *dropper) Read(b []byte) (int, error) {
	for {
		n, err := d.Conn.Read(b)
		if err != nil {
			return n, err
		}
		if i := int(d.in.Add(1)) - 1; d.dropIn == nil || !d.dropIn(i) {
			return n, nil
		}
	}
}

func TestLossFallsBack(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	for _, tc := range []struct {
		name    string
		out, in func(int) bool
		want    turbo.MissKind
	}{
		{"first request lost", func(i int) bool { return i == 0 }, nil, turbo.MissTimeout},
		{"first response lost", nil, func(i int) bool { return i == 0 }, turbo.MissIncomplete},
		{"last response lost", nil, func(i int) bool { return i == 1 }, turbo.MissIncomplete},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, z := range []bool{false, true} {
				cfg := &turbo.ClientConfig{TLS: tw.clientTLS(), Wait: 100 * time.Millisecond,
					DialUDP: wrapUDP(func(c net.Conn) net.Conn { return &dropper{Conn: c, dropOut: tc.out, dropIn: tc.in} })}
				res := tw.fallBack(t, cfg, z)
				if res.Miss.Kind != tc.want {
					t.Fatalf("ztls %v: miss %v, want %v", z, res.Miss.Kind, tc.want)
				}
				if z && !res.Conn.ConnectionState().ZTLS {
					t.Fatal("fallback did not keep ZTLS over TCP")
				}
			}
		})
	}
}

// Too few request datagrams: the client learns the flight length from the
// first response and asks for the rest at once.
func TestUnderestimatedFlightTopsUp(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	sizes := &turbo.SizeCache{}
	res, err := turbo.Dial(dialCtx(t), tw.tcp, tw.udp, &turbo.ClientConfig{TLS: tw.clientTLS(), ExpectedFlight: 1, Sizes: sizes, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	need := wire.DatagramsFor(res.ServerFlight)
	if !res.Turbo || need < 2 || res.RequestsSent != need {
		t.Fatalf("turbo %v (%s), flight %d bytes, %d requests", res.Turbo, res.FallbackReason, res.ServerFlight, res.RequestsSent)
	}
	exchange(t, res, []byte("x"))
	if sizes.Get(tw.udp) != res.ServerFlight {
		t.Fatal("flight size not remembered")
	}
	res, err = turbo.Dial(dialCtx(t), tw.tcp, tw.udp, &turbo.ClientConfig{TLS: tw.clientTLS(), Sizes: sizes, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Turbo || res.RequestsSent != need {
		t.Fatalf("second visit: %d requests", res.RequestsSent)
	}
	exchange(t, res, []byte("x"))
}

// A link record naming no entry is stripped and the rest is plain TLS.
func TestUnknownLinkIsPlainTLS(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	raw, err := net.Dial("tcp", tw.tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := wire.NewConnID()
	if _, err := raw.Write(wire.AppendLink(nil, id)); err != nil {
		t.Fatal(err)
	}
	c := tls13.Client(raw, tw.clientTLS())
	res := &turbo.ClientResult{Conn: c}
	if got := exchange(t, res, []byte("hi")); got != answer {
		t.Fatalf("answer %q", got)
	}
	if tw.lastConn(t).Turbo {
		t.Fatal("linked an unknown id")
	}
}

// A malformed start of a TCP connection is an error, not a hang.
func TestBadLinkRecord(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	raw, err := net.Dial("tcp", tw.tcp.String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.Write([]byte{wire.LinkContentType, 3, 3, 0, 99, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13})
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := raw.Read(make([]byte, 10)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("server kept a malformed link open: %v", err)
	}
}

// recorder keeps what is written through a connection; with drop set it
// sends nothing (a black hole for UDP).
type recorder struct {
	net.Conn
	drop bool
	mu   sync.Mutex
	w    [][]byte
}

func (r *recorder) Write(b []byte) (int, error) {
	r.mu.Lock()
	r.w = append(r.w, append([]byte(nil), b...))
	r.mu.Unlock()
	if r.drop {
		return len(b), nil
	}
	return r.Conn.Write(b)
}

func (r *recorder) writes() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.w
}

// When the wait runs out with no flight, the handshake goes on over TCP
// with the ClientHello already sent over UDP, byte for byte, with no link
// record (no new key share to compute); a ClientHello with early data is
// made anew, since the server may have answered it over UDP already.
func TestTimeoutSendsTheSameClientHelloOverTCP(t *testing.T) {
	tw := startWorld(t, turbo.Config{})
	for _, z := range []bool{false, true} {
		udp, tcp := &recorder{drop: true}, &recorder{}
		cfg := &turbo.ClientConfig{TLS: tw.clientTLS(), Wait: 20 * time.Millisecond,
			DialUDP: wrapUDP(func(c net.Conn) net.Conn { udp.Conn = c; return udp }),
			DialTCP: func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
				var d net.Dialer
				c, err := d.DialContext(ctx, "tcp", a.String())
				tcp.Conn = c
				return tcp, err
			}}
		res := tw.fallBack(t, cfg, z)
		var asm wire.Reassembler
		for _, b := range udp.writes() {
			d, err := wire.ParseDatagram(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Fragment) > 0 {
				if err := asm.Add(d.FlightLength, d.Offset, d.Fragment); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !asm.Complete() {
			t.Fatal("the client's UDP flight is incomplete")
		}
		overUDP := asm.Flight()
		tw := tcp.writes()
		if len(tw) == 0 {
			t.Fatal("nothing written on TCP")
		}
		if same := bytes.Equal(tw[0], overUDP); same == z {
			t.Fatalf("ztls %v: same ClientHello on TCP %v", z, same)
		}
		if z && !res.Conn.ConnectionState().ZTLS {
			t.Fatal("the new ClientHello lost ZTLS")
		}
	}
}
