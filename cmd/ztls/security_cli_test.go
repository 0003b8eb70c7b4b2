package main

// The security review's attacks on `ztls serve`, through the real binary:
// early data to a server that requires client certificates (each path
// that can answer early), fleets with private registers, and connections
// that send nothing.

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
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

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo/turbotest"
	"github.com/ztls-project/ztls/zdata"
)

// runFail runs the binary, wants it to fail, and returns what it said.
func runFail(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(ztlsBinary(t), args...).CombinedOutput()
	if err == nil {
		t.Fatalf("ztls %s succeeded, want a refusal:\n%s", strings.Join(args, " "), out)
	}
	return string(out)
}

// serveRefused runs `ztls serve` and wants it to refuse to start: it
// returns what the server said before exiting, and fails the test (and
// stops the server) if the server starts serving instead.
func serveRefused(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(ztlsBinary(t), args...)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "serving TLS 1.3 on") {
			stopCmd(cmd)
			t.Fatalf("ztls %s started, want a refusal:\n%s", strings.Join(args, " "), out.String())
		}
	}
	if err := cmd.Wait(); err == nil {
		t.Fatalf("ztls %s exited cleanly, want a refusal:\n%s", strings.Join(args, " "), out.String())
	}
	return out.String()
}

// clientCert writes a client certificate and its CA; the server trusts the CA.
func clientCert(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"client.test"}, Client: true})
	sub := filepath.Join(dir, "client")
	os.MkdirAll(sub, 0o700)
	certFile, keyFile = leaf.WritePEM(t, sub)
	return ca.WritePEM(t, sub), certFile, keyFile
}

