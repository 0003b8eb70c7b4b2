package dial

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/dialhook"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
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

func connect(t *testing.T, w *lab.World, mutate func(*Options)) (*Result, error) {
	t.Helper()
	return connectCtx(t, context.Background(), w, mutate)
}

// wrapUDP is a context with which Connect wraps its TurboTLS UDP sockets.
func wrapUDP(wrap func(net.Conn) net.Conn) context.Context {
	return dialhook.WithWrapUDP(context.Background(), wrap)
}

// connectCtx is connect within ctx (at most 10 s).
func connectCtx(t *testing.T, ctx context.Context, w *lab.World, mutate func(*Options)) (*Result, error) {
	t.Helper()
	res, err := w.Resolver(resolver.UDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	var out bytes.Buffer
	o := Options{Mode: "auto", TLS: w.ClientTLS(), Resolver: res, Request: []byte("GET /"), ReplaySafe: true,
		ReadResponse: 1 << 16, Out: &out, Memory: NewMemory(), ZDataBudget: time.Second}
	if mutate != nil {
		mutate(&o)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	r, err := Connect(ctx, w.HostPort(), o)
	if err == nil {
		t.Cleanup(func() { r.Conn.Close() })
		if got := out.String(); got != "hello" && o.Out == &out {
			t.Fatalf("response %q, want hello", got)
		}
	}
	return r, err
}

func TestConnectZTLSEndToEnd(t *testing.T) {
	w := startWorld(t, lab.Options{})
	r, err := connect(t, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "ztls" || rep.FallbackReason != "" {
		t.Fatalf("mode %s (%s)", rep.Mode, rep.FallbackReason)
	}
	if !rep.EarlyData.Offered || !rep.EarlyData.Accepted || rep.EarlyData.Bytes != 5 {
		t.Fatalf("early data %+v", rep.EarlyData)
	}
	// The answer came in the server's first flight: one round trip after TCP connect.
	if !rep.AnswerInFirstFlight {
		t.Fatal("the response did not arrive in the server's first flight")
	}
	if rep.ResponseBytes != 5 || rep.TLS.Version != "TLS 1.3" {
		t.Fatalf("report %+v", rep)
	}
	steps := map[string]bool{}
	for _, s := range rep.Trace {
		steps[s.Step] = true
	}
	for _, want := range []string{"address", "tcp_connected", "zdata_verified", "early_data_accepted", "first_byte"} {
		if !steps[want] {
			t.Fatalf("trace lacks %s: %+v", want, rep.Trace)
		}
	}
}

func TestConnectModeTLS(t *testing.T) {
	w := startWorld(t, lab.Options{})
	r, err := connect(t, w, func(o *Options) { o.Mode = "tls" })
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "tls" || r.Report.FallbackReason != ReasonModeTLS || r.Report.AnswerInFirstFlight {
		t.Fatalf("%+v", r.Report)
	}
}

func TestConnectFallbacks(t *testing.T) {
	no := false
	cases := []struct {
		name   string
		world  lab.Options
		mutate func(*Options)
		reason string
	}{
		{"no Z-data", lab.Options{NoZData: true}, nil, string(zdata.ReasonNoZData)},
		{"server without Z-data keys", lab.Options{ServerZData: &no}, nil, ReasonRejected},
		{"expired", lab.Options{}, func(o *Options) { o.Now = func() time.Time { return clock.Now().Add(2 * time.Hour) } }, string(zdata.ReasonExpired)},
		{"not yet valid", lab.Options{}, func(o *Options) { o.Now = func() time.Time { return clock.Now().Add(-2 * time.Hour) } }, string(zdata.ReasonNotYetValid)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorld(t, tc.world)
			r, err := connect(t, w, tc.mutate)
			if err != nil {
				t.Fatal(err)
			}
			if r.Report.Mode != "tls" || !strings.Contains(r.Report.FallbackReason, tc.reason) {
				t.Fatalf("mode %s, reason %q, want %q", r.Report.Mode, r.Report.FallbackReason, tc.reason)
			}
		})
	}
}

func TestConnectForgedZData(t *testing.T) {
	w := startWorld(t, lab.Options{})
	// An attacker answers with a record whose signature is not the server's.
	name := zdata.TXTName(w.Host, w.Port)
	rec := w.Service.Records(clock.Now())[0].Clone()
	rec.Signature[len(rec.Signature)/2] ^= 0x55
	rr := rec.TXTRR(time.Minute)
	rr.Hdr.Name = dns.Fqdn(name)
	if err := w.Zones.ReplaceRRset(name, dns.TypeTXT, []dns.RR{rr}); err != nil {
		t.Fatal(err)
	}
	r, err := connect(t, w, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "tls" || !strings.Contains(r.Report.FallbackReason, string(zdata.ReasonBadSignature)) {
		t.Fatalf("mode %s reason %q", r.Report.Mode, r.Report.FallbackReason)
	}
}

func TestConnectModeZTLSRefusesFallback(t *testing.T) {
	w := startWorld(t, lab.Options{NoZData: true})
	if _, err := connect(t, w, func(o *Options) { o.Mode = "ztls" }); !errors.Is(err, ErrZTLSImpossible) {
		t.Fatalf("Mode ztls without Z-data: %v", err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConnectUnknownHost(t *testing.T) {
	w := startWorld(t, lab.Options{})
	res, _ := w.Resolver(resolver.UDP)
	defer res.Close()
	_, err := Connect(ctxT(t), "missing.ztls.test:443", Options{Mode: "auto", TLS: w.ClientTLS(), Resolver: res,
		Request: []byte("GET /"), ReplaySafe: true, Memory: NewMemory()})
	if err == nil || !strings.Contains(err.Error(), "no address") {
		t.Fatalf("unknown host: %v", err)
	}
}

func TestMemoryPersistsAndExpires(t *testing.T) {
	path := t.TempDir() + "/aborts.json"
	now := clock.Now()
	OpenMemory(path).RememberAbort("old.test", 443, now)
	m := OpenMemory(path)
	if !m.Aborted("old.test", 443, now.Add(time.Hour)) {
		t.Fatal("abort not remembered across processes")
	}
	if m.Aborted("old.test", 443, now.Add(RememberFor+time.Second)) {
		t.Fatal("abort remembered beyond 24 hours")
	}
	m.RememberAbort("x.test", 1, now)
	if err := m.Clear(); err != nil || OpenMemory(path).Aborted("x.test", 1, now) {
		t.Fatal("Clear did not forget")
	}
}
