package main

// What a first-time user tripped over in connect and get, through the
// built binary against real servers on loopback: get stops at the
// response's end, connect half-closes at the input's end, a timeout or a
// cut response is a failure (exit 1, with or without --json, which then
// still prints the report), and errors say what to do.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// uxResult is one run of the binary.
type uxResult struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// uxRun runs the binary with stdin (nil: the null device) and returns
// what it printed and its exit code; it never takes more than 60 s.
func uxRun(t *testing.T, stdin io.Reader, args ...string) uxResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ztlsBinary(t), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	begin := clock.Now()
	err := cmd.Run()
	r := uxResult{stdout: stdout.String(), stderr: stderr.String(), took: clock.Since(begin)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("ztls %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// uxReport parses --json output.
func uxReport(t *testing.T, r uxResult) dial.Report {
	t.Helper()
	var rep dial.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("--json printed no report (%v):\nstdout: %s\nstderr: %s", err, r.stdout, r.stderr)
	}
	return rep
}

// uxPKI is a CA and a leaf for localhost and 127.0.0.1, written as PEM.
type uxPKI struct{ ca, cert, key string }

func newUXPKI(t *testing.T) uxPKI {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256"}).WritePEM(t, dir)
	return uxPKI{ca: ca.WritePEM(t, dir), cert: cert, key: key}
}

// client is the flags every test connection shares: no DNS, plain TLS 1.3.
func (p uxPKI) client(extra ...string) []string {
	return append([]string{"--ca", p.ca, "--resolver", "127.0.0.1:9", "--mode", "tls"}, extra...)
}

// startTLS13 runs a crypto/tls server (TLS 1.3) whose connections are
// handled by serve; it returns its address.
func startTLS13(t *testing.T, p uxPKI, serve func(c *tls.Conn, path string)) string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(p.cert, p.key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { close(done); ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				line, err := bufio.NewReader(tc).ReadString('\n')
				if err != nil {
					return
				}
				path := ""
				if f := strings.Fields(line); len(f) > 1 {
					path = f[1]
				}
				serve(tc, path)
				select { // hold the connection until the test ends
				case <-done:
				case <-time.After(time.Minute):
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestUXGetStopsAtResponseEnd: get ends at the response's Content-Length
// or last chunk while the server keeps the connection open; a response
// cut short or not finished within --timeout is a failure, exit 1 with
// and without --json, and --json still prints the report with its error.
func TestUXGetStopsAtResponseEnd(t *testing.T) {
	p := newUXPKI(t)
	addr := startTLS13(t, p, func(c *tls.Conn, path string) {
		switch path {
		case "/length":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")
		case "/chunked":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n3\r\nlo\n\r\n0\r\n\r\n")
		case "/cut":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello\n")
			c.Close() // with close_notify: the length says it is cut
		case "/late":
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello\n")
		}
	})
	url := "https://" + addr
	for _, path := range []string{"/length", "/chunked"} {
		r := uxRun(t, nil, append([]string{"get", url + path}, p.client("--timeout", "20s")...)...)
		if r.code != 0 || !strings.HasSuffix(r.stdout, "\r\n\r\nhello\n") || r.took > 10*time.Second {
			t.Fatalf("get %s: exit %d after %v\nstdout: %q\nstderr: %s", path, r.code, r.took, r.stdout, r.stderr)
		}
		if path == "/chunked" && strings.Contains(r.stdout, "\r\n3\r\n") {
			t.Fatalf("get %s printed the chunk framing: %q", path, r.stdout)
		}
	}
	// connect with an HTTP request stops at the response's end too, and
	// does not half-close (HTTP servers may take that for the client leaving).
	r := uxRun(t, nil, append([]string{"connect", addr, "--data", "GET /length HTTP/1.1\r\nHost: localhost\r\n\r\n"},
		p.client("--timeout", "20s")...)...)
	if r.code != 0 || !strings.HasSuffix(r.stdout, "\r\n\r\nhello\n") || r.took > 10*time.Second {
		t.Fatalf("connect --data 'GET /length HTTP/1.1...': exit %d after %v\nstdout: %q\nstderr: %s", r.code, r.took, r.stdout, r.stderr)
	}
	for _, tc := range []struct{ path, says string }{
		{"/cut", "cut short: the connection ended (46 bytes received, after 6 of its 100 body bytes (Content-Length))"},
		{"/late", "timed out waiting for the response (46 bytes received, after 6 of its 100 body bytes (Content-Length)): the server neither finished the response nor closed the connection within --timeout 1s"},
	} {
		args := append([]string{"get", url + tc.path}, p.client("--timeout", "1s")...)
		r := uxRun(t, nil, args...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.says) {
			t.Fatalf("get %s: exit %d, want 1 and %q\nstderr: %s", tc.path, r.code, tc.says, r.stderr)
		}
		j := uxRun(t, nil, append(args, "--json")...)
		if rep := uxReport(t, j); j.code != r.code || !strings.Contains(rep.Error, tc.says) || rep.ResponseBytes != 46 {
			t.Fatalf("get %s --json: exit %d (without --json %d), error %q, %d bytes", tc.path, j.code, r.code, rep.Error, rep.ResponseBytes)
		}
	}
}

// TestUXGetZTLSBackend: get over ZTLS against `serve --backend` prints
// the page and exits 0 at the response's end, not after --timeout.
func TestUXGetZTLSBackend(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "page from the backend\n")
	}))
	defer backend.Close()
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	dnsAddr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0"), "addr")
	start(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd,
		"--backend", backend.URL, "--early-window", "300ms")
	time.Sleep(350 * time.Millisecond) // early data is refused for one window after start
	r := uxRun(t, nil, "get", fmt.Sprintf("https://%s:%d/", s.host, s.port), "--resolver", dnsAddr, "--ca", s.ca,
		"--zdata-budget", "2s", "--timeout", "20s", "--json")
	rep := uxReport(t, r)
	if r.code != 0 || rep.Error != "" || r.took > 10*time.Second {
		t.Fatalf("exit %d after %v, error %q\nstderr: %s", r.code, r.took, rep.Error, r.stderr)
	}
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || !strings.Contains(r.stderr, "page from the backend") {
		t.Fatalf("mode %s (%s), early %+v\nstderr: %s", rep.Mode, rep.FallbackReason, rep.EarlyData, r.stderr)
	}
}

