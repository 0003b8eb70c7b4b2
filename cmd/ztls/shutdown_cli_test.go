package main

// serve's graceful stop (issue 16, point 15): SIGTERM stops accepting,
// lets a request in flight finish, closes idle keep-alive connections at
// once, saves the anti-replay register and exits 0.

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// serveBackend starts serve on s's port in front of backend and returns
// the process, its log and the address to dial.
func serveBackend(t *testing.T, s *site, backend string, extra ...string) (*exec.Cmd, *logLines, string) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	args := append([]string{"serve", "--listen", addr, "--zdata", s.zd, "--backend", backend}, extra...)
	_, log, cmd := startProc(t, "ZTLS on", args...)
	return cmd, log, addr
}

// sendRequest opens a TLS 1.3 connection to addr and sends one
// keep-alive request.
func sendRequest(t *testing.T, s *site, addr string) (*tls13.Conn, *bufio.Reader) {
	t.Helper()
	c, err := tls13.Dial("tcp", addr, &tls13.Config{RootCAs: s.authority.Pool(), ServerName: s.host})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+s.host+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// readBody reads one response and returns its body.
func readBody(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("response %d %q: %v", resp.StatusCode, body, err)
	}
	return string(body)
}

// waitExit waits for cmd's end (a stuck process fails the test instead
// of hanging it) and checks it exited 0.
func waitExit(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve ended with %v, want exit 0", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

// SIGTERM while the backend holds a request: the request completes with
// its response, then serve says how many connections it drained, saves
// the register and exits 0.
func TestCLIServeStopFinishesRequestInFlight(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release // held until serve is stopping
		io.WriteString(w, "slow answer")
	}))
	defer backend.Close()
	// The site's port after the backend's: a free port picked first could
	// be handed to the backend before serve binds it.
	s := newSite(t)
	cmd, log, addr := serveBackend(t, s, backend.URL, "--drain-timeout", "30s")
	state := filepath.Join(s.zd, zdata.StrikeStateFile)
	os.Remove(state) // only the clean stop below writes it

	_, br := sendRequest(t, s, addr)
	<-arrived
	cmd.Process.Signal(syscall.SIGTERM)
	if line := log.waitFor(t, "stopping: draining connections"); !strings.Contains(line, "open_conns=1") {
		t.Errorf("stop line without the open connection: %s", line)
	}
	close(release)
	if body := readBody(t, br); body != "slow answer" {
		t.Errorf("body %q", body)
	}
	waitExit(t, cmd)
	if _, err := os.Stat(state); err != nil {
		t.Errorf("the anti-replay register was not saved: %v", err)
	}
}

// An idle keep-alive connection does not hold the stop until the drain
// deadline: serve closes it at once and exits.
func TestCLIServeStopClosesIdleKeepAlive(t *testing.T) {
	s := newSite(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "fast answer")
	}))
	defer backend.Close()
	// Neither the drain deadline nor the idle timeout ends it.
	cmd, log, addr := serveBackend(t, s, backend.URL, "--drain-timeout", "1h", "--timeout", "1h")
	c, br := sendRequest(t, s, addr)
	if body := readBody(t, br); body != "fast answer" {
		t.Fatalf("body %q", body)
	}
	// The connection stays open, waiting for its next request.
	cmd.Process.Signal(syscall.SIGTERM)
	log.waitFor(t, "stopping: draining connections")
	waitExit(t, cmd) // long before the hour
	if n, err := br.ReadByte(); err == nil {
		t.Errorf("the idle connection read %q after the stop", n)
	}
	c.Close()
}

// Negative connection limits and timeouts are refused with the valid
// range.
func TestCLIServeRefusesNegativeLimits(t *testing.T) {
	ztlsBinary(t)
	for _, c := range []struct{ flag, value, want string }{
		{"--max-conns", "-1", "--max-conns -1: want 0 (no limit) or more"},
		{"--max-conns-per-ip", "-5", "--max-conns-per-ip -5: want 0 (no limit) or more"},
		{"--max-conns-per-net", "-1", "--max-conns-per-net -1: want 0 (no limit) or more"},
		{"--drain-timeout", "-1s", "--drain-timeout -1s: want 0"},
		{"--handshake-timeout", "0s", "--handshake-timeout 0s: want more than 0"},
	} {
		_, stderr, code := runCode(t, "serve", "--listen", "127.0.0.1:0", c.flag, c.value)
		if code == 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %s %s: exit %d, %q; want %q", c.flag, c.value, code, stderr, c.want)
		}
	}
}

// A second signal cuts the connections still draining: serve exits 0 at
// once, says how many it cut, and still saves the register.
func TestCLIServeSecondSignalCuts(t *testing.T) {
	s := newSite(t)
	arrived, release := make(chan struct{}), make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	}))
	defer backend.Close()
	defer close(release) // before backend.Close, which waits for the handler
	cmd, log, addr := serveBackend(t, s, backend.URL, "--drain-timeout", "1h", "--timeout", "1h")
	state := filepath.Join(s.zd, zdata.StrikeStateFile)
	os.Remove(state)
	sendRequest(t, s, addr)
	<-arrived
	cmd.Process.Signal(syscall.SIGTERM)
	log.waitFor(t, "stopping: draining connections")
	cmd.Process.Signal(syscall.SIGTERM)
	if line := log.waitFor(t, "cut the connections still open"); !strings.Contains(line, "conns=1") {
		t.Errorf("cut line without the count: %s", line)
	}
	waitExit(t, cmd)
	if _, err := os.Stat(state); err != nil {
		t.Errorf("the anti-replay register was not saved: %v", err)
	}
}
