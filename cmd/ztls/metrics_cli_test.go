package main

// `serve --metrics` exposes what an operator watches, scraped here after
// a ZTLS connection, a plain TLS 1.3 one (the client's fallback) and a
// replayed first flight.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// scrape returns the metric lines (name{labels} value) of a /metrics page.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: %s %s", url, resp.Status, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestCLIServeMetrics(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	ready, log, cmd := startProc(t, "metrics on", "serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello", "-v",
		"--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := strings.TrimSpace(ready[strings.Index(ready, "http://"):])

	rep := s.connect(t, dnsAddr)
	wantZTLS(t, rep)
	early := rep.EarlyData.Bytes // 'GET /', completed into a whole request
	if rep := s.connect(t, dnsAddr, "--mode", "tls"); rep.Mode != "tls" {
		t.Fatalf("--mode tls: %s", rep.Mode)
	}
	flight := ztlsFlight(t, s, []byte("GET /transfer?amount=100"))
	deliver(t, addr, flight)
	deliver(t, addr, flight)
	log.waitFor(t, "rejected (replayed ClientHello)")

	m := scrape(t, url)
	for name, want := range map[string]float64{
		`ztls_handshakes_total{mode="ztls",transport="tcp"}`:        2, // the client's and the captured flight
		`ztls_handshakes_total{mode="tls",transport="tcp"}`:         2, // --mode tls, and the replay
		`ztls_ztls_offers_total{reason="",result="accepted"}`:       2,
		`ztls_ztls_offers_total{reason="replay",result="rejected"}`: 1,
		`ztls_early_data_bytes_total`:                               float64(early + len("GET /transfer?amount=100")),
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	// One live key, or two within the freshness window after the hour
	// (the ending key is live until its not-after plus W, tls13.ZDataLive).
	service := `{service="www.ztls.test:` + strconv.Itoa(s.port) + `"}`
	if live := m["ztls_zdata_live_keys"+service]; live != 1 && live != 2 {
		t.Errorf("ztls_zdata_live_keys = %v, want 1 (or 2 near the hour)", live)
	}
	if m["ztls_handshake_failures_total"] < 1 { // the attacker never finishes
		t.Errorf("ztls_handshake_failures_total = %v", m["ztls_handshake_failures_total"])
	}
	if m["ztls_zdata_expiry_seconds"+service] <= 0 {
		t.Errorf("ztls_zdata_expiry_seconds = %v", m["ztls_zdata_expiry_seconds"+service])
	}
}

func TestCLIDNSServeMetrics(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	ready, log, cmd := startProc(t, "metrics on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0",
		"--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := strings.TrimSpace(ready[strings.Index(ready, "http://"):])
	dnsAddr := logAttr(log.waitFor(t, "serving udp on"), "addr")
	run(t, "lookup", "www.ztls.test", "--resolver", dnsAddr, "--type", "A")
	run(t, "lookup", "nothing.ztls.test", "--resolver", dnsAddr, "--type", "A")
	m := scrape(t, url)
	for name, atLeast := range map[string]float64{
		`ztls_dns_queries_total{qtype="A",rcode="NOERROR"}`:                          1,
		`ztls_dns_queries_total{qtype="A",rcode="NXDOMAIN"}`:                         1,
		`ztls_dns_udp_bytes_out_total`:                                               1,
		`ztls_zdata_live_keys{service="www.ztls.test:` + strconv.Itoa(s.port) + `"}`: 1,
	} {
		if m[name] < atLeast {
			t.Errorf("%s = %v, want at least %v", name, m[name], atLeast)
		}
	}
}

// turbo-proxy --server --metrics: the TurboTLS counters, moved by a
// datagram sent to it.
func TestCLITurboProxyMetrics(t *testing.T) {
	ready, log, cmd := startProc(t, "metrics on", "turbo-proxy", "--server", "--listen", "127.0.0.1:0",
		"--backend", "127.0.0.1:1", "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := logAttr(ready, "url")
	addr := logAttr(log.waitFor(t, "TurboTLS server proxy on"), "addr")
	c, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("not a TurboTLS datagram"))
	for deadline := clock.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		m := scrape(t, url)
		if m["ztls_turbo_datagrams_in_total"] >= 1 && m["ztls_turbo_dropped_total"] >= 1 {
			return
		}
		if clock.Now().After(deadline) {
			t.Fatalf("TurboTLS counters did not move: in %v, dropped %v", m["ztls_turbo_datagrams_in_total"], m["ztls_turbo_dropped_total"])
		}
	}
}
