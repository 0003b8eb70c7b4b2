package main

// Flag values with cures (tlsflags.go), bench's default protocols and the
// turbo-proxy's default wait on loopback, through the built binary.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// Wrong suite and group names list the valid ones; nonsense numbers say
// the valid range; in connect, get and serve alike.
func TestUX2TLSFlagsSayWhatIsValid(t *testing.T) {
	ztlsBinary(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"localhost"}}).WritePEM(t, dir)
	connect := []string{"connect", "127.0.0.1:1", "--mode", "tls", "--data", "x"}
	get := []string{"get", "https://127.0.0.1:1/"}
	serve := []string{"serve", "--listen", "127.0.0.1:0", "--cert", cert, "--key", key}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{append(connect, "--groups", "x22519"), []string{`unknown group "x22519"`, "X25519MLKEM768, x25519, secp256r1"}},
		{append(serve, "--groups", "ffdhe2048"), []string{`unknown group "ffdhe2048"`, "secp384r1", "secp521r1"}},
		{append(get, "--ciphers", "aes999"), []string{`unknown cipher suite "aes999"`, "TLS_AES_128_GCM_SHA256 (aes128)", "TLS_CHACHA20_POLY1305_SHA256"}},
		{append(connect, "--groups", "x25519,x25519"), []string{"listed twice"}},
		{append(connect, "--groups", "1d"), []string{`unknown group "1d"`, "0x001d"}},
		{append(connect, "--pad", "99999999"), []string{"--pad 99999999", "0 (no padding) to 16384"}},
		{append(connect, "--pad", "-1"), []string{"--pad -1", "0 (no padding) to 16384"}},
		{append(serve, "--pad", "-5"), []string{"0 (no padding) to 16384"}},
		{append(serve, "--ca", "ca.pem"), []string{"--client-ca ca.pem"}},
	} {
		_, stderr, code := runCode(t, tc.args...)
		for _, w := range tc.want {
			if code == 0 || !strings.Contains(stderr, w) {
				t.Errorf("ztls %s: exit %d, %s; want %q", strings.Join(tc.args, " "), code, stderr, w)
			}
		}
	}
	// Valid values still pass the checks (the connection itself then
	// fails: nothing listens on port 1).
	_, stderr, _ := runCode(t, append(connect, "--groups", "X25519,0x0017", "--ciphers", "chacha20", "--pad", "16384", "--timeout", "2s")...)
	if strings.Contains(stderr, "--groups") || strings.Contains(stderr, "--pad") || strings.Contains(stderr, "--ciphers") {
		t.Fatalf("valid values refused: %s", stderr)
	}
}

// 'ztls bench' runs the testbed command, ztls-bench: its help shows the
// default protocols (this project's TLS 1.3 and ZTLS with the baselines),
// and wrong names and numbers are refused before anything is set up.
func TestUX2BenchDefaultProtocols(t *testing.T) {
	const defaultBenchProtocols = "tls,ztls,gotls,openssl,quic,quic-0rtt"
	help, _, _ := runCode(t, "bench", "--help")
	if !strings.Contains(help, `"`+defaultBenchProtocols+`"`) {
		t.Fatalf("bench --help does not show the default %q:\n%s", defaultBenchProtocols, help)
	}
	// Wrong names and numbers are refused before anything is set up
	// (no root, no namespaces needed to see it).
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocols", "tls,zlts"}, `unknown protocol "zlts"; valid: `},
		{[]string{"--protocols", "tls,tls"}, "listed twice"},
		{[]string{"--scenario", "warm"}, `unknown scenario "warm"; valid: `},
		{[]string{"--runs", "0"}, "--runs 0: want at least 1"},
		{[]string{"--loss", "150"}, "from 0 up to"},
		{[]string{"--auth-rtt", "-3"}, "from 0 to 2000"},
		{[]string{"--rtt", "-1"}, "0 to 2000"},
	} {
		_, stderr, code := runCode(t, append([]string{"bench"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("ztls bench %s: exit %d, %s; want %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}
}

// The turbo-proxy pair with its default wait and quiet on loopback,
// between 'ztls connect' and 'ztls serve': the server's flight comes over
// UDP. (With the old 2 ms floor it never could: the server proxy's flight
// takes its 3 ms --quiet alone.)
func TestUX2TurboProxyDefaultWaitOnLoopback(t *testing.T) {
	ztlsBinary(t)
	noAbortMemory(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}}).WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	backend := "127.0.0.1:" + strconv.Itoa(freePort(t))
	start(t, "serving TLS 1.3 on", "serve", "--listen", backend, "--cert", cert, "--key", key, "--respond", "hello")

	line := start(t, "TurboTLS server proxy on", "turbo-proxy", "--server", "--listen", "127.0.0.1:0", "--backend", backend)
	serverProxy := logAttr(line, "addr")
	line, clientLog := startLog(t, "TurboTLS client proxy on", "turbo-proxy", "--client", "--listen", "127.0.0.1:0",
		"--to", serverProxy, "-v")
	if !strings.Contains(line, "at least 10ms") {
		t.Fatalf("the client proxy does not say its wait: %s", line)
	}
	clientProxy := logAttr(line, "addr")

	// A loaded machine may miss the wait now and then: one of five
	// connections over UDP shows the default works on loopback.
	overUDP := 0
	for i := 0; i < 5 && overUDP == 0; i++ {
		out, stderr, code := runCode(t, "connect", clientProxy, "--mode", "tls", "--ca", caFile,
			"--servername", "www.ztls.test", "--data", "GET /", "--resolver", "127.0.0.1:1")
		if code != 0 || !strings.Contains(out, "hello") {
			t.Fatalf("connect through the proxies: exit %d, %q, %s", code, out, stderr)
		}
		l := clientLog.waitFor(t, ": ")
		if strings.Contains(l, "connection: turbo") {
			overUDP++
		} else {
			t.Logf("connection %d: %s", i+1, l)
		}
	}
	if overUDP == 0 {
		t.Fatal("five connections through the proxy pair with default flags, none over UDP")
	}
}

// Without ztls-bench beside it or on the PATH, 'ztls bench' and 'ztls demo'
// say where the testbed is and how to get it.
func TestBenchWithoutTestbedCommand(t *testing.T) {
	dir := t.TempDir()
	lone := filepath.Join(dir, "ztls")
	if err := os.Link(ztlsBinary(t), lone); err != nil {
		b, err := os.ReadFile(ztlsBinary(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(lone, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{"bench", "demo"} {
		cmd := exec.Command(lone, sub, "--help")
		cmd.Env = append(os.Environ(), "PATH="+dir, benchEnv+"=")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "ztls-bench") || !strings.Contains(string(out), "make build") {
			t.Errorf("ztls %s without ztls-bench: err %v, %s; want the cure", sub, err, out)
		}
	}
}
