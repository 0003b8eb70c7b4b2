package resolver

import (
	"net"
	"syscall"
)

// quickAckConn re-arms TCP_QUICKACK after every read. Servers that leave
// Nagle's algorithm on for DNS over TCP and TLS (Unbound does) hold each
// pipelined answer until the previous one is acknowledged; with the
// receiver's delayed ACK that costs 40 ms per answer. Acknowledging at once
// keeps pipelined answers flowing. Linux clears the flag by itself, hence
// the re-arming.
type quickAckConn struct {
	*net.TCPConn
	raw syscall.RawConn
}

func withQuickAck(c net.Conn) net.Conn {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return c
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return c
	}
	q := &quickAckConn{TCPConn: tc, raw: raw}
	q.arm()
	return q
}

func (c *quickAckConn) arm() {
	c.raw.Control(func(fd uintptr) {
		syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_QUICKACK, 1)
	})
}

func (c *quickAckConn) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	c.arm()
	return n, err
}
