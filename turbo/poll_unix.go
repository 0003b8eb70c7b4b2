//go:build unix

package turbo

import (
	"context"
	"net"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// canPoll reports whether pollUntil can read udp without blocking.
func canPoll(udp net.Conn) bool {
	_, ok := udp.(syscall.Conn)
	return ok
}

// pollUntil reads one datagram from udp, polling without blocking until
// end (then os.ErrDeadlineExceeded) or ctx ends. It serves the last
// millisecond of the wait: Go's runtime sleeps in whole milliseconds in
// its network poller, and a deadline there woke 0.2-0.3 ms late on the
// testbed, which UDP-blocked connections paid on top of the wait. The
// poll yields the processor between tries and lasts at most a
// millisecond, only when the flight has not come by then.
func pollUntil(ctx context.Context, udp net.Conn, buf []byte, end time.Time) (int, error) {
	rc, err := udp.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, err
	}
	udp.SetReadDeadline(time.Time{}) // the runtime's deadline has done its part
	for {
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return true
		}); err != nil {
			return 0, err // ctx's cancel sets a past deadline
		}
		switch {
		case rerr == nil:
			return n, nil
		case rerr != unix.EAGAIN && rerr != unix.EINTR:
			return 0, os.NewSyscallError("recvfrom", rerr)
		case ctx.Err() != nil:
			return 0, ctx.Err()
		case !time.Now().Before(end): // real time: a deadline
			return 0, os.ErrDeadlineExceeded
		}
		runtime.Gosched()
	}
}
