//go:build !unix

package authority

import (
	"net"
	"syscall"
)

// Without Unix sockets, a stream connection waits in a two-byte read and
// an over-long datagram is not recognised (the query then fails to parse).
const msgTrunc = 0

func rawConn(net.Conn) (syscall.RawConn, error) { return nil, errUnsupported }
func readFD(uintptr, []byte) (int, error)       { return 0, errUnsupported }
func wouldBlock(uintptr) bool                   { return false }
func isEAGAIN(error) bool                       { return false }
