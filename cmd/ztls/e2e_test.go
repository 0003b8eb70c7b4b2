package main

// End to end through the real binary: zdata new → dns serve / BIND 9 via
// zdata publish → Unbound → ztls serve → ztls connect, all on loopback.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// ztlsBinary builds cmd/ztls (and cmd/ztls-bench beside it) once per test
// process.
func ztlsBinary(t *testing.T) string {
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ztls-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "ztls")
		// ztls-bench beside it: 'ztls bench' and 'ztls demo' run it.
		out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator), ".", "../ztls-bench").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	// The binary keeps its memory (aborts, post-quantum pins) and its
	// prefetch cache under $XDG_CACHE_HOME: the tests' children keep
	// theirs in a directory of this run, never in the user's home, where
	// a pin left by an earlier run for a port a later run draws again
	// turned that run's classical ZTLS into TLS 1.3.
	cache, err := os.MkdirTemp("", "ztls-cli-cache-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Setenv("XDG_CACHE_HOME", cache)
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.RemoveAll(cache)
	os.Exit(code)
}

// run runs the binary to completion and returns its stdout.
func run(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ztlsBinary(t), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ztls %s: %v\nstderr: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// start runs a long-lived ztls command, waits for a line containing
// ready on its output (stdout or stderr) and returns that line.
func start(t *testing.T, ready string, args ...string) string {
	t.Helper()
	line, _ := startLog(t, ready, args...)
	return line
}

// logLines collects a process's output lines after it became ready.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

// waitFor waits until some line contains s.
func (l *logLines) waitFor(t *testing.T, s string) string {
	t.Helper()
	deadline := clock.Now().Add(10 * time.Second)
	for clock.Now().Before(deadline) {
		l.mu.Lock()
		for i, line := range l.lines {
			if strings.Contains(line, s) {
				l.lines = l.lines[i+1:]
				l.mu.Unlock()
				return line
			}
		}
		l.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("no log line with %q in:\n%s", s, strings.Join(l.lines, "\n"))
	return ""
}

func startLog(t *testing.T, ready string, args ...string) (string, *logLines) {
	t.Helper()
	line, log, _ := startProc(t, ready, args...)
	return line, log
}

// startProc is startLog that also returns the process, to stop it early.
func startProc(t *testing.T, ready string, args ...string) (string, *logLines, *exec.Cmd) {
	t.Helper()
	cmd := exec.Command(ztlsBinary(t), args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		pr.Close()
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	timeout := time.After(15 * time.Second)
	var seen []string
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("ztls %s exited: %s", strings.Join(args, " "), strings.Join(seen, "\n"))
			}
			seen = append(seen, l)
			if strings.Contains(l, ready) {
				log := &logLines{}
				go func() {
					for l := range lines {
						log.mu.Lock()
						log.lines = append(log.lines, l)
						log.mu.Unlock()
					}
				}()
				return l, log, cmd
			}
		case <-timeout:
			t.Fatalf("ztls %s not ready: %s", strings.Join(args, " "), strings.Join(seen, "\n"))
		}
	}
}

// boundPort is the port in the addr= attribute of a server's ready line.
// A server the test starts on port 0 says there where it listens, which
// is race-free; a port picked free beforehand (freePort) may be taken by
// another process before the server binds it, so freePort is only for
// ports that must be known before the server starts (Z-data names them).
func boundPort(t *testing.T, ready string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(logAttr(ready, "addr"))
	if err != nil {
		t.Fatalf("no address in %q: %v", ready, err)
	}
	return port
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

type site struct {
	dir, ca, zd string
	port        int
	host        string
	authority   *testpki.CA // issued the site's certificate (and can issue its next one)
}

// newSite makes a certificate for www.ztls.test and a Z-data directory.
func newSite(t *testing.T) *site {
	dir := t.TempDir()
	// Each site's clients start with an empty memory: a pin or abort
	// noted for another site on the same port is not this one's.
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, dir)
	s := &site{dir: dir, ca: ca.WritePEM(t, dir), zd: filepath.Join(dir, "zd"), port: freePort(t), host: "www.ztls.test", authority: ca}
	out := run(t, "zdata", "new", "--host", s.host, "--port", strconv.Itoa(s.port), "--cert", cert, "--key", key, "--out", s.zd)
	if !strings.Contains(out, "_ztls._"+strconv.Itoa(s.port)+"._tcp.www.ztls.test.\t") || !strings.Contains(out, "TLSA\t3 0 0 ") {
		t.Fatalf("zdata new printed:\n%s", out)
	}
	return s
}