// Point 1: `serve --client-auth require` must not act on early data,
// which no certificate covers, in any path that can answer early: the
// --respond answer, the --backend proxy and the TurboTLS UDP flight. An
// anonymous attacker's early request gets nothing: a captured-style ZTLS
// flight over TCP, and on --turbo a ZTLS early request that travels over
// UDP. A client with a certificate gets its answer after the handshake.
// PSK 0-RTT too: a ticket from an authenticated connection carries no
// early data that is acted on before the handshake completes.
func TestCLIClientAuthRequiredRefusesEarlyData(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--turbo", "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	cca, ccert, ckey := clientCert(t, s.dir)

	var backendHits, backendEarly atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		backendHits.Add(1)
		if r.Header.Get("Early-Data") == "1" {
			backendEarly.Add(1)
		}
		io.WriteString(w, "hello")
	}))
	defer backend.Close()
	httpGet := "GET / HTTP/1.1\r\nHost: " + s.host + "\r\nConnection: close\r\n\r\n"
	hostPort := s.host + ":" + strconv.Itoa(s.port)

	for _, path := range []struct {
		name string
		args []string
	}{
		{"respond", []string{"--respond", "hello"}},
		{"backend", []string{"--backend", backend.URL}},
		{"turbo", []string{"--respond", "hello", "--turbo"}},
	} {
		t.Run(path.name, func(t *testing.T) {
			// A new directory claim per server: each subtest's server is
			// the only one on the Z-data directory while it runs.
			args := append([]string{"serve", "--listen", "127.0.0.1:" + strconv.Itoa(s.port), "--zdata", s.zd,
				"--early-window", "300ms", "--early-data", "16384", "--client-auth", "require", "--client-ca", cca, "-v"}, path.args...)
			cmd, log := startLogCmd(t, "ZTLS on", args...)
			defer stopCmd(cmd)
			time.Sleep(350 * time.Millisecond) // past the restart guard: a refusal below is the policy's
			hits := backendHits.Load()

			if path.name == "turbo" {
				// The attacker's early request over UDP: a ZTLS
				// ClientHello and early request as TurboTLS datagrams,
				// no certificate to follow. The server's flight comes
				// back over UDP, rejecting the early data (the report's
				// mode is then tls), without an answer.
				out, stderr, code := runCode(t, "connect", hostPort, "--resolver", dnsAddr, "--ca", s.ca, "--data", "GET /",
					"--json", "--zdata-budget", "2s", "--turbo", "--turbo-wait", "5s")
				var rep dial.Report
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatalf("anonymous turbo client (exit %d): %v\n%s\n%s", code, err, out, stderr)
				}
				if rep.Transport != "turbo" || !rep.EarlyData.Offered {
					t.Fatalf("the attacker's early request did not go over UDP: transport %s (%s), mode %s (%s), early %+v",
						rep.Transport, rep.TurboFallback, rep.Mode, rep.FallbackReason, rep.EarlyData)
				}
				if rep.EarlyData.Accepted || rep.AnswerInFirstFlight || rep.ResponseBytes != 0 || code == 0 {
					t.Fatalf("a client without a certificate was answered: early %+v, first flight %v, %d bytes, exit %d (%s)",
						rep.EarlyData, rep.AnswerInFirstFlight, rep.ResponseBytes, code, rep.Error)
				}
			} else {
				// The attacker's flight: a genuine ZTLS ClientHello and
				// early request, no certificate to follow.
				deliver(t, "127.0.0.1:"+strconv.Itoa(s.port), ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
			}
			log.waitFor(t, "early data is not client-authenticated")
			if got := backendHits.Load(); got != hits {
				t.Fatalf("the backend saw %d requests from a client without a certificate", got-hits)
			}

			// A client with a certificate: refused early, answered after.
			extra := []string{"--cert", ccert, "--key", ckey}
			if path.name == "turbo" {
				extra = append(extra, "--turbo", "--turbo-wait", "5s")
			}
			if path.name == "backend" {
				extra = append(extra, "--data", httpGet)
			}
			rep := s.connect(t, dnsAddr, extra...)
			if rep.EarlyData.Accepted || rep.AnswerInFirstFlight || rep.ResponseBytes == 0 {
				t.Fatalf("with a certificate: mode %s (%s), early %+v, first flight %v, %d bytes",
					rep.Mode, rep.FallbackReason, rep.EarlyData, rep.AnswerInFirstFlight, rep.ResponseBytes)
			}
			log.waitFor(t, "early data is not client-authenticated")
			if path.name == "turbo" {
				return
			}

			// PSK 0-RTT: a ticket from an authenticated connection, then
			// a resumption with the request as 0-RTT data. Refused early
			// (no answer in the first flight, nothing to the backend
			// marked Early-Data: 1), answered after the handshake.
			dir := t.TempDir()
			sess, req := filepath.Join(dir, "sess.bin"), filepath.Join(dir, "req.txt")
			request := "GET /"
			if path.name == "backend" {
				request = httpGet
			}
			writeFile(t, req, request)
			base := []string{"connect", hostPort, "--resolver", dnsAddr, "--ca", s.ca, "--mode", "tls", "--json",
				"--cert", ccert, "--key", ckey}
			var first, resumed dial.Report
			if err := json.Unmarshal([]byte(run(t, append(base, "--data", request, "--sess-out", sess)...)), &first); err != nil {
				t.Fatal(err)
			}
			if first.ResponseBytes == 0 {
				t.Fatalf("the authenticated connection got no answer: %+v", first)
			}
			early := backendEarly.Load()
			if err := json.Unmarshal([]byte(run(t, append(base, "--sess-in", sess, "--early-data", req)...)), &resumed); err != nil {
				t.Fatal(err)
			}
			if !resumed.TLS.Resumed || !resumed.EarlyData.Offered {
				t.Fatalf("the attack was not tried: resumed %v, 0-RTT offered %v", resumed.TLS.Resumed, resumed.EarlyData.Offered)
			}
			if resumed.EarlyData.Accepted || resumed.AnswerInFirstFlight || resumed.ResponseBytes == 0 {
				t.Fatalf("PSK 0-RTT with client certificates required: early %+v, first flight %v, %d bytes",
					resumed.EarlyData, resumed.AnswerInFirstFlight, resumed.ResponseBytes)
			}
			if got := backendEarly.Load(); got != early {
				t.Fatalf("the backend saw %d requests marked Early-Data: 1", got-early)
			}
		})
	}
}

