package dial

import (
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

func hasStep(r Report, name string) bool {
	for _, s := range r.Trace {
		if s.Step == name {
			return true
		}
	}
	return false
}

// ZTLS over TurboTLS: the advertisement and Z-data from DNS, the request
// in the UDP flight, the answer in the server's UDP flight.
func TestConnectZTLSTurbo(t *testing.T) {
	w := startWorld(t, lab.Options{Turbo: true})
	r, err := connect(t, w, func(o *Options) { o.Turbo, o.TurboWait = true, 5*time.Second })
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Transport != "turbo" || rep.Mode != "ztls" || !rep.AnswerInFirstFlight || !rep.EarlyData.Accepted {
		t.Fatalf("transport %s (%s), mode %s (%s), answer in first flight %v", rep.Transport, rep.TurboFallback, rep.Mode, rep.FallbackReason, rep.AnswerInFirstFlight)
	}
	if rep.Turbo == nil || rep.Turbo.UDPPort != w.Port || rep.Turbo.ServerFlight == 0 || !hasStep(rep, "turbo_flight_complete") {
		t.Fatalf("turbo report %+v", rep.Turbo)
	}
	if !hasStep(rep, "turbo_hello_made_early") {
		t.Fatal("the first flight was not made while the Z-data was checked")
	}
}

// writeCounter counts the datagrams a UDP socket sends.
type writeCounter struct {
	net.Conn
	n *atomic.Int32
}

func (w writeCounter) Write(p []byte) (int, error) { w.n.Add(1); return w.Conn.Write(p) }

// The first flight made early is made from the likeliest record before
// any check; when the checks select another record (here the likeliest
// is forged), it is dropped unsent and the flight is made anew from the
// verified record.
func TestConnectZTLSTurboEarlyHelloOfAForgedRecordIsNotSent(t *testing.T) {
	// Mid-period: in the first minute of a period the forged record below
	// is not valid yet (only within the skew allowance), so the client
	// would not take it as the likeliest, and the test would prove nothing.
	now := midPeriod()
	w := startWorld(t, lab.Options{Turbo: true, Now: now})
	name := dns.Fqdn(zdata.TXTName(w.Host, w.Port))
	valid := w.Service.Records(now())[0]
	forged := valid.Clone()
	forged.NotBefore, forged.NotAfter = forged.NotBefore.Add(time.Minute), forged.NotAfter.Add(time.Minute)
	var rrs []dns.RR
	for _, rec := range []*zdata.Record{forged, valid} {
		rr := rec.TXTRR(time.Minute)
		rr.Hdr.Name = name
		rrs = append(rrs, rr)
	}
	if err := w.Zones.ReplaceRRset(name, dns.TypeTXT, rrs); err != nil {
		t.Fatal(err)
	}
	var sockets, writers []*atomic.Int32
	ctx := wrapUDP(func(c net.Conn) net.Conn {
		n := new(atomic.Int32)
		sockets = append(sockets, n)
		return writeCounter{c, n}
	})
	r, err := connectCtx(t, ctx, w, func(o *Options) {
		o.Turbo, o.TurboWait, o.Now, o.TLS.Time = true, 5*time.Second, now, now
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Transport != "turbo" || rep.Mode != "ztls" || !rep.EarlyData.Accepted {
		t.Fatalf("transport %s (%s), mode %s (%s)", rep.Transport, rep.TurboFallback, rep.Mode, rep.FallbackReason)
	}
	if hasStep(rep, "turbo_hello_made_early") {
		t.Fatal("the flight made from the forged record was used")
	}
	for _, n := range sockets {
		if n.Load() > 0 {
			writers = append(writers, n)
		}
	}
	if len(sockets) != 2 || len(writers) != 1 {
		t.Fatalf("%d UDP sockets made, %d sent: want the early one dropped unsent", len(sockets), len(writers))
	}
}

func TestConnectTurboTLS(t *testing.T) {
	w := startWorld(t, lab.Options{Turbo: true})
	r, err := connect(t, w, func(o *Options) { o.Mode, o.Turbo, o.TurboWait = "tls", true, 5*time.Second })
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Transport != "turbo" || rep.Mode != "tls" || rep.AnswerInFirstFlight || rep.EarlyData.Offered {
		t.Fatalf("transport %s (%s), mode %s", rep.Transport, rep.TurboFallback, rep.Mode)
	}
}

// Without the HTTPS advertisement no UDP is sent.
func TestConnectTurboNotAdvertised(t *testing.T) {
	w := startWorld(t, lab.Options{})
	sent := 0
	ctx := wrapUDP(func(c net.Conn) net.Conn { sent++; return c })
	r, err := connectCtx(t, ctx, w, func(o *Options) { o.Turbo = true })
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Report; rep.Transport != "tcp" || rep.TurboFallback != ReasonTurboNoAdvert || rep.Mode != "ztls" || sent != 0 {
		t.Fatalf("transport %s (%s), mode %s, UDP sockets %d", rep.Transport, rep.TurboFallback, rep.Mode, sent)
	}
}

// blackHole drops everything the client's UDP socket sends.
type blackHole struct{ net.Conn }

func (b blackHole) Write(p []byte) (int, error) { return len(p), nil }

func blackHoled(c net.Conn) net.Conn { return blackHole{c} }

// UDP blocked on the path: after the wait, ZTLS over the TCP connection
// already open, and the answer still comes.
func TestConnectTurboBlockedFallsBack(t *testing.T) {
	w := startWorld(t, lab.Options{Turbo: true})
	for _, mode := range []string{"auto", "tls"} {
		r, err := connectCtx(t, wrapUDP(blackHoled), w, func(o *Options) {
			o.Mode, o.Turbo, o.TurboWait = Mode(mode), true, 30*time.Millisecond
		})
		if err != nil {
			t.Fatal(err)
		}
		rep := r.Report
		if rep.Transport != "tcp" || rep.TurboFallback != turbo.ReasonUDPTimeout || rep.Turbo == nil || rep.Turbo.Responses != 0 {
			t.Fatalf("%s: transport %s (%s)", mode, rep.Transport, rep.TurboFallback)
		}
		if want := map[string]string{"auto": "ztls", "tls": "tls"}[mode]; rep.Mode != want {
			t.Fatalf("%s: mode %s (%s)", mode, rep.Mode, rep.FallbackReason)
		}
	}
}

// Nothing listens on the UDP port: the ICMP port unreachable fails the
// socket (turbo.MissUDPError) before the wait ends, and the handshake
// goes on over the TCP connection already open: the same ClientHello
// without early data (mode tls), a new one with it (auto: ZTLS).
func TestConnectTurboPortUnreachableFallsBack(t *testing.T) {
	w := startWorld(t, lab.Options{Turbo: true})
	closed, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := closed.LocalAddr().(*net.UDPAddr).Port
	closed.Close()
	for _, mode := range []string{"auto", "tls"} {
		r, err := connect(t, w, func(o *Options) {
			o.Mode, o.Turbo, o.TurboPort, o.TurboWait = Mode(mode), true, port, 5*time.Second
		})
		if err != nil {
			t.Fatal(err)
		}
		rep := r.Report
		if rep.Transport != "tcp" || !strings.HasPrefix(rep.TurboFallback, turbo.ReasonUDPError+": ") ||
			!strings.Contains(rep.TurboFallback, "refused") || rep.Turbo == nil || rep.Turbo.Responses != 0 {
			t.Fatalf("%s: transport %s (%s)", mode, rep.Transport, rep.TurboFallback)
		}
		if want := map[string]string{"auto": "ztls", "tls": "tls"}[mode]; rep.Mode != want {
			t.Fatalf("%s: mode %s (%s)", mode, rep.Mode, rep.FallbackReason)
		}
	}
}

// firstResponseLost drops the first datagram the client's UDP socket
// reads: the server's flight stays incomplete (turbo.MissIncomplete).
type firstResponseLost struct {
	net.Conn
	dropped bool
}

func (f *firstResponseLost) Read(b []byte) (int, error) {
	n, err := f.Conn.Read(b)
	if err == nil && !f.dropped {
		f.dropped = true
		return f.Conn.Read(b)
	}
	return n, err
}

// A response datagram lost: the flight is incomplete when the wait runs
// out, the report says so as for a flight that never came, and the
// handshake goes on over TCP.
func TestConnectTurboIncompleteFlightFallsBack(t *testing.T) {
	w := startWorld(t, lab.Options{Turbo: true})
	for _, mode := range []string{"auto", "tls"} {
		lose := func(c net.Conn) net.Conn { return &firstResponseLost{Conn: c} }
		r, err := connectCtx(t, wrapUDP(lose), w, func(o *Options) {
			o.Mode, o.Turbo, o.TurboWait = Mode(mode), true, 100*time.Millisecond
		})
		if err != nil {
			t.Fatal(err)
		}
		rep := r.Report
		if rep.Transport != "tcp" || rep.TurboFallback != turbo.ReasonUDPTimeout || rep.Turbo == nil ||
			rep.Turbo.Responses == 0 || rep.Turbo.ServerFlight != 0 {
			t.Fatalf("%s: transport %s (%s), turbo %+v", mode, rep.Transport, rep.TurboFallback, rep.Turbo)
		}
		if want := map[string]string{"auto": "ztls", "tls": "tls"}[mode]; rep.Mode != want {
			t.Fatalf("%s: mode %s (%s)", mode, rep.Mode, rep.FallbackReason)
		}
	}
}

// The readable report shows what TurboTLS did and the steps in time
// order, those of one moment together.
func TestReportTextShowsTurboAndSteps(t *testing.T) {
	r := Report{Mode: "ztls", Transport: "turbo", Address: "192.0.2.1:443",
		Turbo: &TurboReport{UDPPort: 443, Requests: 2, Responses: 1, BytesSent: 2400, BytesReceived: 307, ServerFlight: 286, WaitedMS: 1.3},
		Trace: []TraceStep{{"address", 6.7}, {"zdata_verified", 7.15}, {"tcp_connected", 15.04},
			{"turbo_udp_sent", 7.22}, {"server_hello", 16.69}, {"handshake_done", 16.69}, {"first_byte", 16.71}}}
	var b strings.Builder
	r.WriteText(&b)
	out := b.String()
	for _, want := range []string{
		"ZTLS over turbo",
		"TurboTLS: UDP port 443, 2 request datagrams (2400 bytes) out, 1 (307 bytes) back, server flight 286 bytes, waited 1.3 ms",
		"steps (ms from the start): address 6.70, zdata_verified 7.15, turbo_udp_sent 7.22, tcp_connected 15.04, server_hello+handshake_done 16.69, first_byte 16.71",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	r.Turbo, r.Trace, r.TurboFallback = nil, nil, turbo.ReasonUDPTimeout
	b.Reset()
	r.WriteText(&b)
	if out := b.String(); strings.Contains(out, "TurboTLS: UDP") || strings.Contains(out, "steps") || !strings.Contains(out, "TurboTLS not used: "+turbo.ReasonUDPTimeout) {
		t.Errorf("report without TurboTLS:\n%s", out)
	}
}

// midPeriod is a clock that reads the middle of the current hour's period
// now and runs on from there.
func midPeriod() func() time.Time {
	now := clock.Now()
	d := now.Truncate(time.Hour).Add(30 * time.Minute).Sub(now)
	return func() time.Time { return clock.Now().Add(d) }
}
