//go:build unix

package turbo

import (
	"net"
	"testing"
)

// On unix a UDP socket can be polled (the wait's last millisecond), and a
// wrapper that is not a syscall.Conn cannot.
func TestCanPollUnix(t *testing.T) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !canPoll(c) {
		t.Fatal("a UDP socket cannot be polled")
	}
	if canPoll(struct{ net.Conn }{c}) {
		t.Fatal("a wrapper without SyscallConn counts as pollable")
	}
}
