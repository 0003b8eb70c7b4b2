package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/tls13"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// /healthz is always 200; /readyz is 503 until SetReady, then follows its
// check.
func TestHealthAndReadiness(t *testing.T) {
	r := New()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := r.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr.String()
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz before ready: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "starting") {
		t.Errorf("/readyz before SetReady: %d %q", code, body)
	}
	var down error
	r.SetReady(func() error { return down })
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Errorf("/readyz when ready: %d %q", code, body)
	}
	down = errors.New("strike register unreachable")
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "strike register unreachable") {
		t.Errorf("/readyz with a failing check: %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz while not ready: %d, want 200 (alive)", code)
	}
	var none *Registry
	none.SetReady(nil) // servers without --metrics call it all the same
}

// Every registry exports ztls_build_info; a DNS server's exports no TLS
// server series and a TLS server's no DNS series, whatever is recorded.
func TestSeriesByServer(t *testing.T) {
	scrape := func(r *Registry) string {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		addr, err := r.Serve(ctx, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		_, body := get(t, "http://"+addr.String()+"/metrics")
		return body
	}
	dns := New().DNSServer()
	dns.DNSQuery("A", "NOERROR")
	tls := New().TLSServer()
	tls.Flight(tls13.ConnectionState{ZTLS: true}, false)
	tls.EarlyBytes(3)
	for _, c := range []struct {
		name      string
		body      string
		want, not []string
	}{
		{"dns", scrape(dns), []string{`ztls_dns_queries_total{qtype="A",rcode="NOERROR"} 1`},
			[]string{"ztls_handshakes_total", "ztls_handshake_failures_total", "ztls_ztls_offers_total", "ztls_early_data_bytes_total", "ztls_strike_register_errors_total"}},
		{"tls", scrape(tls), []string{`ztls_handshakes_total{mode="ztls",transport="tcp"} 1`, "ztls_early_data_bytes_total 3"},
			[]string{"ztls_dns_queries_total"}},
	} {
		for _, w := range append(c.want, `ztls_build_info{goarch=`) {
			if !strings.Contains(c.body, w) {
				t.Errorf("%s: no %q in the scrape", c.name, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(c.body, n) {
				t.Errorf("%s: exports %s, which it never updates", c.name, n)
			}
		}
	}
}
