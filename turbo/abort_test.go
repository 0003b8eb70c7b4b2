package turbo_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

func TestAbortedFlight(t *testing.T) {
	alertErr := &tls13.AlertError{Alert: 110}
	alert := []byte{21, 3, 3, 0, 2, 2, 110}
	hello := []byte{22, 3, 3, 0, 4, 2, 0, 0, 0}
	for _, tc := range []struct {
		name   string
		flight []byte
		err    error
		want   bool
	}{
		{"alert first", alert, alertErr, true},
		{"alert after a ServerHello record", append(append([]byte{}, hello...), alert...), alertErr, false},
		{"alert record, other error", alert, errors.New("decode error"), false},
		{"empty flight", nil, alertErr, false},
	} {
		if got := turbo.AbortedFlight(tc.flight, tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// alertBackend answers every ClientHello with a fatal alert and closes,
// as a server that refuses what the ClientHello offers does.
func alertBackend(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testproc.Serve(t, ln, func(c net.Conn) {
		hdr := make([]byte, 5)
		if _, err := io.ReadFull(c, hdr); err != nil {
			return
		}
		io.CopyN(io.Discard, c, int64(hdr[3])<<8|int64(hdr[4]))
		c.Write([]byte{21, 3, 3, 0, 2, 2, 110}) // unsupported_extension
	})
	return ln.Addr().String()
}

// A UDP flight that is an alert: the outcome is MissAborted, with the
// engine's alert as its cause, and a TCP connection that has carried
// nothing yet, on which the handshake begun cannot continue.
func TestDialOutcomeAborted(t *testing.T) {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spc, err := net.ListenPacket("udp", sln.Addr().String())
	if err != nil {
		sln.Close()
		t.Fatal(err)
	}
	sp := turbo.NewServerProxy(alertBackend(t), turbo.Config{})
	go sp.ServeUDP(spc)
	go sp.Serve(sln)
	defer func() { sln.Close(); sp.Close() }()
	addr := netip.MustParseAddrPort(sln.Addr().String())

	cfg := w.ClientTLS()
	cfg.ServerName = w.Host
	cc := &turbo.ClientConfig{TLS: cfg, Wait: 5 * time.Second,
		ZData: w.Service.Records(clock.Now())[0].Offer(w.Cert.Leaf), Early: []byte("GET /"), ReplaySafe: true}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := turbo.NewHello(addr, cc)
	if err != nil {
		t.Fatal(err)
	}
	o, err := h.Dial(ctx, addr)
	if err != nil {
		t.Fatalf("Dial: %v", err)
	}
	defer o.TCP.Close()
	var ae *tls13.AlertError
	if o.Conn != nil || o.Miss == nil || o.Miss.Kind != turbo.MissAborted || !errors.As(o.Miss, &ae) {
		t.Fatalf("outcome conn %v, miss %v, want the alert as an abort", o.Conn, o.Miss)
	}
	if !strings.HasPrefix(o.Miss.Error(), turbo.ReasonFlightAborted+": ") || o.ServerFlight == 0 {
		t.Fatalf("miss %q, server flight %d", o.Miss, o.ServerFlight)
	}
	if o.CanContinue() {
		t.Fatal("a refused flight's handshake may continue on TCP")
	}
	if _, err := o.ContinueOnTCP(); err == nil {
		t.Fatal("ContinueOnTCP went on after an abort")
	}
	// The TCP connection has carried nothing: the server proxy's backend
	// hears a new ClientHello on it, and aborts again.
	c := tls13.Client(o.TCP, cfg)
	if err := c.HandshakeContext(ctx); !errors.As(err, &ae) {
		t.Fatalf("handshake on the TCP connection: %v, want the backend's alert", err)
	}
}
