package main

// Issue 27, items 5 and 7, through the built binary against a real
// `ztls serve --backend` and `ztls dns serve` on loopback: connect
// completes a request line given alone and fails when the server closes
// without a response; --resolver is repeatable and ZTLS_RESOLVER is
// honoured; --dns-servername reaches a DNS-over-TLS resolver by name;
// connect --showcerts prints the chain; get takes curl's -H, -X, -d, -I,
// -o, --fail and --resolve, over HTTP/1.1 and --http2, and a request
// with a body reaches the backend once.

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// curlRequest is one request the backend received.
type curlRequest struct {
	method, path string
	header       http.Header
	host         string
	body         string
}

// curlBackend keeps every request; /missing is a 404.
type curlBackend struct {
	mu   sync.Mutex
	reqs []curlRequest
}

func (b *curlBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.reqs = append(b.reqs, curlRequest{r.Method, r.URL.Path, r.Header.Clone(), r.Host, string(body)})
	b.mu.Unlock()
	if r.URL.Path == "/missing" {
		http.Error(w, "no such page", http.StatusNotFound)
		return
	}
	io.WriteString(w, "page "+r.URL.Path+" "+string(body))
}

// on returns the requests received for path.
func (b *curlBackend) on(path string) []curlRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []curlRequest
	for _, r := range b.reqs {
		if r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// curlWorld is www.ztls.test with Z-data (no alpn=), served by ztls dns
// serve (UDP, and DNS over TLS with a certificate for dns.ztls.test only)
// and ztls serve --backend in front of a curlBackend.
type curlWorld struct {
	dir, caFile string
	port        string
	hostPort    string // www.ztls.test:PORT
	dnsAddr     string // UDP
	dotAddr     string // DNS over TLS
	dotCAFile   string
	leaf        *x509.Certificate
	be          *curlBackend
}

func newCurlWorld(t *testing.T) *curlWorld {
	t.Helper()
	w := &curlWorld{dir: t.TempDir(), be: &curlBackend{}}
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, w.dir)
	w.leaf = leaf.Cert
	w.caFile = ca.WritePEM(t, w.dir)
	w.port = strconv.Itoa(freePort(t))
	w.hostPort = "www.ztls.test:" + w.port
	zd := filepath.Join(w.dir, "zd")
	run(t, "zdata", "new", "--host", "www.ztls.test", "--port", w.port, "--cert", cert, "--key", key, "--out", zd)
	zone := filepath.Join(w.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)

	dnsCA := testpki.NewCA(t, "ecdsa-p256")
	dotDir := t.TempDir()
	dotCert, dotKey := dnsCA.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"dns.ztls.test"}}).WritePEM(t, dotDir)
	w.dotCAFile = dnsCA.WritePEM(t, dotDir)
	ready, log := startLog(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", zd, "--listen", "127.0.0.1:0",
		"--tls", "127.0.0.1:0", "--cert", dotCert, "--key", dotKey)
	w.dnsAddr = logAttr(ready, "addr")
	w.dotAddr = logAttr(log.waitFor(t, "serving tls on"), "addr")

	backend := httptest.NewServer(w.be)
	t.Cleanup(backend.Close)
	start(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+w.port, "--zdata", zd, "--backend", backend.URL, "--early-window", "300ms")
	time.Sleep(350 * time.Millisecond) // early data is refused for one window after start
	return w
}

