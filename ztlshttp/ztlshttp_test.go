package ztlshttp

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// backend records what it saw and refuses early requests to /too-early.
type backend struct {
	mu     sync.Mutex
	early  []string // Early-Data header per request, in order
	bodies []string // request bodies, in order
	pads   []int    // length of each request's X-Pad header
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.early = append(b.early, r.Header.Get("Early-Data"))
	b.bodies = append(b.bodies, string(body))
	b.pads = append(b.pads, len(r.Header.Get("X-Pad")))
	b.mu.Unlock()
	if r.URL.Path == "/too-early" && r.Header.Get("Early-Data") == "1" {
		w.WriteHeader(http.StatusTooEarly)
		return
	}
	io.WriteString(w, "page "+r.URL.Path)
}

func (b *backend) seen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.early...)
}

func (b *backend) seenBodies() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bodies...)
}

func setup(t *testing.T) (*lab.World, *backend, *http.Client) {
	w, be, opts := setupWorld(t)
	tr := NewTransport(opts)
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	return w, be, client
}

// proxyTo is a server handler: a Proxy to be.
func proxyTo(t *testing.T, be *backend) func(*tls13.Conn) {
	origin := httptest.NewServer(be)
	t.Cleanup(origin.Close)
	u, _ := url.Parse(origin.URL)
	proxy := &Proxy{Backend: u}
	return func(c *tls13.Conn) { proxy.ServeConn(c) }
}

// setupWorld starts a lab world whose server is a Proxy to a recording
// backend, and returns dial options that reach it with ZTLS.
func setupWorld(t *testing.T) (*lab.World, *backend, dial.Options) {
	return setupWorldALPN(t, zdataALPN().ALPN, "http/1.1")
}

// setupWorldALPN is setupWorld with the Z-data's early ALPN and the
// server's ALPN protocols given.
func setupWorldALPN(t *testing.T, early string, protos ...string) (*lab.World, *backend, dial.Options) {
	be := &backend{}
	w, err := lab.Start(lab.Options{
		Handler:      proxyTo(t, be),
		ZDataOptions: zdata.Options{ALPN: early},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	w.ServerTLS.NextProtos = protos
	// A register whose memory covers all time: this server has no restart
	// to guard against (the default refuses early data for a while).
	w.ServerTLS.StrikeRegister = tls13.NewMemoryStrikeRegister(1000, time.Time{})
	res, err := w.Resolver(resolver.UDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })
	return w, be, dial.Options{Mode: "auto", TLS: w.ClientTLS(), Resolver: res, ZDataBudget: time.Second, Memory: dial.NewMemory()}
}

// do sends a request and returns the body and the connection report.
func do(t *testing.T, client *http.Client, method, url string) (string, *dial.Report) {
	t.Helper()
	resp, body := get(t, client, method, url, "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	rep := ReportOf(resp)
	if rep == nil {
		t.Fatal("no report")
	}
	return body, rep
}

func TestTransportAndProxyEarlyRequest(t *testing.T) {
	w, be, client := setup(t)
	body, r := do(t, client, "GET", "https://"+w.HostPort()+"/index.html")
	if body != "page /index.html" {
		t.Fatalf("body %q", body)
	}
	if got := be.seen(); len(got) != 1 || got[0] != "1" {
		t.Fatalf("backend saw Early-Data %q, want one early request", got)
	}
	if r.Mode != "ztls" || !r.EarlyData.Accepted || !r.AnswerInFirstFlight {
		t.Fatalf("report %+v", r)
	}
}

func TestProxyHonours425(t *testing.T) {
	w, be, client := setup(t)
	body, _ := do(t, client, "GET", "https://"+w.HostPort()+"/too-early")
	if body != "page /too-early" {
		t.Fatalf("body %q", body)
	}
	// First try early (refused with 425), then again after the handshake.
	if got := be.seen(); strings.Join(got, ",") != "1," {
		t.Fatalf("backend saw Early-Data %q, want [1 \"\"]", got)
	}
}

func TestPostNeverEarly(t *testing.T) {
	w, be, client := setup(t)
	body, r := do(t, client, "POST", "https://"+w.HostPort()+"/buy")
	if body != "page /buy" {
		t.Fatalf("body %q", body)
	}
	if got := be.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("backend saw Early-Data %q for a POST", got)
	}
	if r.EarlyData.Offered {
		t.Fatalf("POST offered as early data: %+v", r.EarlyData)
	}
}
