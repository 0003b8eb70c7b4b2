package main

// Issue 27, items 3 and 4: what an operator of `ztls serve` and `ztls dns
// serve` sees. The metrics of a real `serve --backend` process after a
// ZTLS early request through it, the health endpoints, the series each
// server exports, and the startup checks each with the log line it
// writes.

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// httpGet is one GET: its status and body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get(url)
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

// hasSeries says whether a scrape holds a series of the metric name.
func hasSeries(m map[string]float64, name string) bool {
	for k := range m {
		if k == name || strings.HasPrefix(k, name+"{") {
			return true
		}
	}
	return false
}

// `serve --backend` (the systemd unit's mode): the early request that
// reaches the backend as Early-Data: 1 counts its bytes, as --respond's
// do; the process says what it is and that it is alive and ready.
func TestCLIServeBackendMetrics(t *testing.T) {
	s := newSite(t)
	var mu sync.Mutex
	var early []string
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		early = append(early, r.URL.Path+" Early-Data: "+r.Header.Get("Early-Data"))
		mu.Unlock()
		io.WriteString(w, "hello")
	}))
	defer backend.Close()
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	ready, _, cmd := startProc(t, "metrics on", "serve", "--listen", addr, "--zdata", s.zd, "--backend", backend.URL,
		"--early-window", "300ms", "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := logAttr(ready, "url")
	base := strings.TrimSuffix(url, "/metrics")

	req := "GET /early HTTP/1.1\r\nHost: www.ztls.test\r\n\r\n"
	// Early data is refused for one window after the start: deliver
	// flights until one is accepted.
	var m map[string]float64
	accepted := `ztls_ztls_offers_total{reason="",result="accepted"}`
	for i := 0; ; i++ {
		deliver(t, addr, ztlsFlight(t, s, []byte(req)))
		if m = scrape(t, url); m[accepted] >= 1 {
			break
		}
		if i == 100 {
			t.Fatalf("no ZTLS offer accepted: %v", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The proxy reads the early data before it forwards the request.
	if got := m["ztls_early_data_bytes_total"]; got != float64(len(req)) {
		t.Errorf("ztls_early_data_bytes_total = %v after one early request of %d bytes", got, len(req))
	}
	for i := 0; ; i++ {
		mu.Lock()
		got := strings.Join(early, ", ")
		mu.Unlock()
		if got == "/early Early-Data: 1" {
			break
		}
		if i == 200 || got != "" {
			t.Fatalf("the backend received %q, want the early request once, marked Early-Data: 1", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	info := ""
	for k, v := range m {
		if strings.HasPrefix(k, "ztls_build_info{") && v == 1 {
			info = k
		}
	}
	for _, l := range []string{"version=", "revision=", "goversion=", "goos=", "goarch="} {
		if !strings.Contains(info, l) {
			t.Errorf("ztls_build_info %q: no %s label", info, strings.TrimSuffix(l, "="))
		}
	}
	if hasSeries(m, "ztls_dns_queries_total") {
		t.Error("serve exports ztls_dns_queries_total, which it never updates")
	}
	if code, body := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz of a serving server: %d %q", code, body)
	}
}

// `dns serve` exports the DNS series it updates and none of a TLS
// server's, which it has no way to move.
func TestCLIDNSServeSeries(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	ready, log, cmd := startProc(t, "metrics on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0",
		"--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := logAttr(ready, "url")
	dnsAddr := logAttr(log.waitFor(t, "serving udp on"), "addr")
	log.waitFor(t, "zones")
	run(t, "lookup", "www.ztls.test", "--resolver", dnsAddr, "--type", "A")
	m := scrape(t, url)
	for _, name := range []string{"ztls_handshakes_total", "ztls_handshake_failures_total", "ztls_ztls_offers_total",
		"ztls_early_data_bytes_total", "ztls_strike_register_errors_total"} {
		if hasSeries(m, name) {
			t.Errorf("dns serve exports %s, which it never updates", name)
		}
	}
	for _, name := range []string{`ztls_dns_queries_total{qtype="A",rcode="NOERROR"}`, "ztls_zdata_live_keys{service=\"www.ztls.test:" + strconv.Itoa(s.port) + "\"}"} {
		if m[name] < 1 {
			t.Errorf("%s = %v, want at least 1", name, m[name])
		}
	}
	// The same names as serve's for the same things.
	for _, name := range []string{"ztls_build_info", "ztls_conns_open", "ztls_conns_refused_per_ip_total", "ztls_conns_refused_per_net_total"} {
		if !hasSeries(m, name) {
			t.Errorf("no %s", name)
		}
	}
	base := strings.TrimSuffix(url, "/metrics")
	if code, body := httpGet(t, base+"/healthz"); code != 200 {
		t.Errorf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz: %d %q", code, body)
	}
}

// A certificate outside its validity is said at start with the file and
// the date, as nginx does, and the server starts; its expiry is
// exported. The server's clock is moved (ZTLS_CLOCK_OFFSET), not the
// certificate's dates.
func TestCLIServeCertificateValidity(t *testing.T) {
	dir := t.TempDir()
	now := clock.Now()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(72 * time.Hour)})
	cert, key := leaf.WritePEM(t, dir)
	notAfter := leaf.Cert.NotAfter.UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		name, offset, line, attr, value string
	}{
		{"expired", "96h", "the certificate has expired", "not_after", notAfter},
		{"not yet valid", "-2h", "the certificate is not valid yet", "not_before", leaf.Cert.NotBefore.UTC().Format(time.RFC3339)},
		{"expires soon", "70h", "the certificate expires soon", "not_after", notAfter}, // its last tenth
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(clock.EnvOffset, tc.offset)
			line, log, cmd := startProc(t, tc.line, "serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key,
				"--metrics", "127.0.0.1:0")
			defer stopCmd(cmd)
			t.Log(line)
			if logAttr(line, "file") != cert || logAttr(line, tc.attr) != tc.value {
				t.Errorf("the log line names file=%q %s=%q, want %q and %q", logAttr(line, "file"), tc.attr, logAttr(line, tc.attr), cert, tc.value)
			}
			url := logAttr(log.waitFor(t, "metrics on"), "url")
			if got := scrape(t, url)["ztls_certificate_expiry_timestamp_seconds"]; got != float64(leaf.Cert.NotAfter.Unix()) {
				t.Errorf("ztls_certificate_expiry_timestamp_seconds = %v, want %d", got, leaf.Cert.NotAfter.Unix())
			}
		})
	}
}

// serveArgs is a ZTLS server of site s with a strike register in Redis.
func serveArgs(s *site, redisURL string, extra ...string) []string {
	return append([]string{"serve", "--listen", "127.0.0.1:" + strconv.Itoa(s.port), "--zdata", s.zd, "--respond", "hello",
		"--strike-register", redisURL}, extra...)
}

// Redis down at start: a warning that early data is refused until Redis
// is reachable; the server serves, and is not ready.
func TestCLIServeRegisterDown(t *testing.T) {
	s := newSite(t)
	down := "redis://127.0.0.1:" + strconv.Itoa(freePort(t))
	line, log, cmd := startProc(t, "strike register's Redis cannot be used", serveArgs(s, down, "--metrics", "127.0.0.1:0")...)
	defer stopCmd(cmd)
	t.Log(line)
	if !strings.Contains(line, "early data is refused until it can") || logAttr(line, "url") != down {
		t.Errorf("the warning: %s", line)
	}
	url := logAttr(log.waitFor(t, "metrics on"), "url")
	for i := 0; ; i++ { // ready is set once the accept loop runs
		code, body := httpGet(t, strings.TrimSuffix(url, "/metrics")+"/readyz")
		if code == 503 && strings.Contains(body, "strike register") {
			break
		}
		if code != 503 || i == 100 {
			t.Fatalf("/readyz with Redis down: %d %q", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// An evicting maxmemory-policy: a warning naming the policy and the fix.
func TestCLIServeRegisterEvicting(t *testing.T) {
	s := newSite(t)
	redis, _ := startRedis(t, "--maxmemory-policy", "allkeys-lru")
	line, _, cmd := startProc(t, "may evict its entries", serveArgs(s, "redis://"+redis)...)
	defer stopCmd(cmd)
	t.Log(line)
	if logAttr(line, "maxmemory-policy") != "allkeys-lru" || !strings.Contains(line, "CONFIG SET maxmemory-policy noeviction") {
		t.Errorf("the warning: %s", line)
	}
}

// A wrong password is an error at start, not found at the first flight;
// the server still serves TLS 1.3.
func TestCLIServeRegisterWrongPassword(t *testing.T) {
	s := newSite(t)
	redis, _ := startRedis(t, "--requirepass", "right-password")
	line, _, cmd := startProc(t, "refused the login", serveArgs(s, "redis://:wrong-password@"+redis)...)
	defer stopCmd(cmd)
	t.Log(line)
	if !strings.Contains(line, "level=ERROR") || !strings.Contains(line, "WRONGPASS") || !strings.Contains(line, "password Redis expects") {
		t.Errorf("the error: %s", line)
	}
	if strings.Contains(line, "wrong-password") {
		t.Errorf("the password is shown: %s", line)
	}
}

// A fresh Redis: the warm-up starts at the server's start and the log
// says when it ends; a server started after it says the register is
// ready.
func TestCLIServeRegisterWarmUp(t *testing.T) {
	s := newSite(t)
	redis, _ := startRedis(t)
	args := serveArgs(s, "redis://"+redis, "--early-window", "300ms", "--max-clock-skew", "100ms")
	line, _, cmd := startProc(t, "early data is refused during its warm-up", args...)
	t.Log(line)
	until, err := time.Parse(time.RFC3339, logAttr(line, "until"))
	if err != nil {
		t.Fatalf("no until= in %s", line)
	}
	stopCmd(cmd)
	if until.Before(procNow(t).Add(-time.Minute)) {
		t.Errorf("until=%s is long past", until)
	}
	// The RFC 3339 seconds end at most 1 s after the warm-up. until is an
	// instant of the servers' clock (shifted under CLOCK_AT), so the wait
	// is measured on it, not on the system clock.
	wait := until.Add(time.Second).Sub(procNow(t))
	if wait > 30*time.Second {
		t.Fatalf("until=%s is %v ahead of the servers' clock; the warm-up is W + skew (under 1 s here)", until, wait)
	}
	time.Sleep(wait)
	line, _, cmd = startProc(t, "strike register's Redis is ready", args...)
	defer stopCmd(cmd)
	t.Log(line)
}

// Z-data for an ALPN protocol the server never negotiates: every ZTLS
// offer is rejected, said at start as the port mismatch is.
func TestCLIServeALPNMismatch(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, dir)
	port := strconv.Itoa(freePort(t))
	zd := filepath.Join(dir, "zd")
	run(t, "zdata", "new", "--host", "www.ztls.test", "--port", port, "--cert", cert, "--key", key, "--out", zd, "--alpn", "h2")
	for _, tc := range []struct {
		name  string
		extra []string
		fix   string
	}{
		{"no --alpn", nil, "add --alpn h2"},
		{"--alpn http/1.1", []string{"--alpn", "http/1.1"}, "add --alpn h2,http/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line, _, cmd := startProc(t, "every ZTLS offer will be rejected",
				append([]string{"serve", "--listen", "127.0.0.1:" + port, "--zdata", zd, "--respond", "hello"}, tc.extra...)...)
			defer stopCmd(cmd)
			t.Log(line)
			if msg := logAttr(line, "msg"); !strings.Contains(msg, `ALPN "h2"`) || !strings.Contains(msg, tc.fix) || !strings.Contains(line, "level=WARN") {
				t.Errorf("the warning: %s", line)
			}
		})
	}
}

// checkServeALPN warns exactly when the ALPN the server negotiates can
// differ from the Z-data's.
func TestCheckServeALPN(t *testing.T) {
	for _, tc := range []struct {
		zdata  string
		server []string
		warn   string
	}{
		{"", nil, ""},
		{"h2", []string{"h2"}, ""},
		{"h2", []string{"h2", "http/1.1"}, ""},
		{"http/1.1", []string{"h2", "http/1.1"}, ""},
		{"h2", nil, "every ZTLS offer will be rejected"},
		{"h2", []string{"http/1.1"}, "add --alpn h2,http/1.1"},
		{"", []string{"h2"}, "names no ALPN protocol"},
	} {
		err := checkServeALPN(tc.zdata, tc.server, "zd")
		if (err == nil) != (tc.warn == "") || (err != nil && !strings.Contains(err.Error(), tc.warn)) {
			t.Errorf("Z-data %q, server %q: %v, want %q", tc.zdata, tc.server, err, tc.warn)
		}
	}
}