// TestUXConnectEchoHalfClose: after --data or standard input's end,
// connect half-closes, so an echo server ends the exchange at once (exit
// 0); with nothing sent and nothing back, the report says so rather than
// "first byte at 0.0 ms".
func TestUXConnectEchoHalfClose(t *testing.T) {
	p := newUXPKI(t)
	port := boundPort(t, start(t, "serving TLS 1.3", "serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key, "--echo"))
	addr := "127.0.0.1:" + port
	for _, tc := range []struct {
		name  string
		stdin io.Reader
		args  []string
		want  string
	}{
		{"--data", nil, []string{"--data", "ping"}, "ping"},
		{"pipe", strings.NewReader("line one\nline two\n"), nil, "line one\nline two\n"},
		{"nothing", nil, nil, ""},
	} {
		r := uxRun(t, tc.stdin, append(append([]string{"connect", addr}, p.client("--timeout", "20s")...), tc.args...)...)
		if r.code != 0 || r.stdout != tc.want || r.took > 10*time.Second {
			t.Fatalf("%s: exit %d after %v, stdout %q (want %q)\nstderr: %s", tc.name, r.code, r.took, r.stdout, tc.want, r.stderr)
		}
		if tc.want == "" && (!strings.Contains(r.stderr, "no response byte") || strings.Contains(r.stderr, "first byte at")) {
			t.Fatalf("%s: report:\n%s", tc.name, r.stderr)
		}
	}
}

// TestUXConnectTimeoutIsFailure: a server that never answers nor closes
// makes connect fail after --timeout, saying so, exit 1 with and without
// --json.
func TestUXConnectTimeoutIsFailure(t *testing.T) {
	p := newUXPKI(t)
	addr := startTLS13(t, p, func(*tls.Conn, string) {})
	args := append([]string{"connect", addr, "--data", "hello?\n"}, p.client("--timeout", "1s")...)
	r := uxRun(t, nil, args...)
	const says = "timed out waiting for the response (0 bytes received): the server neither finished the response nor closed the connection within --timeout 1s"
	if r.code != 1 || !strings.Contains(r.stderr, says) {
		t.Fatalf("exit %d, stderr: %s", r.code, r.stderr)
	}
	j := uxRun(t, nil, append(args, "--json")...)
	if rep := uxReport(t, j); j.code != 1 || !strings.Contains(rep.Error, says) || rep.TLS.Version != "TLS 1.3" {
		t.Fatalf("--json: exit %d, report %+v", j.code, rep)
	}
}

// TestUXErrorsSayTheCure: each error names the symptom and what to do,
// exits 1, and with --json the report carries the same words.
func TestUXErrorsSayTheCure(t *testing.T) {
	p := newUXPKI(t)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	old.StartTLS()
	defer old.Close()
	port := boundPort(t, start(t, "serving TLS 1.3", "serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key, "--respond", "hi"))
	ztlsAddr := "127.0.0.1:" + port
	silent, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	plainAddr := plain.Listener.Addr().String()
	noCA := []string{"--resolver", "127.0.0.1:9", "--mode", "tls", "--timeout", "10s"}
	// Not an error: an HTTP request to a server that does not answer in
	// HTTP gets its answer as it comes.
	if r := uxRun(t, nil, append([]string{"connect", ztlsAddr, "--data", "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"}, p.client()...)...); r.code != 0 || r.stdout != "hi" {
		t.Fatalf("HTTP request to --respond hi: exit %d, stdout %q\nstderr: %s", r.code, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		says []string
		json bool // a connection failure: --json prints the report
	}{
		{"plain HTTP server", append([]string{"connect", plainAddr, "--data", "x"}, p.client()...),
			[]string{"answered in plain HTTP, not TLS", "not a TLS server? for plain HTTP use http://"}, true},
		{"plain HTTP server, get", append([]string{"get", "https://" + plainAddr + "/"}, p.client()...),
			[]string{"not a TLS server? for plain HTTP use http://"}, true},
		{"TLS 1.2 only", append([]string{"connect", old.Listener.Addr().String(), "--data", "x"}, p.client()...),
			[]string{"protocol_version", "speaks only TLS 1.2 or older", "enable TLS 1.3 on the server"}, true},
		{"unknown CA", append([]string{"connect", ztlsAddr, "--data", "x"}, noCA...),
			[]string{"unknown authority", "pass the CA that issued it with --ca FILE"}, true},
		{"wrong name", append([]string{"connect", ztlsAddr, "--data", "x", "--servername", "wrong.example"}, p.client()...),
			[]string{"wrong.example", "pass it with --servername NAME"}, true},
		{"handshake timeout", append([]string{"connect", silent.Addr().String(), "--data", "x"}, p.client("--timeout", "1s")...),
			[]string{"gave up after --timeout 1s"}, true},
		{"connection refused", append([]string{"connect", "127.0.0.1:1", "--data", "x"}, noCA...),
			[]string{"connection refused", "is a server listening on 127.0.0.1:1?"}, true},
		{"https:// to connect", []string{"connect", "https://" + ztlsAddr + "/x"},
			[]string{"not a URL", "use 'ztls get https://" + ztlsAddr + "/x'", "'ztls connect " + ztlsAddr + "'"}, false},
		{"http:// to get", []string{"get", "http://" + plainAddr + "/"},
			[]string{"is plain HTTP", "give https://" + plainAddr + "/"}, false},
		{"unknown flag", []string{"connect", ztlsAddr, "--verbose"},
			[]string{"unknown flag: --verbose", "see 'ztls connect --help'"}, false},
		{"no argument", []string{"get"}, []string{"get takes one URL", "see 'ztls get --help'"}, false},
		{"negative --max-bytes", []string{"connect", ztlsAddr, "--max-bytes", "-5"},
			[]string{"--max-bytes -5", "at least 1"}, false},
		{"zero --timeout", []string{"connect", ztlsAddr, "--timeout", "0s"}, []string{"--timeout 0s", "above zero"}, false},
		{"huge --pad", []string{"connect", ztlsAddr, "--pad", "99999999"}, []string{"--pad 99999999", "16384"}, false},
		{"bad suite", []string{"connect", ztlsAddr, "--ciphers", "aes"},
			[]string{"unknown cipher suite \"aes\"", "TLS_AES_128_GCM_SHA256", "TLS_CHACHA20_POLY1305_SHA256"}, false},
	} {
		r := uxRun(t, nil, tc.args...)
		for _, s := range tc.says {
			if r.code != 1 || !strings.Contains(r.stderr, s) {
				t.Errorf("%s: exit %d, want 1 and %q in:\n%s", tc.name, r.code, s, r.stderr)
			}
		}
		if !tc.json {
			continue
		}
		j := uxRun(t, nil, append(tc.args, "--json")...)
		rep := uxReport(t, j)
		for _, s := range tc.says {
			if j.code != r.code || !strings.Contains(rep.Error, s) {
				t.Errorf("%s --json: exit %d (%d without), want %q in the report's error %q", tc.name, j.code, r.code, s, rep.Error)
			}
		}
	}
}

// TestUXConnectDefaultPort: HOST without a port means port 443.
func TestUXConnectDefaultPort(t *testing.T) {
	for in, want := range map[string]string{
		"example.com": "example.com:443", "example.com:8443": "example.com:8443",
		"127.0.0.1": "127.0.0.1:443", "::1": "[::1]:443", "[::1]": "[::1]:443", "[::1]:8443": "[::1]:8443",
	} {
		if got, err := connectAddr(in); err != nil || got != want {
			t.Errorf("connectAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"example.com:0", "example.com:https", ":443", "https://example.com/", "ftp://example.com"} {
		if got, err := connectAddr(bad); err == nil {
			t.Errorf("connectAddr(%q) = %q, want an error", bad, got)
		}
	}
	// Through the binary: the connection goes to port 443.
	r := uxRun(t, nil, "connect", "127.0.0.1", "--data", "x", "--resolver", "127.0.0.1:9", "--mode", "tls", "--timeout", "5s", "--json")
	if rep := uxReport(t, r); !strings.Contains(rep.Error+rep.Address, "127.0.0.1:443") {
		t.Fatalf("connect 127.0.0.1: %+v", rep)
	}
}

// TestUXVersion: --version names the module and the commit the binary was
// built from (this machine's go env may say -buildvcs=false: build with
// it on, as a release build does).
func TestUXVersion(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ztls")
	if out, err := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^commit ([0-9a-f]{40})`).FindStringSubmatch(string(out))
	if !strings.Contains(string(out), "(module github.com/ztls-project/ztls)") || m == nil {
		t.Fatalf("--version printed:\n%s", out)
	}
	if err := exec.Command("git", "cat-file", "-e", m[1]+"^{commit}").Run(); err != nil {
		t.Fatalf("--version's commit %s is not in this repository: %v", m[1], err)
	}
	// Without VCS stamping it still names the module and says why no commit.
	if r := uxRun(t, nil, "--version"); r.code != 0 || !strings.Contains(r.stdout, "github.com/ztls-project/ztls") {
		t.Fatalf("--version: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// --sess-out over an existing file readable by others leaves it 0600.
func TestUXSessOutPrivate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sess.bin")
	if err := os.WriteFile(path, []byte("an older, longer ticket"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writePrivate(path, []byte("ticket")); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); st.Mode().Perm() != 0o600 || string(b) != "ticket" {
		t.Fatalf("mode %v, content %q; want 0600 and \"ticket\"", st.Mode().Perm(), b)
	}
}
