//go:build unix

package authority

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// msgTrunc is the flag of a datagram longer than the buffer it was read
// into.
const msgTrunc = unix.MSG_TRUNC

// rawConn is the socket of a TCP connection, for reads that wait in the
// runtime's poller without a buffer.
func rawConn(c net.Conn) (syscall.RawConn, error) {
	if tc, ok := c.(*net.TCPConn); ok {
		return tc.SyscallConn()
	}
	return nil, errUnsupported
}

// readFD reads from a non-blocking socket, again after EINTR.
func readFD(fd uintptr, b []byte) (int, error) {
	for {
		n, err := unix.Read(int(fd), b)
		if err != unix.EINTR {
			return n, err
		}
	}
}

// wouldBlock reports whether a read on the socket would block now.
func wouldBlock(fd uintptr) bool {
	var peek [1]byte
	_, _, err := unix.Recvfrom(int(fd), peek[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return err == unix.EAGAIN || err == unix.EINTR
}

func isEAGAIN(err error) bool { return err == unix.EAGAIN }
