package main

// Issue 27, item 6: waits and hints a new user met, through the built
// binary: each failure says what is wrong and what to do next.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// zdata new into a directory that already holds Z-data says whose Z-data
// it is and the ways forward, and leaves the directory as it was.
func TestUX27ZDataNewIntoExistingDirSaysWhatIsThere(t *testing.T) {
	ztlsBinary(t)
	pems := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"www.ztls.test"}}).WritePEM(t, pems)
	out := filepath.Join(t.TempDir(), "zd")
	args := []string{"zdata", "new", "--host", "www.ztls.test", "--port", "8443", "--cert", cert, "--key", key, "--out", out}
	run(t, args...)
	before, err := os.ReadFile(filepath.Join(out, "service.json"))
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCode(t, args...)
	for _, want := range []string{
		"--out " + out + " already holds the Z-data of www.ztls.test port 8443",
		"'ztls zdata rotate " + out + "'",
		"'ztls zdata show " + out + "'",
		"give another --out",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	after, err := os.ReadFile(filepath.Join(out, "service.json"))
	if err != nil || string(after) != string(before) {
		t.Errorf("service.json changed or went: %v", err)
	}
}

// withHint adds the way forward to a refused bind, whether the error
// chain is whole or a command formatted it with %v.
func TestUX27BindHints(t *testing.T) {
	denied := &net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 443},
		Err: os.NewSyscallError("bind", syscall.EACCES)}
	deniedHigh := &net.OpError{Op: "listen", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8443},
		Err: os.NewSyscallError("bind", syscall.EACCES)}
	inUse := &net.OpError{Op: "listen", Net: "udp", Addr: &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53},
		Err: os.NewSyscallError("bind", syscall.EADDRINUSE)}
	for _, tc := range []struct {
		err  error
		want string // "" for no hint
	}{
		{denied, "ports below 1024 need root or the CAP_NET_BIND_SERVICE capability"},
		{fmt.Errorf("serve: %v", denied), "ports below 1024 need root or the CAP_NET_BIND_SERVICE capability"},
		{deniedHigh, ""},
		{inUse, "another process listens on that port: 'ss -ltnp' (TCP) or 'ss -lunp' (UDP) shows which"},
		{fmt.Errorf("dns serve: %v", inUse), "another process listens on that port"},
		{errors.New("something else"), ""},
	} {
		got := withHint(tc.err).Error()
		if tc.want == "" && got != tc.err.Error() || tc.want != "" && !strings.Contains(got, tc.want) {
			t.Errorf("withHint(%q) = %q, want a hint %q", tc.err, got, tc.want)
		}
		if !errors.Is(withHint(tc.err), tc.err) {
			t.Errorf("withHint(%q) lost the error", tc.err)
		}
	}
}

// dns serve on a port another process holds says how to find it.
func TestUX27AddressInUseHint(t *testing.T) {
	ztlsBinary(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	zone := filepath.Join(t.TempDir(), "ztls.test.zone")
	if err := os.WriteFile(zone, []byte("ztls.test. 3600 IN SOA ns1.ztls.test. h.ztls.test. 1 3600 600 86400 60\nztls.test. 3600 IN NS ns1.ztls.test.\nns1.ztls.test. 3600 IN A 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := runCode(t, "dns", "serve", "--zone", zone, "--listen", pc.LocalAddr().String())
	if code != 1 || !strings.Contains(stderr, "address already in use") || !strings.Contains(stderr, "'ss -lunp' (UDP) shows which") {
		t.Fatalf("exit %d, stderr %q; want exit 1 with the ss hint", code, stderr)
	}
}

// A lookup over DNS over TLS to a resolver whose certificate is not
// trusted fails after one handshake, names the resolver and hints
// --dns-ca and --dns-servername (issue 27: it waited 5 s and said
// neither).
func TestUX27UntrustedDoTResolverHint(t *testing.T) {
	ztlsBinary(t)
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"dns.ztls.test"}})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: leaf.Chain, PrivateKey: leaf.Key}}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var handshakes atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			handshakes.Add(1)
			c.(*tls.Conn).Handshake() // the client refuses the certificate
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	_, stderr, code := runCode(t, "lookup", "www.ztls.test", "--resolver", addr, "--dns-transport", "tls", "--timeout", "30s")
	ln.Close()
	<-done
	for _, want := range []string{"DNS over TLS to " + addr, "certificate", "--dns-ca FILE", "--dns-servername NAME"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code == 0 {
		t.Errorf("exit 0; want a failure")
	}
	if n := handshakes.Load(); n != 1 {
		t.Errorf("%d handshakes with the resolver; want 1 (a certificate error is not transient)", n)
	}
}
