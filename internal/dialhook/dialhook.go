// Package dialhook reaches into package dial where no user should: the
// testbed's UDP loss and blocking emulation, and dial's own tests, wrap
// the client's TurboTLS UDP socket. The hook travels in the context (as
// net/http/httptrace's does), so dial.Options carry only what users set.
package dialhook

import (
	"context"
	"net"
)

type wrapUDPKey struct{}

// WithWrapUDP returns a copy of ctx with which dial.Connect passes each
// TurboTLS UDP socket it opens through wrap before using it.
func WithWrapUDP(ctx context.Context, wrap func(net.Conn) net.Conn) context.Context {
	return context.WithValue(ctx, wrapUDPKey{}, wrap)
}

// WrapUDP returns the wrapper ctx carries (nil: none).
func WrapUDP(ctx context.Context) func(net.Conn) net.Conn {
	wrap, _ := ctx.Value(wrapUDPKey{}).(func(net.Conn) net.Conn)
	return wrap
}
