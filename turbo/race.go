package turbo

// The race of the first flights over UDP with TCP's handshake, in steps:
// newRace (the request datagrams), connectTCP (its own goroutine, which
// ends the UDP wait), sendRequests, receiveFlight, awaitTCP, result.

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

	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// A race is one client flight's exchange over UDP while TCP connects.
type race struct {
	start   time.Time // the race's start: its durations count from it
	cfg     *ClientConfig
	udpAddr netip.AddrPort
	udp     net.Conn // nil: udpErr
	udpErr  error
	id      ConnID
	// clientLen is the client flight's length; dgrams are its request
	// datagrams, the flight's fragments and the padding requests that make
	// room for the server's flight.
	clientLen int
	dgrams    [][]byte
	waitEnd   atomic.Int64 // when the wait after TCP connect ends (Unix ns; 0: not connected)
	waitArmed atomic.Int64 // the wait armed after TCP connect (ns; 0: not armed)
	waitFrom  atomic.Int64 // when it began, from start (ns)
	stats     udpCounters
}

// raceResult is the outcome of runRace: the TCP connection, and the
// server's flight if it came over UDP in time, else why not.
type raceResult struct {
	Exchange
	tcp    net.Conn
	id     ConnID
	flight []byte
	miss   *Miss // nil: flight
}

type tcpResult struct {
	c       net.Conn
	err     error
	at      time.Duration // connected, from the race's start
	connect time.Duration // the connect's own duration, from its start
}

// runRace sends h's flight over UDP (with padding requests for the
// server flight expected) and starts TCP at the same moment; it returns
// once TCP is up and the server flight is complete, or the wait after TCP
// connected ran out, or UDP failed. It closes h's UDP socket.
//
// The flight is read on the calling goroutine, which goes on with it: on
// the testbed a hand-over from a reader goroutine cost ~0.1 ms at the
// moment the flight completes, the critical path. TCP connects on its own
// goroutine, which sets the UDP socket's read deadline to the end of the
// wait (or to now, when the connect fails); a cancelled ctx does too.
func runRace(ctx context.Context, start time.Time, tcpAddr netip.AddrPort, h *Hello) (*raceResult, error) {
	if h.udp != nil {
		defer h.udp.Close()
	}
	r, err := newRace(start, h)
	if err != nil {
		return nil, err
	}
	dctx, cancelDial := context.WithCancel(ctx)
	defer cancelDial()
	tcpCh := r.connectTCP(dctx, tcpAddr)
	r.sendRequests()
	flight, flightAt, miss := r.receiveFlight(ctx)
	t, err := awaitTCP(ctx, tcpAddr, tcpCh)
	if err != nil {
		return nil, err
	}
	return r.result(t, flight, flightAt, miss), nil
}

// newRace makes the request datagrams of h's flight under a new
// connection id.
func newRace(start time.Time, h *Hello) (*race, error) {
	r := &race{start: start, cfg: h.cfg, udpAddr: h.udpAddr, udp: h.udp, udpErr: h.udpErr, clientLen: len(h.flight)}
	var err error
	if r.id, err = wire.NewConnID(); err != nil {
		return nil, err
	}
	if r.dgrams, err = wire.Fragment(wire.TypeRequest, r.id, h.flight); err != nil {
		return nil, err
	}
	for n := wire.DatagramsFor(h.cfg.expected(h.udpAddr)); len(r.dgrams) < n; {
		r.dgrams = append(r.dgrams, wire.PaddingRequest(r.id, r.clientLen))
	}
	return r, nil
}

// connectTCP connects TCP to addr on a goroutine of its own, which arms
// the end of the UDP wait from the connect's own duration (a connect
// handed over by TakeTCP began before the race: the time since the
// race's start would make the wait too short, see armWait) and then
// hands the connection over.
func (r *race) connectTCP(ctx context.Context, addr netip.AddrPort) <-chan tcpResult {
	ch := make(chan tcpResult, 1)
	go func() {
		c, connect, err := r.cfg.connect(ctx, addr)
		at := time.Since(r.start)
		if r.udp != nil {
			r.armWait(at, connect, err)
		}
		ch <- tcpResult{c: c, err: err, at: at, connect: connect}
	}()
	return ch
}

