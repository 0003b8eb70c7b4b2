package main

// TurboTLS through the real commands, on loopback: dns serve --turbo
// publishing the advertisement, serve --turbo, connect --turbo; the
// turbo-proxy pair between openssl s_client and openssl s_server; and the
// proxy's help and flag errors.

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/turbo"
)

// noAbortMemory keeps connect's memory of aborting servers (the user's
// cache directory) in the test's own directory.
func noAbortMemory(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
}

func TestCLITurboZTLS(t *testing.T) {
	ztlsBinary(t) // built before run's per-command timeout starts
	noAbortMemory(t)
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--turbo", "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	port := strconv.Itoa(s.port)
	_, serveLog := startLog(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+port, "--zdata", s.zd,
		"--respond", "hello", "--early-window", "300ms", "--turbo", "-v")
	time.Sleep(350 * time.Millisecond) // early data is refused for one window after start

	// The TurboTLS wait is generous: transport turbo is asserted and the
	// machine may be loaded (the default on loopback is 2 ms).
	rep := s.connect(t, dnsAddr, "--turbo", "--turbo-wait", "5s")
	wantZTLS(t, rep)
	if rep.Transport != "turbo" || rep.TurboFallback != "" || rep.Turbo == nil || rep.Turbo.UDPPort != s.port ||
		rep.Turbo.ServerFlight == 0 || rep.Turbo.Responses == 0 {
		t.Fatalf("transport %s (%q), turbo %+v", rep.Transport, rep.TurboFallback, rep.Turbo)
	}
	if l := serveLog.waitFor(t, "ZTLS accepted"); !strings.Contains(l, "127.0.0.1") {
		t.Fatalf("serve -v logged %q", l)
	}

	rep = s.connect(t, dnsAddr, "--turbo", "--turbo-wait", "5s", "--mode", "tls")
	if rep.Transport != "turbo" || rep.Mode != "tls" || rep.EarlyData.Offered || rep.ResponseBytes != 5 {
		t.Fatalf("--mode tls: transport %s (%q), mode %s, early %+v, %d bytes", rep.Transport, rep.TurboFallback,
			rep.Mode, rep.EarlyData, rep.ResponseBytes)
	}

	// Without --turbo the same server is reached over TCP.
	if rep = s.connect(t, dnsAddr); rep.Transport != "tcp" || rep.Turbo != nil {
		t.Fatalf("without --turbo: transport %s", rep.Transport)
	}
}

// zdata new --turbo-port prints the advertisement as a zone-file line that
// parses back to the port (for operators with another DNS server).
func TestCLIZDataNewPrintsTurboAdvert(t *testing.T) {
	ztlsBinary(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}}).WritePEM(t, dir)
	out := run(t, "zdata", "new", "--host", "www.ztls.test", "--port", "8443", "--cert", cert, "--key", key,
		"--out", filepath.Join(dir, "zd"), "--turbo-port", "8443")
	var https []dns.RR
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rr, err := dns.NewRR(l)
		if err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if rr.Header().Rrtype == dns.TypeHTTPS {
			https = append(https, rr)
		}
	}
	if len(https) != 1 || https[0].Header().Name != "_8443._https.www.ztls.test." {
		t.Fatalf("HTTPS lines %v in:\n%s", https, out)
	}
	if p, err := turbo.UDPPortFrom(https); err != nil || p != 8443 {
		t.Fatalf("advertised port %d, %v", p, err)
	}
}

// lineReader collects a process's output lines.
type lineReader struct {
	lines chan string
	seen  []string
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string, 100)}
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
		close(lr.lines)
	}()
	return lr
}

// waitFor waits for a line containing s.
func (lr *lineReader) waitFor(t *testing.T, what, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-lr.lines:
			if !ok {
				t.Fatalf("%s ended without %q:\n%s", what, s, strings.Join(lr.seen, "\n"))
			}
			lr.seen = append(lr.seen, l)
			if strings.Contains(l, s) {
				return
			}
		case <-timeout:
			t.Fatalf("%s: no %q within 10 s:\n%s", what, s, strings.Join(lr.seen, "\n"))
		}
	}
}

// startOpenSSL runs openssl with args, stdin from a pipe, and stops it
// with the test.
func startOpenSSL(t *testing.T, args ...string) (io.WriteCloser, *lineReader) {
	t.Helper()
	cmd := exec.Command("openssl", args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
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
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		pr.Close()
	})
	return stdin, newLineReader(pr)
}