const testZone = `$ORIGIN ztls.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 86400 60
@ IN NS ns1
ns1 IN A 127.0.0.1
www IN A 127.0.0.1
`

func (s *site) serve(t *testing.T) {
	start(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd, "--respond", "hello", "--early-window", "300ms")
	time.Sleep(350 * time.Millisecond) // early data is refused for one window after start
}

func (s *site) connect(t *testing.T, resolverAddr string, extra ...string) dial.Report {
	args := append([]string{"connect", s.host + ":" + strconv.Itoa(s.port), "--resolver", resolverAddr,
		"--ca", s.ca, "--data", "GET /", "--json", "--zdata-budget", "2s"}, extra...)
	var rep dial.Report
	if err := json.Unmarshal([]byte(run(t, args...)), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func wantZTLS(t *testing.T, rep dial.Report) {
	t.Helper()
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || !rep.AnswerInFirstFlight || rep.ResponseBytes != 5 {
		t.Fatalf("report: mode %s (%s), early %+v, first flight %v, %d bytes", rep.Mode, rep.FallbackReason,
			rep.EarlyData, rep.AnswerInFirstFlight, rep.ResponseBytes)
	}
}

func TestCLIZTLSWithEmbeddedAuthority(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	os.WriteFile(zone, []byte(testZone), 0o644)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	s.serve(t)
	wantZTLS(t, s.connect(t, dnsAddr))
	if rep := s.connect(t, dnsAddr, "--mode", "tls"); rep.Mode != "tls" || rep.EarlyData.Offered {
		t.Fatalf("--mode tls: %+v", rep)
	}

	// zdata check: the default profile's answers fit a 1232-byte UDP answer.
	var chk checkReport
	if err := json.Unmarshal([]byte(run(t, "zdata", "check", s.host, "--port", strconv.Itoa(s.port),
		"--resolver", dnsAddr, "--ca", s.ca, "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if !chk.Valid || len(chk.Answers) != 4 { // TXT, CERT, TLSA, HTTPS
		t.Fatalf("check: %+v", chk)
	}
	for _, a := range chk.Answers {
		if a.Truncated || a.OverUDP || a.Bytes >= 1232 {
			t.Fatalf("%s %s: %d bytes (truncated %v)", a.Name, a.Type, a.Bytes, a.Truncated)
		}
		t.Logf("zdata check: %s %s answer is %d bytes", a.Name, a.Type, a.Bytes)
	}
	if out := run(t, "zdata", "show", s.zd); !strings.Contains(out, "live") {
		t.Fatalf("zdata show:\n%s", out)
	}
}

func TestCLIZDataPublishThroughBINDAndUnbound(t *testing.T) {
	if dnstest.BindPath() == "" {
		t.Skip("BIND 9 (named) not installed: make deps installs it")
	}
	s := newSite(t)
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	bind := dnstest.StartBind(t, dnstest.BindOptions{
		Zones: []dnstest.BindZone{{Origin: "ztls.test.", Text: testZone, AllowUpdate: true}},
		Key:   &dnstest.BindKey{Name: "ztls-key", Algorithm: "hmac-sha256", Secret: secret},
	})
	out := run(t, "zdata", "publish", s.zd, "--server", bind.Addr, "--zone", "ztls.test",
		"--tsig-name", "ztls-key", "--tsig-secret", secret)
	if !strings.Contains(out, "published") {
		t.Fatalf("publish: %s", out)
	}
	// Unbound recursing into BIND 9 (stub zone), also serving DNS over TLS.
	dotLeaf := testpki.NewCA(t, "ecdsa-p256")
	dl := dotLeaf.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	dotCert, dotKey := dl.WritePEM(t, s.dir)
	ub := dnstest.StartUnbound(t, dnstest.UnboundOptions{
		StubZones:   map[string]string{"ztls.test.": bind.Addr},
		TLSCertFile: dotCert, TLSKeyFile: dotKey,
	})
	s.serve(t)
	wantZTLS(t, s.connect(t, ub.Addr))
	if ub.TLSAddr == "" {
		t.Fatal("Unbound serves no DNS over TLS")
	}
	wantZTLS(t, s.connect(t, ub.TLSAddr, "--dns-transport", "tls", "--dns-ca", dotLeaf.WritePEM(t, s.dir)))
	// An unsigned UPDATE is refused by BIND: nothing an attacker can push.
	cmd := exec.Command(ztlsBinary(t), "zdata", "publish", s.zd, "--server", bind.Addr, "--zone", "ztls.test",
		"--tsig-name", "ztls-key", "--tsig-secret", "d3Jvbmctc2VjcmV0")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("publish with a wrong key succeeded: %s", out)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