// armWait sets the UDP socket's read deadline to the end of the wait
// after a TCP connect that took connect and was done at (from the race's
// start), or to now when it failed (err). The wait begins when TCP
// connected, or, for a connect begun before the race (TakeTCP) and done
// sooner than connect after the race's start, connect after the start:
// the flight sent at the start needs about a connect's time to come back
// (a Z-data answer that came late must not make TurboTLS miss its flight
// for good). It ends fallbackStart early, at most an eighth of it; on a
// socket that can be polled the deadline fires a millisecond before its
// end and readFlight polls the rest.
func (r *race) armWait(at, connect time.Duration, err error) {
	if err != nil {
		r.udp.SetReadDeadline(time.Now()) // a failed connect ends the wait at once
		return
	}
	w := r.cfg.wait(connect)
	w -= min(fallbackStart, w/8)
	from := max(at, connect)
	r.waitArmed.Store(int64(w))
	r.waitFrom.Store(int64(from))
	end := r.start.Add(from + w) // r.start is real time: a deadline
	r.waitEnd.Store(end.UnixNano())
	if w > 2*time.Millisecond && canPoll(r.udp) {
		end = end.Add(-time.Millisecond) // readFlight polls the rest
	}
	r.udp.SetReadDeadline(end)
}

// sendRequests sends the request datagrams; a write error is the race's
// UDP error.
func (r *race) sendRequests() {
	if r.udp == nil {
		return
	}
	for _, d := range r.dgrams {
		if _, r.udpErr = r.udp.Write(d); r.udpErr != nil {
			return
		}
		r.stats.add(1, len(d), 0, 0)
	}
}

// receiveFlight reads the server's flight until it is complete, the wait
// ran out, UDP failed or ctx ended; it returns the flight and when it
// was complete, or why it did not come. When ctx ended, awaitTCP says so.
func (r *race) receiveFlight(ctx context.Context) ([]byte, time.Duration, *Miss) {
	if r.udpErr != nil {
		return nil, 0, &Miss{Kind: MissUDPError, Err: r.udpErr}
	}
	stop := context.AfterFunc(ctx, func() { r.udp.SetReadDeadline(time.Unix(1, 0)) })
	flight, err := r.readFlight(ctx)
	stop()
	at := time.Since(r.start)
	switch {
	case err == nil:
		return flight, at, nil
	case !errors.Is(err, os.ErrDeadlineExceeded):
		return nil, at, &Miss{Kind: MissUDPError, Err: err}
	case r.stats.responses() > 0:
		return nil, at, &Miss{Kind: MissIncomplete}
	default:
		return nil, at, &Miss{Kind: MissTimeout} // or the connect failed: awaitTCP says so
	}
}

// awaitTCP waits for the TCP connect begun by connectTCP.
func awaitTCP(ctx context.Context, addr netip.AddrPort, ch <-chan tcpResult) (tcpResult, error) {
	select {
	case t := <-ch:
		if t.err != nil {
			return t, fmt.Errorf("turbo: connecting to %s: %w", addr, t.err)
		}
		if err := ctx.Err(); err != nil {
			t.c.Close()
			return t, fmt.Errorf("turbo: %w", err)
		}
		return t, nil
	case <-ctx.Done():
		go func() {
			if t := <-ch; t.c != nil {
				t.c.Close()
			}
		}()
		return tcpResult{}, fmt.Errorf("turbo: %w", ctx.Err())
	}
}

// result is the race's result once TCP is up; a flight that came is
// remembered in Sizes.
func (r *race) result(t tcpResult, flight []byte, flightAt time.Duration, miss *Miss) *raceResult {
	res := &raceResult{tcp: t.c, id: r.id, flight: flight, miss: miss}
	res.TCPConnected, res.Connect = t.at, t.connect
	res.WaitArmed, res.WaitFrom = time.Duration(r.waitArmed.Load()), time.Duration(r.waitFrom.Load())
	res.Waited = max(time.Since(r.start)-t.at, 0)
	res.RequestsSent, res.BytesSent, res.ResponsesReceived, res.BytesReceived = r.stats.get()
	if flight != nil {
		res.FlightAt, res.ServerFlight = flightAt, len(flight)
		r.cfg.Sizes.Put(r.udpAddr, len(flight))
	}
	return res
}

