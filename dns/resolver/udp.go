package resolver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/miekg/dns"
)

// exchangeUDP sends m to server from a fresh socket (so a fresh random
// source port) with a fresh random ID, and waits for a datagram that comes
// from server, fits the advertised buffer and answers exactly the question.
// Everything else is dropped and the wait goes on until ctx ends. A
// truncated reply returns errTruncated.
func exchangeUDP(ctx context.Context, server *net.UDPAddr, m *dns.Msg) (*dns.Msg, error) {
	network := "udp4"
	if server.IP.To4() == nil {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, nil)
	if err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(d)
	}

	wire := *m // shallow: only the ID changes
	wire.Id = uint16(rand.Uint32())
	packed, err := wire.Pack()
	if err != nil {
		return nil, fmt.Errorf("resolver: packing query: %w", err)
	}
	if _, err := conn.WriteToUDP(packed, server); err != nil {
		return nil, fmt.Errorf("resolver: %w", err)
	}
	want := server.AddrPort()
	// One byte more than the largest datagram shows oversized replies.
	buf := make([]byte, dns.MaxMsgSize+1)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("resolver: %w", err)
		}
		if from.Addr().Unmap() != want.Addr().Unmap() || from.Port() != want.Port() {
			continue // errWrongSource
		}
		if n > UDPBufferSize {
			continue // errOversized
		}
		reply, err := checkReply(&wire, buf[:n])
		if err != nil {
			continue
		}
		if reply.Truncated {
			return nil, errTruncated
		}
		return reply, nil
	}
}
