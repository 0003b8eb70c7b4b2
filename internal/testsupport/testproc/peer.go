package testproc

import (
	"crypto/tls"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// Start runs the peer name with args until the test ends (the test is
// skipped when name is not installed) and returns its output, stdout and
// stderr together, as it is written.
func Start(t testing.TB, name string, args ...string) *Buffer {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		t.Skipf("%s not installed (make deps installs it)", name)
	}
	out := new(Buffer)
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	stdin, _ := cmd.StdinPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return out
}

// WaitListening waits up to 10 s for a TCP listener on addr and fails the
// test if none comes.
func WaitListening(t testing.TB, addr string) {
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

// Serve accepts on ln until the test ends: each connection, with a 5 s
// deadline, goes to handle and is closed after it.
func Serve(t testing.TB, ln net.Listener, handle func(c net.Conn)) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				handle(c)
			}()
		}
	}()
}

// ServeGoTLS serves crypto/tls on addr until the test ends: each
// connection, with a 5 s deadline, goes to handle.
func ServeGoTLS(t testing.TB, addr string, cfg *tls.Config, handle func(c *tls.Conn)) net.Listener {
	t.Helper()
	ln, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	Serve(t, ln, func(c net.Conn) { handle(c.(*tls.Conn)) })
	return ln
}