// fallbackStart is what starting the handshake on TCP may cost after a
// wait that saw no flight, beyond what TLS 1.3 alone pays to start it:
// cores and caches gone cold during the wait, on both ends and in
// between (paired with TLS 1.3 visit by visit, the testbed measured
// 0.30-0.38 ms at 8.2-180.6 ms RTT, more after longer waits). The wait
// ends that much early, at most an eighth of it, so that a path that
// blocks UDP costs no more than the configured wait on top of TLS 1.3.
const fallbackStart = 500 * time.Microsecond

// waitFraction is the share of the TCP connect time the default wait for
// the UDP flight lasts.
const waitFraction = 0.5

// wait is how long to wait for the UDP flight after a TCP connect that
// took connect (armWait ends it fallbackStart early).
func (cfg *ClientConfig) wait(connect time.Duration) time.Duration {
	if cfg.Wait > 0 {
		return cfg.Wait
	}
	minW := cfg.MinWait
	if minW <= 0 {
		minW = 2 * time.Millisecond
	}
	// Whole milliseconds: Go's runtime sleeps in its network poller in
	// whole milliseconds, so a deadline with a fraction left fires up to
	// 1 ms late (a 4.2 ms wait took 5.3 ms on the testbed); 4 ms takes 4.
	return max(time.Duration(float64(connect)*waitFraction).Truncate(time.Millisecond), minW)
}

// connect opens the TCP connection and says how long its connect took
// from its own start: cfg.TakeTCP's connect, else dialTCP's.
func (cfg *ClientConfig) connect(ctx context.Context, addr netip.AddrPort) (net.Conn, time.Duration, error) {
	if cfg.TakeTCP != nil {
		return cfg.TakeTCP(ctx, addr)
	}
	start := time.Now() // real time: elapsed
	c, err := cfg.dialTCP(ctx, addr)
	return c, time.Since(start), err
}

// dialTCP opens the TCP connection: cfg.DialTCP, else a net.Dialer.
func (cfg *ClientConfig) dialTCP(ctx context.Context, addr netip.AddrPort) (net.Conn, error) {
	if cfg.DialTCP != nil {
		return cfg.DialTCP(ctx, addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr.String())
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

// responses is the number of the flight's response datagrams received.
func (u *udpCounters) responses() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.received
}

// readFlight reassembles the server's flight from the UDP socket. When
// the first response shows the flight needs more datagrams than were
// requested, it sends the missing padding requests at once (the flight
// then completes a round trip later instead of never). It returns the
// read error that stopped it (the deadline, when the wait ran out). When
// the deadline fires before waitEnd (armWait sets it a millisecond
// early), it polls until waitEnd.
func (r *race) readFlight(ctx context.Context) ([]byte, error) {
	var asm wire.Reassembler
	buf := make([]byte, 2048)
	topped := false
	polling := false
	for {
		var n int
		var err error
		if polling {
			n, err = pollUntil(ctx, r.udp, buf, time.Unix(0, r.waitEnd.Load()))
		} else if n, err = r.udp.Read(buf); err != nil && errors.Is(err, os.ErrDeadlineExceeded) && ctx.Err() == nil {
			if end := r.waitEnd.Load(); end != 0 && time.Now().UnixNano() < end { // real time: a deadline
				polling = true
				n, err = pollUntil(ctx, r.udp, buf, time.Unix(0, end))
			}
		}
		if err != nil {
			return nil, err
		}
		d, perr := wire.ParseDatagram(buf[:n])
		if perr != nil || d.Type != wire.TypeResponse || d.ID != r.id {
			continue // not ours: ignore
		}
		r.stats.add(0, 0, 1, n)
		if err := asm.Add(d.FlightLength, d.Offset, d.Fragment); err != nil {
			return nil, err
		}
		if need := wire.DatagramsFor(asm.Total()); !topped && need > len(r.dgrams) {
			topped = true
			r.topUp(need)
		}
		if asm.Complete() {
			return asm.Flight(), nil
		}
	}
}

// topUp sends the padding requests that bring the requests sent to need.
func (r *race) topUp(need int) {
	for i := len(r.dgrams); i < need; i++ {
		p := wire.PaddingRequest(r.id, r.clientLen)
		if _, err := r.udp.Write(p); err == nil {
			r.stats.add(1, len(p), 0, 0)
		}
	}
}
