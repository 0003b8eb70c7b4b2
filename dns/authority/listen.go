package authority

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// ListenUDPAndTCP opens UDP and TCP on the same address. With port 0 the
// TCP listener takes the port UDP got, so both share one port; a port
// free for UDP may be taken for TCP, so that case tries again.
func ListenUDPAndTCP(addr string) (net.PacketConn, net.Listener, error) {
	pcs, ln, err := listenUDPAndTCP(addr, 1, net.ListenConfig{})
	if err != nil {
		return nil, nil, err
	}
	return pcs[0], ln, nil
}

// ListenReusePort opens n UDP sockets and one TCP listener on the same
// address and port, the UDP sockets with SO_REUSEPORT: the kernel spreads
// clients over them by a hash of their address and port, so n sockets
// each served by ServeUDP use n CPUs without contending for one socket's
// lock. Where SO_REUSEPORT is missing it opens one UDP socket. Port 0
// picks a port free for both.
func ListenReusePort(addr string, n int) ([]net.PacketConn, net.Listener, error) {
	if n <= 1 || !reusePortSupported {
		return listenUDPAndTCP(addr, 1, net.ListenConfig{})
	}
	return listenUDPAndTCP(addr, n, net.ListenConfig{Control: setReusePort})
}

func listenUDPAndTCP(addr string, n int, lc net.ListenConfig) ([]net.PacketConn, net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	ctx := context.Background()
	var err error
	for range 20 {
		var pc net.PacketConn
		if pc, err = lc.ListenPacket(ctx, "udp", addr); err != nil {
			return nil, nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err != nil {
			pc.Close()
			if port != "0" {
				break
			}
			continue
		}
		pcs := []net.PacketConn{pc}
		for len(pcs) < n {
			more, err := lc.ListenPacket(ctx, "udp", pc.LocalAddr().String())
			if err != nil {
				for _, p := range pcs {
					p.Close()
				}
				ln.Close()
				return nil, nil, fmt.Errorf("authority: UDP socket %d of %d on %v: %w", len(pcs)+1, n, pc.LocalAddr(), err)
			}
			pcs = append(pcs, more)
		}
		return pcs, ln, nil
	}
	return nil, nil, err
}

// setReusePort is a net.ListenConfig Control function setting
// SO_REUSEPORT.
func setReusePort(network, address string, c syscall.RawConn) error {
	var serr error
	if err := c.Control(func(fd uintptr) { serr = reusePort(fd) }); err != nil {
		return err
	}
	return serr
}
