package turbo_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// A TCP connect handed over by TakeTCP began before Hello.Dial (package
// dial begins it when the address comes, then looks up the Z-data): the
// wait for the UDP flight is half of that connect's own duration, not of
// the time since Hello.Dial began, which would end it before the flight
// could come; and when that connect was done sooner than its duration
// after Hello.Dial began (the Z-data came late, issue 30's plain-UDP v3
// answer at 8.2 ms), the wait begins a connect's time after the start,
// when the flight sent at the start can be back, not at once. The UDP
// peer here never answers, so the race ends when the armed wait does;
// the test checks the wait armed, not how long it took.
func TestWaitCountsFromTheConnectsStart(t *testing.T) {
	udp, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			c.Read(make([]byte, 1)) // until the client closes
		}
	}()
	tcpAddr := netip.MustParseAddrPort(ln.Addr().String())
	// The connect began 40 ms before the take; it is done when taken.
	const connect = 40 * time.Millisecond
	taken := 0
	cc := &turbo.ClientConfig{
		TLS: &tls13.Config{ServerName: "example.com"},
		TakeTCP: func(ctx context.Context, addr netip.AddrPort) (net.Conn, time.Duration, error) {
			taken++
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr.String())
			return c, connect, err
		},
	}
	h, err := turbo.NewHello(netip.MustParseAddrPort(udp.LocalAddr().String()), cc)
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.Dial(context.Background(), tcpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer o.TCP.Close()
	if taken != 1 {
		t.Fatalf("TakeTCP called %d times, want 1", taken)
	}
	if o.Miss == nil || o.Miss.Kind != turbo.MissTimeout {
		t.Fatalf("outcome %+v, want a MissTimeout (the UDP peer never answers)", o.Miss)
	}
	if o.Connect != connect {
		t.Errorf("Exchange.Connect = %v, want the taken connect's %v", o.Connect, connect)
	}
	// Half the connect, whole milliseconds, ending fallbackStart (0.5 ms) early.
	if want := connect/2 - 500*time.Microsecond; o.WaitArmed != want {
		t.Errorf("wait armed %v after a %v connect begun before Hello.Dial, want %v (counted from the connect's start)", o.WaitArmed, connect, want)
	}
	if o.WaitFrom != connect || o.TCPConnected >= connect {
		t.Errorf("wait began %v after Hello.Dial (TCP connected at %v), want %v: the flight sent at the start needs a connect's time", o.WaitFrom, o.TCPConnected, connect)
	}
}
