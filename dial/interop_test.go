package dial

// ZTLS meets servers and clients that don't know it (docs/ztls-spec.md, Section 6): a
// ztls client with valid Z-data against OpenSSL, GnuTLS and crypto/tls
// servers, and plain TLS 1.3 clients against a ZTLS server.

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// ztlsAgainst connects with Z-data in hand to a server that has none of its keys.
func ztlsAgainst(t *testing.T, w *lab.World) *Result {
	t.Helper()
	mem := NewMemory()
	var out bytes.Buffer
	r, err := connect(t, w, func(o *Options) {
		o.Memory, o.Out, o.Request = mem, &out, []byte("ping\n")
		o.ReadResponse = 5
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "tls" || rep.ResponseBytes == 0 {
		t.Fatalf("mode %s, %d response bytes", rep.Mode, rep.ResponseBytes)
	}
	// The second connection: aborting servers are remembered.
	if rep.FallbackReason == ReasonServerAborted && !mem.Aborted(w.Host, w.Port, clock.Now()) {
		t.Fatal("abort not remembered")
	}
	t.Logf("server behaviour: %s", rep.FallbackReason)
	return r
}

func TestZTLSClientAgainstOpenSSL(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	testproc.Start(t, "openssl", "s_server", "-accept", "127.0.0.1:"+strconv.Itoa(w.Port), "-cert", w.CertFile, "-key", w.KeyFile,
		"-tls1_3", "-rev", "-quiet")
	testproc.WaitListening(t, w.ServerAddr)
	r := ztlsAgainst(t, w)
	// OpenSSL skips early data it can't decrypt and completes the handshake.
	if r.Report.FallbackReason != ReasonRejected || !r.Report.EarlyData.Offered || r.Report.EarlyData.Accepted {
		t.Fatalf("OpenSSL: %+v", r.Report)
	}
}

func TestZTLSClientAgainstGoServer(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	cert, err := tls.LoadX509KeyPair(w.CertFile, w.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	testproc.ServeGoTLS(t, w.ServerAddr, &tls.Config{Certificates: []tls.Certificate{cert}}, func(c *tls.Conn) {
		buf := make([]byte, 100)
		if n, err := c.Read(buf); err == nil {
			c.Write(bytes.ToUpper(buf[:n]))
		}
	})
	r := ztlsAgainst(t, w)
	// crypto/tls aborts on early_data without a PSK: one retry without ztls.
	if r.Report.FallbackReason != ReasonServerAborted {
		t.Fatalf("crypto/tls: %q", r.Report.FallbackReason)
	}
}

// gnutls-serv binds every address; it runs in a network namespace of its
// own, joined to this one by a veth pair whose addresses exist only there.
func TestZTLSClientAgainstGnuTLS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace (gnutls-serv cannot bind loopback only)")
	}
	ns := fmt.Sprintf("ztlsg%d", os.Getpid()%100000)
	hostIP, nsIP := "10.213.7.1", "10.213.7.2"
	sh := func(args ...string) {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v %s", strings.Join(args, " "), err, out)
		}
	}
	sh("netns", "add", ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	sh("link", "add", ns+"a", "type", "veth", "peer", "name", ns+"b")
	t.Cleanup(func() { exec.Command("ip", "link", "del", ns+"a").Run() })
	sh("link", "set", ns+"b", "netns", ns)
	sh("addr", "add", hostIP+"/30", "dev", ns+"a")
	sh("link", "set", ns+"a", "up")
	sh("-n", ns, "addr", "add", nsIP+"/30", "dev", ns+"b")
	sh("-n", ns, "link", "set", ns+"b", "up")
	sh("-n", ns, "link", "set", "lo", "up")

	w := startWorld(t, lab.Options{External: true, HostIP: nsIP})
	testproc.Start(t, "ip", "netns", "exec", ns, "gnutls-serv", "--port", strconv.Itoa(w.Port), "--echo",
		"--x509certfile", w.CertFile, "--x509keyfile", w.KeyFile, "--disable-client-cert", "--priority", "NORMAL:-VERS-ALL:+VERS-TLS1.3")
	testproc.WaitListening(t, net.JoinHostPort(nsIP, strconv.Itoa(w.Port)))
	r := ztlsAgainst(t, w)
	// GnuTLS, like OpenSSL, skips the early data it cannot decrypt.
	if r.Report.FallbackReason != ReasonRejected || r.Report.EarlyData.Accepted {
		t.Fatalf("GnuTLS: %q", r.Report.FallbackReason)
	}
}

// Plain TLS 1.3 clients against a ZTLS server: nothing changes for them.
func TestPlainClientsAgainstZTLSServer(t *testing.T) {
	w := startWorld(t, lab.Options{External: false})
	dir := t.TempDir()
	caFile := dir + "/ca.pem"
	if err := os.WriteFile(caFile, w.RootsPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("crypto/tls", func(t *testing.T) {
		c, err := tls.Dial("tcp", w.ServerAddr, &tls.Config{RootCAs: w.Roots, ServerName: w.Host})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte("GET /"))
		got, _ := io.ReadAll(c)
		if string(got) != "hello" {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("openssl s_client", func(t *testing.T) {
		if _, err := exec.LookPath("openssl"); err != nil {
			t.Skip("openssl not installed")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "openssl", "s_client", "-connect", w.ServerAddr, "-servername", w.Host,
			"-CAfile", caFile, "-verify_return_error", "-tls1_3", "-quiet", "-ign_eof")
		cmd.Stdin = strings.NewReader("GET /")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "hello") {
			t.Fatalf("s_client: %v\n%s", err, out)
		}
	})
	t.Run("gnutls-cli", func(t *testing.T) {
		if _, err := exec.LookPath("gnutls-cli"); err != nil {
			t.Skip("gnutls-cli not installed")
		}
		host, port, _ := net.SplitHostPort(w.ServerAddr)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "gnutls-cli", "--port", port, "--x509cafile", caFile, "--sni-hostname", w.Host,
			"--verify-hostname", w.Host, "--logfile", "/dev/null", host)
		cmd.Stdin = strings.NewReader("GET /")
		out, err := cmd.CombinedOutput()
		if !strings.Contains(string(out), "hello") {
			t.Fatalf("gnutls-cli: %v\n%s", err, out)
		}
	})
}
