package dial

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/lab"
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
	w := startWorld(t, lab.Options{Turbo: true})
	name := dns.Fqdn(zdata.TXTName(w.Host, w.Port))
	valid := w.Service.Records(time.Now())[0]
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
	r, err := connect(t, w, func(o *Options) {
		o.Turbo, o.TurboWait = true, 5*time.Second
		o.TurboWrapUDP = func(c net.Conn) net.Conn {
			n := new(atomic.Int32)
			sockets = append(sockets, n)
			return writeCounter{c, n}
		}
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
	r, err := connect(t, w, func(o *Options) {
		o.Turbo = true
		o.TurboWrapUDP = func(c net.Conn) net.Conn { sent++; return c }
	})
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

// UDP blocked on the path: after the wait, ZTLS over the TCP connection
// already open, and the answer still comes.
func TestConnectTurboBlockedFallsBack(t *testing.T) {
	w := startWorld(t, lab.Options{Turbo: true})
	for _, mode := range []string{"auto", "tls"} {
		r, err := connect(t, w, func(o *Options) {
			o.Mode, o.Turbo, o.TurboWait = mode, true, 30*time.Millisecond
			o.TurboWrapUDP = func(c net.Conn) net.Conn { return blackHole{c} }
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
