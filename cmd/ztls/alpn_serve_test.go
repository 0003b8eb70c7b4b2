package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// The runs of issue 27 against a real `ztls serve --backend`: get --http2
// against a server without --alpn (Z-data without alpn=), three times;
// the transport offering HTTP/1.1 only (get --http2 --alpn http/1.1),
// and get, against the README's HTTP/2 setup (Z-data for h2, serve
// --alpn h2,http/1.1); get --http2 against Z-data and a server for
// HTTP/1.1. Each run is one connection, the backend receives each GET
// once, and serve logs no refused handshake, no HTTP/2 preface on an
// HTTP/1.1 connection and no broken pipe. Before (this test run on the
// previous commit): six connections for the first three runs, with
// "HTTP/2.0 request without ALPN h2"; two GETs at the backend for the
// second, and a broken pipe; for the last, "no ALPN protocol in common"
// and a TLS 1.3 connection, the server remembered as aborting on ztls.
func TestCLIServeALPNOneConnectionOneRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		zdataALPN  string // zdata new --alpn
		serveALPN  string // serve --alpn
		getArgs    []string
		runs       int
		wantMode   string // in serve's connection line
		wantPrefix string // the response's status line
	}{
		{"get --http2, server without --alpn", "", "", []string{"--http2"}, 3, "ZTLS accepted", "HTTP/1.1 200"},
		{"get --http2 --alpn http/1.1, Z-data for h2", "h2", "h2,http/1.1", []string{"--http2", "--alpn", "http/1.1"}, 1, "TLS 1.3", "HTTP/1.1 200"},
		{"get, Z-data for h2", "h2", "h2,http/1.1", nil, 1, "TLS 1.3", "HTTP/1.1 200"},
		{"get --http2, Z-data and server for http/1.1", "http/1.1", "http/1.1", []string{"--http2"}, 1, "ZTLS accepted", "HTTP/1.1 200"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ca := testpki.NewCA(t, "ecdsa-p256")
			leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
			cert, key := leaf.WritePEM(t, dir)
			caFile := ca.WritePEM(t, dir)
			port := strconv.Itoa(freePort(t))
			zd := filepath.Join(dir, "zd")
			args := []string{"zdata", "new", "--host", "www.ztls.test", "--port", port, "--cert", cert, "--key", key, "--out", zd}
			if tc.zdataALPN != "" {
				args = append(args, "--alpn", tc.zdataALPN)
			}
			run(t, args...)
			zone := filepath.Join(dir, "ztls.test.zone")
			writeFile(t, zone, testZone)
			dnsAddr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", zd, "--listen", "127.0.0.1:0"), "addr")

			var gets atomic.Int64
			backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gets.Add(1)
				io.WriteString(w, "hello")
			}))
			defer backend.Close()
			args = []string{"serve", "--listen", "127.0.0.1:" + port, "--zdata", zd, "--backend", backend.URL, "-v", "--early-window", "300ms"}
			if tc.serveALPN != "" {
				args = append(args, "--alpn", tc.serveALPN)
			}
			_, log := startLog(t, "ZTLS on", args...)
			time.Sleep(350 * time.Millisecond) // early data is refused for one window after start

			for i := range tc.runs {
				cmd := exec.Command(ztlsBinary(t), append([]string{"get", "https://www.ztls.test:" + port + "/y",
					"--resolver", dnsAddr, "--ca", caFile, "--zdata-budget", "2s"}, tc.getArgs...)...)
				cmd.Env = append(os.Environ(), "HOME="+dir)
				var stderr strings.Builder
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil || !strings.HasPrefix(string(out), tc.wantPrefix) {
					t.Fatalf("run %d: %v\n%s%s", i+1, err, out, stderr.String())
				}
			}
			time.Sleep(200 * time.Millisecond) // a second request or connection would be in by now
			if n := gets.Load(); n != int64(tc.runs) {
				t.Errorf("the backend received %d GETs in %d runs", n, tc.runs)
			}
			log.mu.Lock()
			defer log.mu.Unlock()
			all := strings.Join(log.lines, "\n")
			conns := 0
			for _, line := range log.lines {
				if strings.Contains(line, "msg=connection ") {
					conns++
					if !strings.Contains(line, tc.wantMode) {
						t.Errorf("serve logged %q, want %q", line, tc.wantMode)
					}
				}
			}
			if conns != tc.runs {
				t.Errorf("serve logged %d connections in %d runs:\n%s", conns, tc.runs, all)
			}
			for _, bad := range []string{"connection ended", "without ALPN", "no ALPN protocol in common", "broken pipe"} {
				if strings.Contains(all, bad) {
					t.Errorf("serve logged %q:\n%s", bad, all)
				}
			}
		})
	}
}
