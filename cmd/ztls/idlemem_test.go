package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// Memory an idle TLS connection costs ztls serve, next to a crypto/tls
// echo server (testdata/gotlsecho) in the same run: each server process
// gets N connections whose handshakes completed and that then send
// nothing, and the growth of its resident set (VmRSS), divided by N, is
// the cost of one. Heavy, so behind ZTLS_IDLE_MEM=N (e.g. 3000):
//
//	ZTLS_IDLE_MEM=3000 go test -run TestIdleConnectionMemory -v ./cmd/ztls/
func TestIdleConnectionMemory(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("ZTLS_IDLE_MEM"))
	if n <= 0 {
		t.Skip("a measurement: set ZTLS_IDLE_MEM=N (connections per server, e.g. 3000)")
	}
	ztlsPerConn, gotlsPerConn := measureIdleMemory(t, n)
	t.Logf("%d idle TLS 1.3 connections: ztls serve %.1f KB each, crypto/tls echo %.1f KB each (ratio %.2f)",
		n, ztlsPerConn/1024, gotlsPerConn/1024, ztlsPerConn/gotlsPerConn)
}

// The bound, in the default run so it cannot regress silently: 1 000
// idle connections cost ztls serve at most 32 KB of resident memory each
// (measured 23 KB at 3 000, against crypto/tls's 42 KB; issue 19).
func TestIdleConnectionMemoryBound(t *testing.T) {
	const n, bound = 1000, 32 << 10
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"localhost"}})
	cert, key := leaf.WritePEM(t, dir)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, _, cmd := startProc(t, "serving TLS 1.3 on", serveIdleArgs(addr, cert, key)...)
	defer stopCmd(cmd)
	per := idleCost(t, cmd.Process.Pid, addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS13}, n)
	t.Logf("%.1f KB per idle connection", per/1024)
	if per > bound {
		t.Fatalf("an idle connection costs ztls serve %.1f KB, more than %d KB", per/1024, bound>>10)
	}
}

// serveIdleArgs runs ztls serve on addr with room for thousands of idle
// connections from one address.
func serveIdleArgs(addr, cert, key string) []string {
	return []string{"serve", "--listen", addr, "--cert", cert, "--key", key, "--respond", "hello",
		"--timeout", "10m", "--handshake-timeout", "1m", "--max-conns", "0", "--max-conns-per-ip", "0", "--max-conns-per-net", "0"}
}

// measureIdleMemory returns the resident bytes per idle connection of
// ztls serve and of the crypto/tls echo server, n connections each.
func measureIdleMemory(t *testing.T, n int) (ztls, gotls float64) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"localhost"}})
	cert, key := leaf.WritePEM(t, dir)
	client := &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", MinVersion: tls.VersionTLS13}

	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, _, cmd := startProc(t, "serving TLS 1.3 on", serveIdleArgs(addr, cert, key)...)
	ztls = idleCost(t, cmd.Process.Pid, addr, client, n)
	stopCmd(cmd)

	echo := filepath.Join(dir, "gotlsecho")
	if out, err := exec.Command("go", "build", "-o", echo, "./testdata/gotlsecho").CombinedOutput(); err != nil {
		t.Fatalf("go build gotlsecho: %v\n%s", err, out)
	}
	addr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	ec := exec.Command(echo, addr, cert, key)
	out, err := ec.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := ec.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ec.Process.Kill(); ec.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "listening") {
		t.Fatalf("gotlsecho: %q, %v", line, err)
	}
	gotls = idleCost(t, ec.Process.Pid, addr, client, n)
	return ztls, gotls
}

// idleCost warms the server at addr up, then opens n connections to it
// that complete their handshakes and stay idle, and returns the growth of
// the server's resident set per connection.
func idleCost(t *testing.T, pid int, addr string, cfg *tls.Config, n int) float64 {
	dial := func() *tls.Conn {
		c, err := tls.DialWithDialer(&netDialer, "tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for range 100 { // pools, stacks and caches the first handshakes fill
		dial().Close()
	}
	time.Sleep(500 * time.Millisecond)
	before := vmRSS(t, pid)
	conns := make([]*tls.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		conns = append(conns, dial())
	}
	time.Sleep(2 * time.Second) // the server reads each client Finished, then waits
	after := vmRSS(t, pid)
	t.Logf("pid %d: VmRSS %d KB before, %d KB with %d idle connections", pid, before/1024, after/1024, n)
	return float64(after-before) / float64(n)
}

// vmRSS is the resident set of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatalf("no VmRSS for pid %d", pid)
	return 0
}