// Point 7: two servers with the same Z-data keys and private registers
// would each accept one captured flight; serve refuses to be the second,
// and a fleet seed without a shared register, saying what to do.
func TestCLIServeRefusesPrivateRegistersOnSharedKeys(t *testing.T) {
	s := newSite(t)
	p := strconv.Itoa(s.port)
	cmd, _ := startLogCmd(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+p, "--zdata", s.zd, "--respond", "hello")
	out := runFail(t, "serve", "--listen", "127.0.0.2:"+p, "--zdata", s.zd, "--respond", "hello")
	if !strings.Contains(out, "already serves this Z-data directory") || !strings.Contains(out, "--strike-register") ||
		!strings.Contains(out, strconv.Itoa(cmd.Process.Pid)) {
		t.Fatalf("second server on one directory:\n%s", out)
	}
	// Once the first is gone the directory is free again.
	stopCmd(cmd)
	cmd, _ = startLogCmd(t, "ZTLS on", "serve", "--listen", "127.0.0.2:"+p, "--zdata", s.zd, "--respond", "hello")
	stopCmd(cmd)

	// A fleet directory (seed file): refused without a shared register.
	seed := filepath.Join(s.dir, "fleet.seed")
	if err := os.WriteFile(seed, []byte("0123456789abcdef0123456789abcdef"), 0o600); err != nil {
		t.Fatal(err)
	}
	fleet := filepath.Join(s.dir, "fleet")
	d, err := zdata.LoadDir(s.zd)
	if err != nil {
		t.Fatal(err)
	}
	crt, key := d.Config.Cert, d.Config.Key
	run(t, "zdata", "new", "--host", s.host, "--port", p, "--cert", crt, "--key", key, "--out", fleet, "--seed-file", seed)
	out = runFail(t, "serve", "--listen", "127.0.0.1:"+p, "--zdata", fleet, "--respond", "hello")
	if !strings.Contains(out, "fleet seed") || !strings.Contains(out, "--strike-register") {
		t.Fatalf("fleet without a shared register:\n%s", out)
	}
}

// Point 7, mixed registers: a server sharing a register (Redis) and one
// with a private register on the same Z-data directory would each accept
// a captured flight the other has seen. Whichever starts second is
// refused, saying why and what to do, in both orders.
func TestCLIServeRefusesMixedRegistersOnOneDirectory(t *testing.T) {
	s := newSite(t)
	redis, _ := startRedis(t)
	p := strconv.Itoa(s.port)
	private := []string{"serve", "--listen", "127.0.0.1:" + p, "--zdata", s.zd, "--respond", "hello"}
	shared := []string{"serve", "--listen", "127.0.0.2:" + p, "--zdata", s.zd, "--respond", "hello", "--strike-register", "redis://" + redis}

	// Shared first: the private server is refused while it runs.
	cmd, _ := startLogCmd(t, "ZTLS on", shared...)
	out := serveRefused(t, private...)
	if !strings.Contains(out, "already serves this Z-data directory with a shared strike register") ||
		!strings.Contains(out, "--strike-register redis://") {
		t.Fatalf("private server beside a shared one:\n%s", out)
	}
	stopCmd(cmd)

	// Private first: the shared server is refused while it runs, and
	// told which process to restart with the register.
	cmd, _ = startLogCmd(t, "ZTLS on", private...)
	out = serveRefused(t, shared...)
	if !strings.Contains(out, "already serves this Z-data directory with a private strike register") ||
		!strings.Contains(out, "pid "+strconv.Itoa(cmd.Process.Pid)) || !strings.Contains(out, "restart it with the same --strike-register") {
		t.Fatalf("shared server beside a private one:\n%s", out)
	}
	stopCmd(cmd)
	// Each alone is fine.
	cmd, _ = startLogCmd(t, "ZTLS on", shared...)
	stopCmd(cmd)
}