func waitTCP(t *testing.T, addr string) {
	t.Helper()
	deadline := clock.Now().Add(10 * time.Second)
	for clock.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond); err == nil {
			c.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing listens on %s", addr)
}

// openssl s_client → turbo-proxy --client → turbo-proxy --server →
// openssl s_server: the TLS session is end to end, the server's first
// flight comes over UDP, and the bytes arrive both ways.
func TestCLITurboProxyOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed (make deps installs it): skipping the proxy pair interop test")
	}
	ztlsBinary(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}}).WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)

	backend := "127.0.0.1:" + strconv.Itoa(freePort(t))
	startOpenSSL(t, "s_server", "-accept", backend, "-cert", cert, "-key", key, "-tls1_3", "-rev", "-quiet")
	waitTCP(t, backend)

	line := start(t, "TurboTLS server proxy on", "turbo-proxy", "--server", "--listen", "127.0.0.1:0",
		"--backend", backend, "--quiet", "20ms")
	serverProxy := logAttr(line, "addr")
	line, clientLog := startLog(t, "TurboTLS client proxy on", "turbo-proxy", "--client", "--listen", "127.0.0.1:0",
		"--to", serverProxy, "--wait", "5s", "-v")
	clientProxy := logAttr(line, "addr")

	stdin, out := startOpenSSL(t, "s_client", "-connect", clientProxy, "-servername", "www.ztls.test",
		"-CAfile", caFile, "-verify_return_error", "-tls1_3", "-quiet")
	// The flight came over UDP (the client proxy says so), then the data.
	clientLog.waitFor(t, "connection: turbo")
	if _, err := io.WriteString(stdin, "hello through the turbo proxies\n"); err != nil {
		t.Fatal(err)
	}
	// s_server -rev answers each line reversed.
	out.waitFor(t, "openssl s_client", "seixorp obrut eht hguorht olleh")
}

// turbo-proxy --help teaches the flags; wrong combinations say what to do.
func TestCLITurboProxyHelpAndErrors(t *testing.T) {
	var help bytes.Buffer
	rootCmd.SetOut(&help)
	rootCmd.SetArgs([]string{"turbo-proxy", "--help"})
	err := rootCmd.Execute()
	rootCmd.SetOut(nil)
	resetFlags(rootCmd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--client", "--server", "--backend", "--to", "--udp", "--wait", "openssl s_client", "TurboTLS paper"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("turbo-proxy --help lacks %q:\n%s", want, help.String())
		}
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"turbo-proxy", "--listen", "127.0.0.1:0"}, "choose one of --client"},
		{[]string{"turbo-proxy", "--client", "--server", "--listen", "127.0.0.1:0"}, "choose one of --client"},
		{[]string{"turbo-proxy", "--server", "--backend", "127.0.0.1:1"}, "--listen ADDR is required"},
		{[]string{"turbo-proxy", "--server", "--listen", "127.0.0.1:0"}, "--backend HOST:PORT (the TLS server) is required"},
		{[]string{"turbo-proxy", "--server", "--listen", "127.0.0.1:0", "--backend", "127.0.0.1:1", "--to", "127.0.0.1:2"}, "are --client flags"},
		{[]string{"turbo-proxy", "--client", "--listen", "127.0.0.1:0"}, "--to HOST:PORT (the server proxy's TCP address) is required"},
		{[]string{"turbo-proxy", "--client", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:2", "--backend", "127.0.0.1:1"}, "--backend is a --server flag"},
		{[]string{"turbo-proxy", "--client", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:2", "--udp", "70000"}, "--udp: want a port number"},
		{[]string{"turbo-proxy", "--client", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:2", "extra"}, "unknown command"},
		{[]string{"dns", "serve", "--zone", "x.zone", "--turbo"}, "--turbo advertises the --zdata services"},
		{[]string{"zdata", "new", "--host", "x.test", "--port", "1", "--cert", "c", "--key", "k", "--out", "o", "--turbo-port", "-1"}, "--turbo-port: -1 is not a port"},
	} {
		rootCmd.SetArgs(tc.args)
		var sink bytes.Buffer
		rootCmd.SetErr(&sink)
		err := rootCmd.Execute()
		rootCmd.SetErr(nil)
		resetFlags(rootCmd)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ztls %s: %v, want an error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}
