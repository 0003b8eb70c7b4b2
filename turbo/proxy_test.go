package turbo_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// proxyPair starts a server proxy in front of backend and a client proxy
// pointing at it; it returns the client proxy's address.
func proxyPair(t *testing.T, backend string, wait time.Duration) (string, *turbo.ServerProxy) {
	t.Helper()
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spc, err := net.ListenPacket("udp", sln.Addr().String())
	if err != nil {
		sln.Close()
		t.Fatal(err)
	}
	sp := turbo.NewServerProxy(backend, turbo.Config{})
	go sp.ServeUDP(spc)
	go sp.Serve(sln)
	t.Cleanup(func() { sln.Close(); sp.Close() })
	addr := netip.MustParseAddrPort(sln.Addr().String())
	cp := &turbo.ClientProxy{ServerTCP: addr, ServerUDP: addr, Client: turbo.ClientConfig{Wait: wait}, Logf: t.Logf}
	cln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go cp.Serve(cln)
	t.Cleanup(func() { cln.Close() })
	return cln.Addr().String(), sp
}

// Our own client and server through the pair: the bytes pass unchanged
// (ZTLS included: the early answer rides in the UDP flight).
func TestProxyPairGo(t *testing.T) {
	w, err := lab.Start(lab.Options{Respond: "hello via proxies"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	front, sp := proxyPair(t, w.ServerAddr, 5*time.Second)
	for i, z := range []bool{false, true} {
		raw, err := net.Dial("tcp", front)
		if err != nil {
			t.Fatal(err)
		}
		cfg := w.ClientTLS()
		cfg.ServerName = w.Host
		c := tls13.Client(raw, cfg)
		if z {
			c.SetZData(w.Service.Records(clock.Now())[0].Offer(w.Cert.Leaf))
			c.SetEarlyData([]byte("GET /"), true)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		if !z {
			c.Write([]byte("GET /"))
		}
		got, err := io.ReadAll(c)
		if err != nil || string(got) != "hello via proxies" {
			t.Fatalf("got %q, %v", got, err)
		}
		if st := c.ConnectionState(); z && (!st.ZTLS || !st.AnswerInFirstFlight) {
			t.Fatalf("ztls %v, answer in first flight %v", st.ZTLS, st.AnswerInFirstFlight)
		}
		c.Close()
		if s := sp.Stats(); s.Linked != int64(i+1) {
			t.Fatalf("server proxy linked %d connections: %+v", s.Linked, s)
		}
	}
}

// openssl s_client -> client proxy -> server proxy -> openssl s_server.
func TestProxyPairOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed (make deps)")
	}
	w, err := lab.Start(lab.Options{External: true, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := exec.CommandContext(ctx, "openssl", "s_server", "-accept", w.ServerAddr, "-cert", w.CertFile, "-key", w.KeyFile,
		"-tls1_3", "-www", "-quiet")
	logPath := filepath.Join(t.TempDir(), "s_server.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	srv.Stdout, srv.Stderr = logFile, logFile
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Process.Kill(); srv.Wait() })
	// Wait until s_server listens.
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", w.ServerAddr)
		if err == nil {
			c.Close()
			break
		}
		if i > 200 {
			log, _ := os.ReadFile(logPath)
			t.Fatalf("s_server did not start: %s", log)
		}
		time.Sleep(25 * time.Millisecond)
	}
	front, sp := proxyPair(t, w.ServerAddr, 5*time.Second)
	before := sp.Stats().Linked
	cli := exec.CommandContext(ctx, "openssl", "s_client", "-connect", front, "-servername", w.Host, "-CAfile", w.CAFile,
		"-verify_return_error", "-tls1_3", "-quiet")
	cli.Stdin = strings.NewReader("GET / HTTP/1.0\r\n\r\n")
	out, err := cli.CombinedOutput()
	if err != nil {
		t.Fatalf("s_client: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("HTTP/1.0 200 ok")) || !bytes.Contains(out, []byte("TLSv1.3")) {
		t.Fatalf("s_client output:\n%s", out)
	}
	if s := sp.Stats(); s.Linked != before+1 {
		t.Fatalf("the connection did not go through TurboTLS: %+v", s)
	}
}

// With UDP blocked the proxies still connect the client, over TCP.
func TestProxyPairUDPBlocked(t *testing.T) {
	w, err := lab.Start(lab.Options{Respond: "tcp only"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := turbo.NewServerProxy(w.ServerAddr, turbo.Config{})
	go sp.Serve(sln) // no UDP at all
	defer func() { sln.Close(); sp.Close() }()
	hole, _ := net.ListenPacket("udp", "127.0.0.1:0")
	defer hole.Close()
	cp := &turbo.ClientProxy{ServerTCP: netip.MustParseAddrPort(sln.Addr().String()),
		ServerUDP: netip.MustParseAddrPort(hole.LocalAddr().String()), Client: turbo.ClientConfig{Wait: 20 * time.Millisecond}}
	cln, _ := net.Listen("tcp", "127.0.0.1:0")
	go cp.Serve(cln)
	defer cln.Close()
	raw, err := net.Dial("tcp", cln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	cfg := w.ClientTLS()
	cfg.ServerName = w.Host
	c := tls13.Client(raw, cfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("x"))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "tcp only" {
		t.Fatalf("got %q, %v", got, err)
	}
}

func FuzzClientHelloReader(f *testing.F) {
	eng := tls13.NewClientEngine(&tls13.Config{ServerName: "x.test"})
	eng.Start(nil, nil, nil)
	f.Add(eng.Output())
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte{22, 3, 1, 0, 2, 1, 0, 22, 3, 1, 0, 2, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		turbo.ReadClientHelloForFuzz(bytes.NewReader(b))
	})
}
