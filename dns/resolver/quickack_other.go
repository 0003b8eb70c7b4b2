//go:build !linux

package resolver

import "net"

// withQuickAck is a no-op where TCP_QUICKACK does not exist.
func withQuickAck(c net.Conn) net.Conn { return c }