// Point 15: connections that send nothing hold no slot past
// --handshake-timeout, one address holds at most --max-conns-per-ip, and
// another client is served meanwhile.
func TestCLIServeBoundsIdleConnections(t *testing.T) {
	s := newSite(t)
	p := strconv.Itoa(s.port)
	cmd, _ := startLogCmd(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+p, "--zdata", s.zd, "--respond", "hello",
		"--max-conns-per-ip", "8", "--handshake-timeout", "1s")
	defer stopCmd(cmd)
	addr := "127.0.0.1:" + p
	// 40 silent connections from 127.0.0.1.
	var idle []net.Conn
	for range 40 {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// Another address still gets a handshake and an answer (Go's
	// crypto/tls as the client).
	roots, err := tls13.LoadCertPool(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 5 * time.Second},
		Config: &tls.Config{ServerName: s.host, RootCAs: roots, MinVersion: tls.VersionTLS13}}
	other, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("a client from another address: %v", err)
	}
	other.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(other, "GET /")
	if b, _ := io.ReadAll(other); string(b) != "hello" {
		t.Fatalf("a client from another address got %q", b)
	}
	other.Close()
	// Every silent connection is closed by the server: 32 at once (over
	// the per-address share), the 8 others when their handshake time runs
	// out. A read that times out instead means a slot held forever.
	closed := 0
	for _, c := range idle {
		// (The server may say why first: an alert, then the close.)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err == nil || isReset(err) {
			closed++
		}
	}
	if closed != len(idle) {
		t.Fatalf("%d of %d silent connections closed by the server", closed, len(idle))
	}
}

// Point 15, per network: the addresses of one /24 (127.0.0.1 to .3, two
// connections each, within --max-conns-per-ip 2) hold at most
// --max-conns-per-net 4 connections: the two over it are closed at once,
// a client from another /24 (127.0.1.1) is still served, and the metrics
// count the refusals. (IPv6 networks: connlimit's TestPerNetworkIPv6.)
func TestCLIServeCapsConnectionsPerNetwork(t *testing.T) {
	s := newSite(t)
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	ready, _, cmd := startProc(t, "metrics on", "serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello",
		"--max-conns-per-ip", "2", "--max-conns-per-net", "4", "--handshake-timeout", "1m", "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	metricsURL := strings.TrimSpace(ready[strings.Index(ready, "http://"):])
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for _, src := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2", "127.0.0.3", "127.0.0.3"} {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The server accepts in arrival order: 127.0.0.3's two are over the
	// network's share, and closed without a byte.
	for _, c := range conns[4:] {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || (err != io.EOF && !isReset(err)) {
			t.Fatalf("a connection over the network's share: %d bytes, %v; want it closed", n, err)
		}
	}
	roots, err := tls13.LoadCertPool(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 1, 1)}, Timeout: 5 * time.Second},
		Config: &tls.Config{ServerName: s.host, RootCAs: roots, MinVersion: tls.VersionTLS13}}
	other, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("a client from another network: %v", err)
	}
	other.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(other, "GET /")
	if b, _ := io.ReadAll(other); string(b) != "hello" {
		t.Fatalf("a client from another network got %q", b)
	}
	other.Close()
	m := scrape(t, metricsURL)
	if m["ztls_conns_refused_per_net_total"] != 2 || m["ztls_conns_refused_per_ip_total"] != 0 {
		t.Fatalf("refusals counted: per net %v, per ip %v; want 2 and 0", m["ztls_conns_refused_per_net_total"], m["ztls_conns_refused_per_ip_total"])
	}
}

