package main

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"golang.org/x/sys/unix"

	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// openPTY opens a pseudo-terminal pair (what creack/pty does, in four
// calls): the master, where the test types, and the slave, the
// command's standard input.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("opening the pty's slave: %v", err)
	}
	t.Cleanup(func() { m.Close(); s.Close() })
	return m, s
}

// syncBuffer collects a stream while the test polls it.
type syncBuffer struct{ testproc.Buffer }

// waitFor polls b until it contains want.
func (s *syncBuffer) waitFor(t *testing.T, what, want string, other *syncBuffer) {
	t.Helper()
	for deadline := clock.Now().Add(10 * time.Second); clock.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if strings.Contains(s.String(), want) {
			return
		}
	}
	t.Fatalf("no %q on %s:\n%s\nthe other stream:\n%s", want, what, s.String(), other.String())
}

// TestUXConnectInteractive: on a terminal connect sends each line as it
// is typed and prints the answer while the session goes on, for longer
// than --timeout; Ctrl-D half-closes, the echo server closes, and connect
// exits 0.
func TestUXConnectInteractive(t *testing.T) {
	p := newUXPKI(t)
	port := boundPort(t, start(t, "serving TLS 1.3", "serve", "--listen", "127.0.0.1:0", "--cert", p.cert, "--key", p.key, "--echo"))
	master, slave := openPTY(t)
	go func() { // the terminal's echo of what is typed: drained, unused
		buf := make([]byte, 1024)
		for {
			if _, err := master.Read(buf); err != nil {
				return
			}
		}
	}()
	cmd := exec.Command(ztlsBinary(t), append([]string{"connect", "127.0.0.1:" + port}, p.client("--timeout", "1s")...)...)
	var stdout, stderr syncBuffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })

	stderr.waitFor(t, "stderr", "type lines to send", &stdout)
	typeLine := func(line, want string) {
		t.Helper()
		if _, err := master.WriteString(line); err != nil {
			t.Fatal(err)
		}
		stdout.waitFor(t, "stdout", want, &stderr)
	}
	typeLine("first line\n", "first line\n")
	time.Sleep(1500 * time.Millisecond) // longer than --timeout: typing does not count
	typeLine("second line\n", "first line\nsecond line\n")
	select {
	case <-exited:
		t.Fatalf("connect ended before Ctrl-D: %v\nstderr: %s", waitErr, stderr.String())
	default:
	}
	master.WriteString("\x04") // Ctrl-D: end of input
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("after Ctrl-D: %v\nstderr: %s", waitErr, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("connect still running 10 s after Ctrl-D\nstderr: %s", stderr.String())
	}
	if got := stdout.String(); got != "first line\nsecond line\n" {
		t.Fatalf("stdout %q", got)
	}
	if !strings.Contains(stderr.String(), "response: 23 bytes") {
		t.Fatalf("report:\n%s", stderr.String())
	}
}
