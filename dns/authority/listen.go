package authority

import "net"

// ListenUDPAndTCP opens UDP and TCP on the same address. With port 0 the
// TCP listener takes the port UDP got, so both share one port; a port
// free for UDP may be taken for TCP, so that case tries again.
func ListenUDPAndTCP(addr string) (net.PacketConn, net.Listener, error) {
	_, port, _ := net.SplitHostPort(addr)
	var err error
	for range 20 {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", addr); err != nil {
			return nil, nil, err
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if port != "0" {
			break
		}
	}
	return nil, nil, err
}
