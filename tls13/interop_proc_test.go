//go:build linux

package tls13

// Helpers shared by the interop tests that run OpenSSL and GnuTLS command
// line tools as peers: start a tool, wait until it listens, talk to it
// through its stdin and stdout, and stop it when the test ends.
//
// Servers that cannot be told which address to bind (gnutls-serv listens
// on the wildcard address) run in a network namespace of their own that
// holds only a loopback interface; the tests reach them by opening their
// sockets inside that namespace.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"golang.org/x/sys/unix"

	"github.com/ztls-project/ztls/internal/testsupport/netns"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// procTimeout bounds every wait on a peer process.
const procTimeout = 10 * time.Second

// interopFiles are the PEM files of the shared test PKI, for the tools' flags.
type interopFiles struct {
	p       *testPKI
	ca      string
	srvCert string
	srvKey  string
	cliCert string
	cliKey  string
}

// writeInteropFiles writes the ECDSA P-256 test PKI to a temporary directory.
func writeInteropFiles(t *testing.T) *interopFiles {
	t.Helper()
	p := getPKI(t, "ecdsa-p256")
	dir := t.TempDir()
	f := &interopFiles{p: p}
	f.ca = p.ca.WritePEM(t, dir)
	f.srvCert, f.srvKey = writeLeafPEM(t, dir, "server", p.server)
	f.cliCert, f.cliKey = writeLeafPEM(t, dir, "client", p.client)
	return f
}