// run runs the binary with HOME in the world's directory (no memory of
// other tests' runs) and env added; it never takes more than 60 s.
func (w *curlWorld) run(t *testing.T, env []string, args ...string) uxResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ztlsBinary(t), args...)
	cmd.Env = append(append(os.Environ(), "HOME="+w.dir, "ZTLS_RESOLVER="), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := uxResult{stdout: stdout.String(), stderr: stderr.String()}
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

// client is the flags a connection to the world takes.
func (w *curlWorld) client(extra ...string) []string {
	return append([]string{"--resolver", w.dnsAddr, "--ca", w.caFile, "--zdata-budget", "2s", "--timeout", "10s"}, extra...)
}

// connect --data 'GET /' to serve --backend: the line is completed into
// a whole request (Host as the server is named), answered, early under
// ZTLS; --raw sends it as it is, and the server's close without a
// response is exit 1 that says what to do.
func TestCLIConnectCompletesRequestLine(t *testing.T) {
	w := newCurlWorld(t)
	r := w.run(t, nil, append([]string{"connect", w.hostPort, "--data", "GET /line", "--json"}, w.client()...)...)
	rep := uxReport(t, r)
	if r.code != 0 || !strings.Contains(r.stderr, "page /line") || !strings.Contains(r.stderr, "sending it as a whole request") {
		t.Fatalf("exit %d, report error %q\n%s", r.code, rep.Error, r.stderr)
	}
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted {
		t.Errorf("mode %s (%s), early %+v: the completed GET should go early", rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	got := w.be.on("/line")
	if len(got) != 1 || got[0].method != "GET" || got[0].host != w.hostPort {
		t.Fatalf("the backend received %+v, want one GET with Host %s", got, w.hostPort)
	}

	// POST given alone: a body of 0 bytes, sent after the handshake.
	r = w.run(t, nil, append([]string{"connect", w.hostPort, "--data", "POST /form HTTP/1.1"}, w.client()...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "page /form") || len(w.be.on("/form")) != 1 {
		t.Fatalf("POST line: exit %d, backend %d\n%s%s", r.code, len(w.be.on("/form")), r.stdout, r.stderr)
	}

	r = w.run(t, nil, append([]string{"connect", w.hostPort, "--data", "GET /raw", "--raw", "--json"}, w.client()...)...)
	rep = uxReport(t, r)
	if r.code != 1 || !strings.Contains(rep.Error, "without a response") || !strings.Contains(r.stderr, "ztls get https://") {
		t.Fatalf("--raw 'GET /raw': exit %d, report error %q, stderr:\n%s", r.code, rep.Error, r.stderr)
	}
	if n := len(w.be.on("/raw")); n != 0 {
		t.Errorf("the backend received %d requests for a malformed one", n)
	}
}

// --resolver is repeatable (tried in order, not the last one alone);
// without it ZTLS_RESOLVER names the server, as for the Go client, in
// connect, get and lookup.
func TestCLIResolverRepeatableAndEnv(t *testing.T) {
	w := newCurlWorld(t)
	common := []string{"--ca", w.caFile, "--zdata-budget", "2s", "--timeout", "10s", "--json"}
	dead := "127.0.0.1:9"
	for _, tc := range []struct {
		name string
		env  []string
		args []string
	}{
		{"connect --resolver good --resolver dead", nil, []string{"connect", w.hostPort, "--data", "GET /r1", "--resolver", w.dnsAddr, "--resolver", dead}},
		{"get --resolver good,dead", nil, []string{"get", "https://" + w.hostPort + "/r2", "--resolver", w.dnsAddr + "," + dead}},
		{"connect, ZTLS_RESOLVER", []string{"ZTLS_RESOLVER=" + w.dnsAddr}, []string{"connect", w.hostPort, "--data", "GET /r3"}},
		{"get --http2, ZTLS_RESOLVER", []string{"ZTLS_RESOLVER=" + w.dnsAddr}, []string{"get", "https://" + w.hostPort + "/r4", "--http2"}},
	} {
		r := w.run(t, tc.env, append(tc.args, common...)...)
		rep := uxReport(t, r)
		if r.code != 0 || rep.Mode != "ztls" {
			t.Errorf("%s: exit %d, mode %s (%s), error %q\n%s", tc.name, r.code, rep.Mode, rep.FallbackReason, rep.Error, r.stderr)
		}
	}
	r := w.run(t, []string{"ZTLS_RESOLVER=" + w.dnsAddr}, "lookup", "www.ztls.test", "+short", "--resolv-conf", filepath.Join(w.dir, "none"))
	if r.code != 0 || r.stdout != "127.0.0.1\n" {
		t.Errorf("lookup with ZTLS_RESOLVER: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	r = w.run(t, []string{"ZTLS_RESOLVER=127.0.0.1:x"}, "lookup", "www.ztls.test")
	if r.code != 1 || !strings.Contains(r.stderr, "ZTLS_RESOLVER") {
		t.Errorf("a bad ZTLS_RESOLVER: exit %d, %s", r.code, r.stderr)
	}
}

// --dns-servername names the DNS-over-TLS resolver's certificate (here
// dns.ztls.test, reached at 127.0.0.1) in connect, get and prefetch.
func TestCLIDNSServername(t *testing.T) {
	w := newCurlWorld(t)
	dot := []string{"--resolver", w.dotAddr, "--dns-transport", "tls", "--dns-ca", w.dotCAFile, "--ca", w.caFile, "--timeout", "10s"}
	named := append(slices.Clone(dot), "--dns-servername", "dns.ztls.test")
	// Without it the resolver's certificate is checked against 127.0.0.1.
	r := w.run(t, nil, append([]string{"connect", w.hostPort, "--data", "GET /dot0", "--json", "--mode", "ztls", "--zdata-budget", "2s"}, dot...)...)
	if r.code == 0 {
		t.Fatalf("connect without --dns-servername reached ZTLS through a resolver whose certificate names dns.ztls.test:\n%s", r.stdout)
	}
	r = w.run(t, nil, append([]string{"connect", w.hostPort, "--data", "GET /dot1", "--json", "--zdata-budget", "2s"}, named...)...)
	if rep := uxReport(t, r); r.code != 0 || rep.Mode != "ztls" {
		t.Fatalf("connect --dns-servername: exit %d, mode %s (%s), error %q", r.code, rep.Mode, rep.FallbackReason, rep.Error)
	}
	r = w.run(t, nil, append([]string{"get", "https://" + w.hostPort + "/dot2", "--http2", "--json", "--zdata-budget", "2s"}, named...)...)
	if rep := uxReport(t, r); r.code != 0 || rep.Mode != "ztls" || !strings.Contains(r.stderr, "page /dot2") {
		t.Fatalf("get --dns-servername: exit %d, mode %s (%s)\n%s", r.code, rep.Mode, rep.FallbackReason, r.stderr)
	}
	// prefetch last: what it keeps spares the others their lookups.
	r = w.run(t, nil, append([]string{"prefetch", w.hostPort}, named...)...)
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "www.ztls.test") {
		t.Fatalf("prefetch --dns-servername: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// connect --showcerts prints the chain as PEM with the response (from
// DNS when the server omitted its Certificate), and on a failed
// verification the certificate that failed.
func TestCLIConnectShowcerts(t *testing.T) {
	w := newCurlWorld(t)
	for _, mode := range []string{"ztls", "tls"} {
		r := w.run(t, nil, append([]string{"connect", w.hostPort, "--data", "GET /c", "--showcerts", "--mode", mode}, w.client()...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "page /c") {
			t.Fatalf("--mode %s: exit %d\n%s%s", mode, r.code, r.stdout, r.stderr)
		}
		checkPEMLeaf(t, r.stdout, w.leaf)
		if fromDNS := strings.Contains(r.stdout, "from DNS"); fromDNS != (mode == "ztls") {
			t.Errorf("--mode %s: the chain said from DNS %v:\n%s", mode, fromDNS, r.stdout)
		}
	}
	other := testpki.NewCA(t, "ecdsa-p256").WritePEM(t, t.TempDir())
	r := w.run(t, nil, "connect", w.hostPort, "--data", "GET /c", "--showcerts", "--mode", "tls", "--resolver", w.dnsAddr, "--ca", other, "--timeout", "10s")
	if r.code != 1 || !strings.Contains(r.stdout, "failed verification") {
		t.Fatalf("untrusted: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	checkPEMLeaf(t, r.stdout, w.leaf)
}

// checkPEMLeaf fails unless out holds leaf as its first PEM certificate.
func checkPEMLeaf(t *testing.T, out string, leaf *x509.Certificate) {
	t.Helper()
	i := strings.Index(out, "-----BEGIN CERTIFICATE-----")
	if i < 0 {
		t.Fatalf("no PEM certificate in:\n%s", out)
	}
	b, _ := pem.Decode([]byte(out[i:]))
	if b == nil || string(b.Bytes) != string(leaf.Raw) {
		t.Fatalf("the first PEM certificate is not the server's leaf:\n%s", out)
	}
}

// get's curl flags, through both clients: the backend sees the headers,
// method and body asked for, each request once.
func TestCLIGetCurlFlags(t *testing.T) {
	w := newCurlWorld(t)
	url := "https://" + w.hostPort
	bodyFile := filepath.Join(w.dir, "body.txt")
	writeFile(t, bodyFile, "from a file\n")
	for _, client := range [][]string{nil, {"--http2"}} {
		name := "get"
		if client != nil {
			name = "get --http2"
		}
		tag := strings.ReplaceAll(name, " ", "")
		get := func(path string, extra ...string) uxResult {
			args := append([]string{"get", url + "/" + tag + path}, client...)
			return w.run(t, nil, append(args, w.client(extra...)...)...)
		}
		one := func(path string) curlRequest {
			t.Helper()
			got := w.be.on("/" + tag + path)
			if len(got) != 1 {
				t.Fatalf("%s: the backend received %d requests for %s, want 1", name, len(got), path)
			}
			return got[0]
		}

		r := get("/h", "-H", "X-Test: one", "--header", "X-Test: two", "-H", "User-Agent: mine", "-H", "Accept:")
		if r.code != 0 {
			t.Fatalf("%s -H: exit %d\n%s", name, r.code, r.stderr)
		}
		h := one("/h").header
		if !slices.Equal(h.Values("X-Test"), []string{"one", "two"}) || h.Get("User-Agent") != "mine" {
			t.Errorf("%s -H: the backend saw %v", name, h)
		}

		r = get("/d", "-d", "a=1", "--data", "b=2")
		if s := one("/d"); r.code != 0 || s.method != "POST" || s.body != "a=1&b=2" || s.header.Get("Content-Type") != "application/x-www-form-urlencoded" ||
			!strings.Contains(r.stdout, "page /"+tag+"/d a=1&b=2") {
			t.Errorf("%s -d: exit %d, backend %+v\n%s", name, r.code, s, r.stdout+r.stderr)
		}

		r = get("/x", "-X", "PUT", "-d", "@"+bodyFile, "-H", "Content-Type: text/plain")
		if s := one("/x"); r.code != 0 || s.method != "PUT" || s.body != "from a file\n" || s.header.Get("Content-Type") != "text/plain" {
			t.Errorf("%s -X PUT -d @FILE: exit %d, backend %+v", name, r.code, s)
		}

		r = get("/i", "-I")
		if s := one("/i"); r.code != 0 || s.method != "HEAD" || !strings.HasPrefix(r.stdout, "HTTP/") || strings.Contains(r.stdout, "page ") {
			t.Errorf("%s -I: exit %d, method %s\n%s", name, r.code, s.method, r.stdout)
		}

		out := filepath.Join(w.dir, tag+".out")
		r = get("/o", "-o", out)
		body, _ := os.ReadFile(out)
		if r.code != 0 || string(body) != "page /"+tag+"/o " || strings.Contains(r.stdout, "page ") || !strings.Contains(r.stderr, "200 OK") {
			t.Errorf("%s -o: exit %d, file %q, stdout %q\n%s", name, r.code, body, r.stdout, r.stderr)
		}
		one("/o")

		// --fail: exit 22 and no response for a 404; 0 and the page without.
		r = w.run(t, nil, append(append([]string{"get", url + "/missing", "--fail"}, client...), w.client()...)...)
		if r.code != 22 || strings.Contains(r.stdout, "no such page") || !strings.Contains(r.stderr, "404") {
			t.Errorf("%s --fail on a 404: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
		r = w.run(t, nil, append(append([]string{"get", url + "/missing"}, client...), w.client()...)...)
		if r.code != 0 || !strings.Contains(r.stdout, "no such page") {
			t.Errorf("%s without --fail on a 404: exit %d\n%s", name, r.code, r.stdout)
		}
		r = get("/f", "--fail")
		if r.code != 0 || !strings.Contains(r.stdout, "page /"+tag+"/f") {
			t.Errorf("%s --fail on a 200: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
		one("/f")

		// --resolve: the address without DNS (the resolver is dead), the
		// name still the certificate's and the Host.
		args := append([]string{"get", url + "/" + tag + "/res", "--resolve", net.JoinHostPort("www.ztls.test", w.port) + ":127.0.0.1",
			"--resolver", "127.0.0.1:9", "--ca", w.caFile, "--timeout", "10s"}, client...)
		r = w.run(t, nil, args...)
		if s := one("/res"); r.code != 0 || s.host != w.hostPort {
			t.Errorf("%s --resolve: exit %d, Host %q\n%s", name, r.code, s.host, r.stderr)
		}
		// With the resolver alive, --resolve keeps ZTLS: the Z-data is
		// looked up under the name, the address is --resolve's.
		pin := func(addr string) []string {
			return append(append([]string{"get", url + "/" + tag + "/resz", "--json", "--resolve", net.JoinHostPort("www.ztls.test", w.port) + ":" + addr}, client...), w.client()...)
		}
		r = w.run(t, nil, pin("127.0.0.1")...)
		if rep := uxReport(t, r); r.code != 0 || rep.Mode != "ztls" {
			t.Errorf("%s --resolve with Z-data in DNS: exit %d, mode %q (%s)\n%s", name, r.code, rep.Mode, rep.FallbackReason, r.stderr)
		}
		one("/resz")
		// An address where nothing listens is where it goes, whatever
		// DNS says.
		if r = w.run(t, nil, pin("127.0.0.2")...); r.code == 0 {
			t.Errorf("%s --resolve 127.0.0.2: exit 0, so it connected to DNS's address\n%s", name, r.stderr)
		}
	}
}

// Flags get refuses, saying why.
func TestCLIGetCurlFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-I", "-d", "x"}, "choose one"},
		{[]string{"-H", "NoColon"}, "NAME: VALUE"},
		{[]string{"--resolve", "www.ztls.test:443"}, "HOST:PORT:ADDR"},
		{[]string{"--resolve", "www.ztls.test:443:not-an-ip"}, "HOST:PORT:ADDR"},
		{[]string{"-X", "BAD METHOD"}, "--request"},
	} {
		r := uxRun(t, nil, append([]string{"get", "https://www.ztls.test/", "--resolver", "127.0.0.1:9"}, tc.args...)...)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("get %v: exit %d, %s", tc.args, r.code, r.stderr)
		}
	}
}
