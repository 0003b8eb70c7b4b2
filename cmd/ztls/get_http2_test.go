package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// get --http2 over ZTLS against serve --backend: the GET goes early as
// HTTP/2 frames, the proxy forwards it marked Early-Data: 1, the
// response comes back over HTTP/2, the report says ztls, and the
// server's ztls_early_data_bytes_total counts every early byte the
// client sent (the HTTP/2 proxy's count, as the HTTP/1.1 proxy's in
// TestCLIServeBackendMetrics).
func TestCLIGetHTTP2OverZTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	port := freePort(t)
	zd := filepath.Join(dir, "zd")
	run(t, "zdata", "new", "--host", "www.ztls.test", "--port", strconv.Itoa(port), "--cert", cert, "--key", key, "--out", zd, "--alpn", "h2")
	zone := filepath.Join(dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", zd, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")

	early := make(chan string, 4)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		early <- r.Header.Get("Early-Data")
		io.WriteString(w, "hello over h2")
	}))
	defer backend.Close()
	// "ZTLS on" (listening) is logged before "metrics on".
	ready, _, srv := startProc(t, "metrics on", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--zdata", zd,
		"--backend", backend.URL, "--alpn", "h2,http/1.1", "--metrics", "127.0.0.1:0")
	defer stopCmd(srv)
	metricsURL := logAttr(ready, "url")

	cmd := exec.Command(ztlsBinary(t), "get", "https://www.ztls.test:"+strconv.Itoa(port)+"/", "--resolver", dnsAddr, "--ca", caFile,
		"--http2", "--json", "--zdata-budget", "2s")
	cmd.Env = append(os.Environ(), "HOME="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("get --http2: %v\n%s", err, stderr.String())
	}
	var rep dial.Report
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.TLS.ALPN != "h2" || rep.ResponseBytes != len("hello over h2") {
		t.Fatalf("report: mode %s (%s), early %+v, alpn %q, %d bytes", rep.Mode, rep.FallbackReason, rep.EarlyData, rep.TLS.ALPN, rep.ResponseBytes)
	}
	if resp := stderr.String(); !strings.HasPrefix(resp, "HTTP/2.0 200 OK\r\n") || !strings.HasSuffix(resp, "hello over h2") {
		t.Fatalf("response:\n%s", resp)
	}
	if got := <-early; got != "1" {
		t.Fatalf("the backend saw Early-Data %q, want 1", got)
	}
	if rep.EarlyData.Bytes == 0 {
		t.Fatal("the report counts no early bytes")
	}
	if got := scrape(t, metricsURL)["ztls_early_data_bytes_total"]; got != float64(rep.EarlyData.Bytes) {
		t.Fatalf("ztls_early_data_bytes_total = %v, the client sent %d early bytes", got, rep.EarlyData.Bytes)
	}
}

// get --http2 --json prints a report with its error when no connection
// can be made, and exits 1, as get does.
func TestCLIGetHTTP2JSONOnFailure(t *testing.T) {
	port := freePort(t) // nothing listens there
	cmd := exec.Command(ztlsBinary(t), "get", "https://127.0.0.1:"+strconv.Itoa(port)+"/", "--insecure", "--http2", "--json", "--mode", "tls", "--timeout", "5s")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.Output()
	if err == nil {
		t.Fatal("get --http2 to a closed port succeeded")
	}
	var rep dial.Report
	if jerr := json.Unmarshal(out, &rep); jerr != nil || rep.Error == "" {
		t.Fatalf("no JSON report with an error: %v %q", jerr, out)
	}
}
