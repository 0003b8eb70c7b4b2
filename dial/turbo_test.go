package dial

import (
	"net"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/lab"
	"github.com/ztls-project/ztls/turbo"
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
