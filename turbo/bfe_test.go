package turbo_test

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/turbo/internal/wire"
	"github.com/ztls-project/ztls/zdata"
)

// noStrike is a strike register turned off: every ClientHello is fresh to
// it, so only the BFE key's punctures can refuse a replay.
type noStrike struct{}

func (noStrike) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return true, nil
}

// bfeWorld is a TurboTLS server whose Z-data keys carry BFE keys
// (docs/ztls-spec.md, Section 7), with its strike register off. early
// counts the early data that reached the application: answered in the UDP
// flight, or read on a TCP connection.
type bfeWorld struct {
	*world
	early   atomic.Int32
	handled atomic.Int32 // TCP connections whose handler returned
	key     *zdata.Key   // the live key with its BFE twin
}

func startBFEWorld(t *testing.T) *bfeWorld {
	t.Helper()
	w, err := lab.Start(lab.Options{ZDataOptions: zdata.Options{BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 64}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	now := clock.Now()
	svc := w.Service
	svc.BFEDir, svc.BFEServe = t.TempDir(), true
	t.Cleanup(svc.CloseBFE)
	if _, err := svc.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AttachBFE(); err != nil {
		t.Fatal(err)
	}
	cfg := w.ServerTLS.Clone()
	cfg.StrikeRegister = noStrike{}

	bw := &bfeWorld{world: &world{w: w}}
	for _, k := range svc.Keyring.Live(now) {
		if k.BFE != nil && k.BFE.State() != nil && !now.Before(k.Record.NotBefore) {
			bw.key = k
		}
	}
	if bw.key == nil {
		t.Fatal("no live key with an open BFE key")
	}
	bw.srv = turbo.NewTLSServer(cfg, func(early []byte, st tls13.ConnectionState) []byte {
		bw.early.Add(1)
		return []byte(answer)
	}, turbo.Config{})
	var stop func()
	bw.tcp, stop = serveTurbo(t, bw.srv, nil, func(sc *turbo.ServerConn) {
		defer bw.handled.Add(1)
		defer sc.Close()
		bw.mu.Lock()
		bw.conns = append(bw.conns, sc)
		bw.mu.Unlock()
		sc.SetDeadline(time.Now().Add(10 * time.Second))
		if err := sc.HandshakeEarly(context.Background()); err != nil || sc.EarlyAnswered {
			sc.Handshake()
			return
		}
		buf := make([]byte, 4096)
		if n, _ := sc.ReadEarlyData(buf); n > 0 {
			bw.early.Add(1)
			sc.Write([]byte(answer))
		}
		sc.Handshake()
	})
	bw.udp = bw.tcp
	t.Cleanup(stop)
	return bw
}

// offer is the v2 record's offer with a fresh encapsulation, made before
// the dial as a client that fetched the Z-data ahead does.
func (bw *bfeWorld) offer() *tls13.ZDataOffer {
	rec := bw.key.BFE.Record
	o := rec.Offer(bw.w.Cert.Leaf)
	o.Prepared = rec.Prepare(nil)
	return o
}

// TestBFETurboReplayRefused: a BFE-ZTLS first flight over UDP has its
// early data answered in the server's UDP flight, once. The same datagrams
// sent again, and the same ClientHello sent over TCP, reach the server and
// have their early data refused because the BFE key is punctured (the
// strike register is off): the application sees the early data once.
func TestBFETurboReplayRefused(t *testing.T) {
	bw := startBFEWorld(t)
	udp := &recorder{}
	req := []byte("GET / HTTP/1.0\r\n\r\n")
	res, err := turbo.Dial(dialCtx(t), bw.tcp, bw.udp, &turbo.ClientConfig{
		TLS: bw.clientTLS(), ZData: bw.offer(), Early: req, ReplaySafe: true, Wait: 5 * time.Second,
		DialUDP: wrapUDP(func(c net.Conn) net.Conn { udp.Conn = c; return udp })})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Turbo {
		t.Fatalf("not turbo: %s", res.FallbackReason)
	}
	st := res.Conn.ConnectionState()
	if !st.ZTLS || !st.ZTLSBFE || !st.EarlyDataAccepted || !st.AnswerInFirstFlight {
		t.Fatalf("ztls %v, bfe %v, early accepted %v, answer in first flight %v", st.ZTLS, st.ZTLSBFE, st.EarlyDataAccepted, st.AnswerInFirstFlight)
	}
	if got := exchange(t, res, req); got != answer {
		t.Fatalf("answer %q", got)
	}
	if n := bw.early.Load(); n != 1 {
		t.Fatalf("early data reached the application %d times, want 1", n)
	}
	punctured := bw.key.BFE.State().Punctured()
	if punctured == 0 {
		t.Fatal("the accepted flight punctured no slot")
	}

	// The UDP first flight again, byte for byte, from another socket.
	flight := udp.writes()
	var asm wire.Reassembler
	for _, b := range flight {
		if d, err := wire.ParseDatagram(b); err == nil && len(d.Fragment) > 0 {
			asm.Add(d.FlightLength, d.Offset, d.Fragment)
		}
	}
	if !asm.Complete() {
		t.Fatal("the client's UDP flight is incomplete")
	}
	replayUDP(t, bw, flight)
	if n := bw.early.Load(); n != 1 {
		t.Fatalf("after the UDP replay early data reached the application %d times, want 1", n)
	}

	// The same ClientHello over TCP, as a plain TLS 1.3 connection.
	bw.waitHandled(t, 1) // the first connection's
	nc, err := net.DialTimeout("tcp", bw.tcp.String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write(asm.Flight()); err != nil {
		t.Fatal(err)
	}
	if _, err := nc.Read(make([]byte, 1)); err != nil { // the server's flight: it took the ClientHello
		t.Fatalf("TCP replay: no server flight: %v", err)
	}
	nc.Close()
	bw.waitHandled(t, 2)
	sc := bw.lastConn(t)
	if rs := sc.ConnectionState(); rs.EarlyDataAccepted || !strings.Contains(rs.ZTLSRejectReason, "punctured") {
		t.Fatalf("TCP replay: early accepted %v, reject reason %q", rs.EarlyDataAccepted, rs.ZTLSRejectReason)
	}
	if n := bw.early.Load(); n != 1 {
		t.Fatalf("after the replays early data reached the application %d times, want 1", n)
	}

	// A new encapsulation is a new first flight: accepted.
	res, err = turbo.Dial(dialCtx(t), bw.tcp, bw.udp, &turbo.ClientConfig{
		TLS: bw.clientTLS(), ZData: bw.offer(), Early: req, ReplaySafe: true, Wait: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if st := res.Conn.ConnectionState(); !st.ZTLSBFE || !st.EarlyDataAccepted {
		t.Fatalf("fresh flight: bfe %v, early accepted %v", st.ZTLSBFE, st.EarlyDataAccepted)
	}
	exchange(t, res, req)
	if n := bw.early.Load(); n != 2 {
		t.Fatalf("early data reached the application %d times, want 2", n)
	}
}

// replayUDP sends the datagrams of a recorded client flight from a new
// socket and waits for the server's flight in reply, which shows that the
// server ran the handshake on them.
func replayUDP(t *testing.T, bw *bfeWorld, flight [][]byte) {
	t.Helper()
	c, err := net.Dial("udp", bw.udp.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, b := range flight {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("UDP replay: no server flight: %v", err)
	}
	if d, err := wire.ParseDatagram(buf[:n]); err != nil || len(d.Fragment) == 0 {
		t.Fatalf("UDP replay: the server answered %d bytes that are not a flight datagram: %v", n, err)
	}
}

// waitHandled waits until the handlers of n TCP connections have
// returned, so that what they did is final.
func (bw *bfeWorld) waitHandled(t *testing.T, n int32) {
	t.Helper()
	for deadline := clock.Now().Add(10 * time.Second); bw.handled.Load() < n; time.Sleep(5 * time.Millisecond) {
		if clock.Now().After(deadline) {
			t.Fatalf("%d of %d server connections handled", bw.handled.Load(), n)
		}
	}
}