// Point 15, handshake bound on every path of serve: a client that
// connects and sends nothing, one that sends its ClientHello (with or
// without ALPN h2, or a ZTLS first flight with an early request) and
// then nothing, and on --turbo one that links a TCP connection to its
// UDP flight and then sends nothing, are each closed by the server at
// --handshake-timeout (1 s), not at the idle --timeout (5 min) nor
// TurboTLS's default link timeout (10 s): on --respond, on --backend
// (HTTP/1.1 and HTTP/2), and on both over TurboTLS's TCP leg. Each
// connection is watched until the server closes it; 6 s without a close
// (six times the bound) counts as held.
func TestCLIServeBoundsStalledHandshakes(t *testing.T) {
	s := newSite(t)
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer backend.Close()
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	hello := func(protos ...string) []byte {
		e := tls13.NewClientEngine(&tls13.Config{ServerName: s.host, InsecureSkipVerify: true, NextProtos: protos})
		if err := e.Start(nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), e.Output()...)
	}
	for _, path := range []struct {
		name  string
		args  []string
		turbo bool
	}{
		{"respond", []string{"--respond", "hello"}, false},
		{"backend", []string{"--backend", backend.URL}, false},
		{"turbo-respond", []string{"--respond", "hello", "--turbo"}, true},
		{"turbo-backend", []string{"--backend", backend.URL, "--turbo"}, true},
	} {
		t.Run(path.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", addr, "--zdata", s.zd, "--handshake-timeout", "1s", "--timeout", "5m"}, path.args...)
			cmd, _ := startLogCmd(t, "ZTLS on", args...)
			defer stopCmd(cmd)
			stalled := map[string]net.Conn{}
			for name, first := range map[string][]byte{
				"silent":               nil,
				"ClientHello":          hello(),
				"ClientHello, ALPN h2": hello("h2", "http/1.1"),
				"ZTLS early request":   ztlsFlight(t, s, []byte("GET /transfer?amount=100")),
			} {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Write(first); err != nil {
					t.Fatal(err)
				}
				stalled[name] = c
			}
			if path.turbo {
				c := turboLinkThenStall(t, addr, hello())
				defer c.Close()
				stalled["TurboTLS link"] = c
			}
			held := make(chan string, len(stalled))
			for name, c := range stalled {
				go func() {
					c.SetReadDeadline(time.Now().Add(6 * time.Second))
					// The server's flight (and an alert) may come first.
					if _, err := io.Copy(io.Discard, c); err != nil && !isReset(err) {
						held <- fmt.Sprintf("%s: %v", name, err)
						return
					}
					held <- ""
				}()
			}
			for range stalled {
				if h := <-held; h != "" {
					t.Errorf("a stalled handshake was not closed at --handshake-timeout: %s", h)
				}
			}
		})
	}
}

// turboLinkThenStall sends hello as a TurboTLS UDP flight to addr, waits
// for the server's first response datagram (the server's flight is
// ready), links a TCP connection to it, and sends nothing more: the
// handshake waits for a Finished that never comes.
func turboLinkThenStall(t *testing.T, addr string, hello []byte) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	link, err := turbotest.SendFlight(ctx, addr, hello, 4) // room for the server's flight
	if err != nil {
		t.Fatalf("no TurboTLS answer: %v", err)
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(link); err != nil {
		t.Fatal(err)
	}
	return c
}

func isReset(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "reset by peer") || strings.Contains(err.Error(), "broken pipe"))
}

func startLogCmd(t *testing.T, ready string, args ...string) (*exec.Cmd, *logLines) {
	t.Helper()
	_, log, cmd := startProc(t, ready, args...)
	return cmd, log
}

// stopCmd stops a server the way an operator does (SIGINT), or kills it.
func stopCmd(cmd *exec.Cmd) {
	cmd.Process.Signal(os.Interrupt)
	waitOrKill(cmd)
}

// waitOrKill waits up to 5 s for a process told to end, then kills it.
func waitOrKill(cmd *exec.Cmd) { testproc.WaitOrKill(cmd, 5*time.Second) }

// A server alone on its Z-data directory keeps its anti-replay memory
// across a clean restart (so early data is taken at once, and a flight
// accepted before the restart is refused after it), and after a crash
// refuses early data that may predate its start.
func TestCLIServeRestartKeepsReplayMemory(t *testing.T) {
	s := newSite(t)
	p := strconv.Itoa(s.port)
	addr := "127.0.0.1:" + p
	args := []string{"serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello", "-v", "--early-window", "2s"}

	cmd, log := startLogCmd(t, "ZTLS on", args...)
	flight := ztlsFlight(t, s, []byte("GET /transfer?amount=100"))
	deliver(t, addr, flight)
	log.waitFor(t, "ZTLS accepted") // a directory never served: no wait
	stopCmd(cmd)                    // SIGINT: a clean stop saves the register

	cmd, log = startLogCmd(t, "ZTLS on", args...)
	deliver(t, addr, flight)
	log.waitFor(t, "rejected (replayed ClientHello)")
	deliver(t, addr, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	log.waitFor(t, "ZTLS accepted") // memory continued: no restart guard
	cmd.Process.Kill()              // a crash: nothing saved
	cmd.Wait()

	_, log, cmd = startProc(t, "did not stop cleanly", args...)
	defer stopCmd(cmd)
	log.waitFor(t, "ZTLS on")
	deliver(t, addr, flight)
	log.waitFor(t, "the strike register started after this ClientHello")
}
