package turbo_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/turbohook"
	"github.com/ztls-project/ztls/turbo"
)

// execConfig is a server Config whose flights run through exec.
func execConfig(exec turbohook.Exec) turbo.Config {
	var cfg turbo.Config
	turbohook.SetExec(&cfg, exec)
	return cfg
}

// The testbed's Exec (internal/turbohook) runs every UDP flight: a one-slot pool sees the flight, and
// the handshake continues on TCP as usual.
func TestExecRunsFlights(t *testing.T) {
	slot := make(chan struct{}, 1)
	var calls atomic.Int32
	tw := startWorld(t, execConfig(func(ctx context.Context, work func()) error {
		select {
		case slot <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		}
		defer func() { <-slot }()
		calls.Add(1)
		work()
		return nil
	}))
	for i := 0; i < 3; i++ {
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
	}
	if n := calls.Load(); n != 3 {
		t.Fatalf("Exec ran %d flights, want 3", n)
	}
	if s := tw.srv.Stats(); s.Linked != 3 || s.FlightErrors != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// An Exec that refuses (a closed pool) makes the flight fail: no UDP
// answer, the client falls back to TLS over its TCP connection.
func TestExecRefusalFailsFlight(t *testing.T) {
	tw := startWorld(t, execConfig(func(ctx context.Context, work func()) error {
		return errors.New("pool closed")
	}))
	res, err := turbo.Dial(dialCtx(t), tw.tcp, tw.udp, &turbo.ClientConfig{TLS: tw.clientTLS(), Wait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Turbo || res.FallbackReason != turbo.ReasonUDPTimeout || res.ResponsesReceived != 0 {
		t.Fatalf("turbo %v, reason %q, responses %d", res.Turbo, res.FallbackReason, res.ResponsesReceived)
	}
	if got := exchange(t, res, []byte("GET /")); got != answer {
		t.Fatalf("answer %q", got)
	}
	if s := tw.srv.Stats(); s.FlightErrors != 1 || s.DatagramsOut != 0 || s.Linked != 0 {
		t.Fatalf("stats %+v", s)
	}
}
