package prevalidate_test

// Connections through a Cache (package dial) against a lab world, as
// dial's own tests make them.

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

func startWorld(t *testing.T, o lab.Options) *lab.World {
	t.Helper()
	w, err := lab.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	return w
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// connect connects to w's service (at most 10 s), as mutate says, and
// checks the response when the options keep its default Out.
func connect(t *testing.T, w *lab.World, mutate func(*dial.Options)) (*dial.Result, error) {
	t.Helper()
	res, err := w.Resolver(resolver.UDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	var out bytes.Buffer
	o := dial.Options{Mode: dial.ModeAuto, TLS: w.ClientTLS(), Resolver: res, Request: []byte("GET /"), ReplaySafe: true,
		ReadResponse: 1 << 16, Out: &out, Memory: dial.NewMemory(), ZDataBudget: time.Second}
	if mutate != nil {
		mutate(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := dial.Connect(ctx, w.HostPort(), o)
	if err == nil {
		t.Cleanup(func() { r.Conn.Close() })
		if got := out.String(); got != "hello" && o.Out == &out {
			t.Fatalf("response %q, want hello", got)
		}
	}
	return r, err
}

func hasStep(r dial.Report, name string) bool {
	for _, s := range r.Trace {
		if s.Step == name {
			return true
		}
	}
	return false
}
