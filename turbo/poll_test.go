package turbo

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// pollUntil returns a datagram that is there, ends with the deadline
// error when none comes by end, and with ctx's error when ctx ends first.
func TestPollUntil(t *testing.T) {
	a, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := net.DialUDP("udp", nil, a.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := a.WriteTo([]byte("flight"), b.LocalAddr()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	ctx := context.Background()
	b.SetReadDeadline(time.Unix(1, 0))                              // as after the early deadline fired
	n, err := pollUntil(ctx, b, buf, time.Now().Add(5*time.Second)) // real time: a deadline
	if err != nil || string(buf[:n]) != "flight" {
		t.Fatalf("pollUntil = %q, %v", buf[:n], err)
	}
	if _, err := pollUntil(ctx, b, buf, time.Now().Add(2*time.Millisecond)); !errors.Is(err, os.ErrDeadlineExceeded) { // real time: a deadline
		t.Fatalf("nothing to read: %v, want the deadline error", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := pollUntil(cctx, b, buf, clock.Now().Add(time.Hour)); err == nil {
		t.Fatal("a cancelled poll read nothing and gave no error")
	}
}