// writeLeafPEM writes a Certificate's chain and PKCS#8 key to dir.
func writeLeafPEM(t *testing.T, dir, name string, c Certificate) (certFile, keyFile string) {
	t.Helper()
	var certs bytes.Buffer
	for _, der := range c.Chain {
		certs.Write(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(c.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile = dir + "/" + name + ".crt"
	keyFile = dir + "/" + name + ".key"
	if err := os.WriteFile(certFile, certs.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// writeTemp writes data to a new file in the test's temporary directory.
func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := t.TempDir() + "/" + name
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// peerProc is one running OpenSSL or GnuTLS tool.
type peerProc struct {
	t     *testing.T
	name  string
	cmd   *exec.Cmd
	stdin *os.File         // write end of the tool's stdin pipe
	out   *testproc.Buffer // stdout and stderr, interleaved
	done  chan struct{}
	err   error  // exit status, valid once done is closed
	netns string // the process's network namespace, if it has its own
	addr  string // where a server listens
	args  []string
}

// needTool skips the test when a tool is not installed.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (Debian package %s): %v", name, toolPackage(name), err)
	}
	return path
}

func toolPackage(name string) string {
	if strings.HasPrefix(name, "gnutls") {
		return "gnutls-bin"
	}
	return name
}

// startProc starts a tool with args. With ownNetns it runs in a new
// network namespace whose loopback interface is up. The process is killed
// when the test ends.
func startProc(t *testing.T, name string, args []string, ownNetns bool) *peerProc {
	t.Helper()
	path := needTool(t, name)
	var cmd *exec.Cmd
	if ownNetns {
		var err error
		if cmd, err = netns.Command(path, args...); err != nil {
			t.Skip(err)
		}
	} else {
		cmd = exec.Command(path, args...)
	}
	p := &peerProc{t: t, name: name, cmd: cmd, out: &testproc.Buffer{}, done: make(chan struct{}), args: args}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	cmd.Dir = t.TempDir()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = stdinR
	p.stdin = stdinW
	err = cmd.Start()
	stdinR.Close()
	if err != nil {
		stdinW.Close()
		if ownNetns && errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot create a network namespace for %s (needs root or CAP_SYS_ADMIN): %v", name, err)
		}
		t.Fatalf("start %s: %v", name, err)
	}
	if ownNetns {
		p.netns = netns.Path(cmd.Process.Pid)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.stop)
	return p
}

// stop kills the process (if it still runs) and waits for it.
func (p *peerProc) stop() {
	p.stdin.Close()
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	select {
	case <-p.done:
	case <-time.After(procTimeout):
		p.t.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// exited reports whether the process has ended.
func (p *peerProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// output returns everything the process printed so far.
func (p *peerProc) output() string { return p.out.String() }

// fatalf fails the test with the process's output attached.
func (p *peerProc) fatalf(format string, args ...any) {
	p.t.Helper()
	p.t.Fatalf("%s\n--- %s %s output ---\n%s", fmt.Sprintf(format, args...),
		p.name, strings.Join(p.args, " "), p.output())
}

// send writes s to the process's stdin.
func (p *peerProc) send(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, s); err != nil {
		p.fatalf("write to %s stdin: %v", p.name, err)
	}
}

// sendCommand writes a command line (such as s_server's "k") and waits
// until the tool has read it, so that it is not read together with the
// next line (the tools only treat a line read on its own as a command).
func (p *peerProc) sendCommand(line string) {
	p.t.Helper()
	p.send(line)
	deadline := clock.Now().Add(procTimeout)
	for {
		n, err := unix.IoctlGetInt(int(p.stdin.Fd()), unix.TIOCINQ) // FIONREAD
		if err != nil {
			p.fatalf("FIONREAD on %s stdin: %v", p.name, err)
		}
		if n == 0 {
			return
		}
		if p.exited() || clock.Now().After(deadline) {
			p.fatalf("%s did not read its stdin (%d bytes left)", p.name, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitOutputN waits until the output holds want at least n times.
func (p *peerProc) waitOutputN(want string, n int) {
	p.t.Helper()
	deadline := clock.Now().Add(procTimeout)
	for strings.Count(p.output(), want) < n {
		if p.exited() {
			// A last look: the process may have printed it on its way out.
			if strings.Count(p.output(), want) >= n {
				return
			}
			p.fatalf("%s exited (%v) before printing %q", p.name, p.err, want)
		}
		if clock.Now().After(deadline) {
			p.fatalf("%s did not print %q within %v", p.name, want, procTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (p *peerProc) waitOutput(want string) { p.t.Helper(); p.waitOutputN(want, 1) }

// wait waits for the process to exit by itself and returns its exit error.
func (p *peerProc) wait() error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(procTimeout):
		p.fatalf("%s did not exit within %v", p.name, procTimeout)
		return nil
	}
}

// freeLoopbackPort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startServerProc starts a server tool. args gets the port to listen on;
// with ownNetns the tool may bind any address, since its namespace holds
// only loopback. It returns once a TCP connect to the port succeeds.
func startServerProc(t *testing.T, name string, args func(port int) []string, ownNetns bool) *peerProc {
	t.Helper()
	// A port free when chosen may be taken by a parallel test before the
	// tool binds it: the tool then exits saying so, and gets another.
	for range 3 {
		if p, inUse := tryServerProc(t, name, args, ownNetns); !inUse {
			return p
		}
	}
	t.Fatalf("%s: three ports in a row were taken before it could bind them", name)
	return nil
}

// tryServerProc is one attempt of startServerProc; inUse reports a tool
// that exited because its port was taken (nil p).
func tryServerProc(t *testing.T, name string, args func(port int) []string, ownNetns bool) (*peerProc, bool) {
	t.Helper()
	port := 4433 // a fresh namespace has every port free
	if !ownNetns {
		port = freeLoopbackPort(t)
	}
	p := startProc(t, name, args(port), ownNetns)
	p.addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := clock.Now().Add(procTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := p.dial(ctx)
		cancel()
		if err == nil {
			c.Close()
			return p, false
		}
		if p.exited() {
			if out := strings.ToLower(p.output()); !ownNetns && strings.Contains(out, "in use") {
				t.Logf("%s: port %d was taken before it bound it; another port", name, port)
				return nil, true
			}
			p.fatalf("%s exited (%v) before listening on %s", name, p.err, p.addr)
		}
		if clock.Now().After(deadline) {
			p.fatalf("%s did not listen on %s within %v: %v", name, p.addr, procTimeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dial opens a TCP connection to the server process, inside its network
// namespace if it has one.
func (p *peerProc) dial(ctx context.Context) (net.Conn, error) {
	if p.netns == "" {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", p.addr)
	}
	return netns.DialTCP(ctx, p.netns, p.addr)
}

// dialZTLS connects a ztls client to the server process and runs the handshake.
func (p *peerProc) dialZTLS(t *testing.T, cfg *Config) (*Conn, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
	defer cancel()
	raw, err := p.dial(ctx)
	if err != nil {
		p.fatalf("connect to %s: %v", p.name, err)
	}
	raw.SetDeadline(time.Now().Add(procTimeout))
	c := Client(raw, cfg)
	t.Cleanup(func() { c.Close() })
	return c, c.HandshakeContext(ctx)
}

// mustDialZTLS is dialZTLS that fails the test on a handshake error.
func (p *peerProc) mustDialZTLS(t *testing.T, cfg *Config) *Conn {
	t.Helper()
	c, err := p.dialZTLS(t, cfg)
	if err != nil {
		p.fatalf("ztls handshake with %s: %v", p.name, err)
	}
	return c
}

// exchangeInteractive checks both directions with a tool that prints what
// it receives and sends what it reads from stdin (s_server, s_client and
// gnutls-cli without echo): c's line must show in the tool's output, and a
// line written to the tool's stdin must arrive on c.
func exchangeInteractive(t *testing.T, c net.Conn, p *peerProc, tag string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(procTimeout))
	toPeer := "ping-from-ztls-" + tag + "\n"
	if _, err := io.WriteString(c, toPeer); err != nil {
		p.fatalf("ztls write: %v", err)
	}
	p.waitOutput(strings.TrimSpace(toPeer))
	fromPeer := "pong-from-" + p.name + "-" + tag + "\n"
	p.send(fromPeer)
	readLine(t, c, p, fromPeer)
}

// readLine reads exactly want from c (with the tool's output on failure).
func readLine(t *testing.T, c net.Conn, p *peerProc, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		p.fatalf("ztls read (want %q): %v", want, err)
	}
	if string(got) != want {
		p.fatalf("ztls read %q, want %q", got, want)
	}
}

// serverResult is what a ztls server saw on one connection.
type serverResult struct {
	conn  *Conn
	err   error  // handshake error
	early []byte // 0-RTT data read with ReadEarlyData
}

// startZTLSServer runs a ztls echo server on a loopback port. Connection i
// (from 0) uses cfgs[min(i, len(cfgs)-1)], so a test can "restart" the
// server with a new configuration. Early data is read with HandshakeEarly
// and ReadEarlyData. Each connection's result is sent on the channel after
// the handshake, before echoing.
func startZTLSServer(t *testing.T, cfgs ...*Config) (string, <-chan serverResult) {
	t.Helper()
	results := make(chan serverResult, 16)
	var mu sync.Mutex
	n := 0
	addr := serve(t, loopback(t), func(raw net.Conn) {
		mu.Lock()
		cfg := cfgs[min(n, len(cfgs)-1)]
		n++
		mu.Unlock()
		c := Server(raw, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
		defer cancel()
		res := serverResult{conn: c}
		if res.err = c.HandshakeEarly(ctx); res.err == nil {
			buf := make([]byte, 4096)
			for {
				k, err := c.ReadEarlyData(buf)
				res.early = append(res.early, buf[:k]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					res.err = err
					break
				}
			}
		}
		if res.err == nil {
			res.err = c.HandshakeContext(ctx)
		}
		results <- res
		if res.err == nil {
			echo(c)
		}
		c.Close()
	})
	return addr, results
}

// nextResult waits for the ztls server's next connection.
func nextResult(t *testing.T, results <-chan serverResult, p *peerProc) serverResult {
	t.Helper()
	select {
	case r := <-results:
		return r
	case <-time.After(procTimeout):
		p.fatalf("the ztls server saw no connection from %s within %v", p.name, procTimeout)
		return serverResult{}
	}
}
