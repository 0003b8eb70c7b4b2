//go:build linux

package prevalidate_test

// Peers that cannot be told to bind loopback only (openssl ocsp takes a
// port number, gnutls-serv binds every address) run in a network
// namespace of their own holding only a loopback interface; the tests
// reach them by opening their sockets inside it. (A copy of the small
// helpers of tls13's interop tests, tls13/interop_proc_test.go.)

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/netns"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// nsProc is a process in a network namespace of its own.
type nsProc struct {
	cmd   *exec.Cmd
	netns string // /proc/PID/ns/net
	out   *testproc.Buffer
	done  chan struct{}
}

// startInNetns starts name with args in a new network namespace whose
// loopback interface is up, in dir, and waits until it prints ready or,
// with ready "", until something listens on port there (openssl ocsp
// must not be probed so: it then waits for that connection's request,
// and answers nobody else). The process is stopped when the test ends
// (or by stop).
func startInNetns(t *testing.T, dir, name string, port int, ready string, args ...string) *nsProc {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed (make deps installs it): %v", name, err)
	}
	cmd, err := netns.Command(path, args...)
	if err != nil {
		t.Skip(err)
	}
	cmd.Dir = dir
	p := &nsProc{cmd: cmd, out: &testproc.Buffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		if os.Geteuid() != 0 {
			t.Skipf("cannot make a network namespace for %s (needs root or CAP_SYS_ADMIN): %v", name, err)
		}
		t.Fatalf("start %s: %v", name, err)
	}
	p.netns = netns.Path(cmd.Process.Pid)
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := clock.Now().Add(10 * time.Second)
	for {
		var err error
		if ready != "" {
			if strings.Contains(p.out.String(), ready) {
				return p
			}
			err = fmt.Errorf("no %q printed", ready)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			var c net.Conn
			c, err = p.dial(ctx, addr)
			cancel()
			if err == nil {
				c.Close()
				return p
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before listening on %s:\n%s", name, addr, p.out.String())
		default:
		}
		if clock.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s: %v\n%s", name, addr, err, p.out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop kills the process and waits for it.
func (p *nsProc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Kill()
	<-p.done
}

// dial connects to addr inside the process's namespace.
func (p *nsProc) dial(ctx context.Context, addr string) (net.Conn, error) {
	return netns.DialTCP(ctx, p.netns, addr)
}
