//go:build linux

package main

// Interop with headless Chromium (Debian package chromium: BoringSSL, with
// GREASE and X25519MLKEM768 key shares) against `ztls serve --backend`.
// Chromium trusts the server only through --ignore-certificate-errors-spki-list
// with the leaf's SPKI hash (the certificate is otherwise unknown to it), so
// the handshake's signature check is real. What was negotiated is read from
// the server's side: `ztls serve -v` prints each connection's
// ConnectionState (mode, suite, group).
//
// The page holds three stylesheets the backend answers only once all three
// requests are in (or after a few seconds): HTTP/1.1 then needs three
// connections. Chromium may open a second one speculatively with the
// first (a full handshake too), but the third is opened after the page
// arrived on the first, behind its ticket, and resumes.

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// chromiumBackend serves the page and its three stylesheets.
func chromiumBackend(t *testing.T) string {
	t.Helper()
	var mu sync.Mutex
	both := make(chan struct{})
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// Stylesheets in the head are fetched at once and in parallel
		// (images may wait: Chromium delays low-priority requests).
		fmt.Fprint(w, `<!doctype html><html><head><link rel="stylesheet" href="/a.css">`+
			`<link rel="stylesheet" href="/b.css"><link rel="stylesheet" href="/c.css"></head><body><p id="p">page-from-ztls-backend</p></body></html>`)
	})
	css := func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if n++; n == 3 {
			close(both)
		}
		mu.Unlock()
		select { // all three in flight: three connections
		case <-both:
		case <-time.After(5 * time.Second):
		}
		w.Header().Set("Content-Type", "text/css")
		fmt.Fprint(w, "p { color: black }\n")
	}
	mux.HandleFunc("/a.css", css)
	mux.HandleFunc("/b.css", css)
	mux.HandleFunc("/c.css", css)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// chromiumFetch loads url in headless Chromium and returns the DOM. flags
// go before the URL (e.g. --enable-features=...).
//
// Chromium abandons a load with net::ERR_NETWORK_CHANGED when a network
// interface appears or goes while it runs; other packages' tests (the
// testbed's namespaces and TUN devices) do that under `go test ./...`.
// Such a load is tried again, at most twice, with a new profile.
func chromiumFetch(t *testing.T, chromium, spki, url string, flags ...string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		args := []string{"--headless=new", "--no-sandbox", "--disable-gpu",
			"--no-first-run", "--disable-extensions", "--disable-background-networking",
			"--user-data-dir=" + t.TempDir(), "--ignore-certificate-errors-spki-list=" + spki,
			"--virtual-time-budget=10000", "--timeout=20000", "--dump-dom"}
		cmd := exec.Command(chromium, append(append(args, flags...), url)...)
		out, err := runBounded(cmd, 60*time.Second)
		if err != nil {
			t.Fatalf("chromium: %v\n%s", err, out)
		}
		if !strings.Contains(out, "ERR_NETWORK_CHANGED") || attempt == 3 {
			return out
		}
		t.Logf("chromium: the network changed during load %d (another test's interfaces); loading again", attempt)
	}
}

// runBounded runs cmd, killing it after limit; a hung browser fails the
// test instead of holding it. cmd runs in a process group of its own,
// which is killed when cmd ends too, so no helper process (renderer,
// crash handler) outlives it.
func runBounded(cmd *exec.Cmd, limit time.Duration) (string, error) {
	var buf strings.Builder
	cmd.Stdout = &buf
	cmd.Stderr = &buf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	pgid := cmd.Process.Pid
	defer syscall.Kill(-pgid, syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return buf.String(), err
	case <-time.After(limit):
		syscall.Kill(-pgid, syscall.SIGKILL)
		<-done
		return buf.String(), fmt.Errorf("killed after %v", limit)
	}
}

// lookChromium returns the chromium binary or skips the test.
func lookChromium(t *testing.T) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skipf("chromium is not installed (Debian package chromium): %v", err)
	}
	return chromium
}

// chromiumPKI is a server certificate for localhost that Chromium trusts
// only through its SPKI hash.
type chromiumPKI struct {
	certFile, keyFile string
	spki              string // base64 SHA-256 of the leaf's SubjectPublicKeyInfo
}

func newChromiumPKI(t *testing.T) chromiumPKI {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"localhost"}})
	cert, key := leaf.WritePEM(t, t.TempDir())
	sum := sha256.Sum256(leaf.Cert.RawSubjectPublicKeyInfo)
	return chromiumPKI{certFile: cert, keyFile: key, spki: base64.StdEncoding.EncodeToString(sum[:])}
}

func TestChromium(t *testing.T) {
	chromium := lookChromium(t)
	pki := newChromiumPKI(t)
	cert, key, spki := pki.certFile, pki.keyFile, pki.spki
	backend := chromiumBackend(t)

	suites := []tls13.CipherSuite{tls13.TLS_AES_128_GCM_SHA256, tls13.TLS_AES_256_GCM_SHA384, tls13.TLS_CHACHA20_POLY1305_SHA256}
	// Chromium sends shares for X25519MLKEM768 and x25519: the NIST
	// groups take a HelloRetryRequest.
	groups := []tls13.CurveID{tls13.X25519MLKEM768, tls13.X25519, tls13.P256, tls13.P384}
	for _, s := range suites {
		for _, g := range groups {
			suite, group := s.String(), g.String()
			t.Run(suite+"/"+group, func(t *testing.T) {
				ready, log := startLog(t, "serving TLS 1.3", "serve", "-v", "--listen", "127.0.0.1:0",
					"--cert", cert, "--key", key, "--backend", backend, "--ciphers", suite, "--groups", group)
				port := boundPort(t, ready)
				// HTTP/1.1, so that the three stylesheets held in flight
				// take three connections, one at least opened after the
				// first handshake's ticket (over h2 they share one, and
				// whether Chromium opens another is up to its timing).
				dom := chromiumFetch(t, chromium, spki, "https://localhost:"+port+"/", "--disable-http2")
				if !strings.Contains(dom, "page-from-ztls-backend") {
					t.Fatalf("chromium did not show the page:\n%s", dom)
				}
				// The server's view: a full handshake with the suite and
				// group, then one that resumed.
				// Chromium sends no share for the NIST groups: those
				// handshakes take a HelloRetryRequest, the others none.
				full := "TLS 1.3, " + suite + ", " + group + "\" hrr=" + strconv.FormatBool(g == tls13.P256 || g == tls13.P384)
				lines := waitServeLines(t, log, func(lines []string) bool {
					return hasLine(lines, full) && hasLine(lines, "resumed, "+suite+", ")
				})
				t.Logf("server:\n%s", strings.Join(lines, "\n"))
			})
		}
	}
}

// waitServeLines waits until the server's log lines satisfy ok and
// returns them (all of them, in the failure message too).
func waitServeLines(t *testing.T, log *logLines, ok func([]string) bool) []string {
	t.Helper()
	deadline := clock.Now().Add(10 * time.Second)
	for {
		log.mu.Lock()
		lines := append([]string(nil), log.lines...)
		log.mu.Unlock()
		if ok(lines) {
			return lines
		}
		if clock.Now().After(deadline) {
			t.Fatalf("ztls serve logged:\n%s", strings.Join(lines, "\n"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func hasLine(lines []string, s string) bool {
	for _, l := range lines {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
