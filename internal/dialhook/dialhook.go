// Package dialhook reaches into package dial where no user should: the
// testbed's UDP loss and blocking emulation, and dial's own tests, wrap
// the client's TurboTLS UDP socket. The hook travels in the context (as
// net/http/httptrace's does), so dial.Options carry only what users set.
package dialhook

import (
	"context"
	"net"
	"net/netip"
)

type wrapUDPKey struct{}

// WithWrapUDP returns a copy of ctx with which dial.Connect passes each
// TurboTLS UDP socket it opens through wrap before using it.
func WithWrapUDP(ctx context.Context, wrap func(net.Conn) net.Conn) context.Context {
	return context.WithValue(ctx, wrapUDPKey{}, wrap)
}

// wrapUDP returns the wrapper ctx carries (nil: none).
func wrapUDP(ctx context.Context) func(net.Conn) net.Conn {
	wrap, _ := ctx.Value(wrapUDPKey{}).(func(net.Conn) net.Conn)
	return wrap
}

// DialUDP returns the opener of TurboTLS UDP sockets ctx asks for (a
// turbo.ClientConfig.DialUDP): the default socket passed through the
// wrapper WithWrapUDP set; nil when ctx carries none.
func DialUDP(ctx context.Context) func(netip.AddrPort) (net.Conn, error) {
	wrap := wrapUDP(ctx)
	if wrap == nil {
		return nil
	}
	return func(addr netip.AddrPort) (net.Conn, error) {
		c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		if err != nil {
			return nil, err
		}
		return wrap(c), nil
	}
}
