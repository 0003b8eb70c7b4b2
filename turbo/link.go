package turbo

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// readLink reads the start of a TCP connection accepted by a TurboTLS
// server: a link record yields its id and linked=true; anything else
// (a TLS ClientHello: plain TLS over TCP) yields linked=false. The
// returned connection replays the bytes read that were not part of a
// link record, so it can be handed to a TLS server as it is. The read is
// bounded by timeout (0: 10 s).
func readLink(c net.Conn, timeout time.Duration) (id ConnID, linked bool, conn net.Conn, err error) {
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	c.SetReadDeadline(time.Now().Add(timeout))
	defer c.SetReadDeadline(time.Time{})
	first := make([]byte, 1, wire.LinkLen)
	if _, err := io.ReadFull(c, first); err != nil {
		return id, false, nil, fmt.Errorf("turbo: reading the first byte of a connection: %w", err)
	}
	if first[0] != wire.LinkContentType {
		return id, false, &prefixConn{Conn: c, pre: first}, nil
	}
	rec := first[:wire.LinkLen]
	if _, err := io.ReadFull(c, rec[1:]); err != nil {
		return id, false, nil, fmt.Errorf("turbo: reading the link record: %w", err)
	}
	id, err = wire.ParseLink(rec)
	if err != nil {
		return id, false, nil, err
	}
	return id, true, c, nil
}

// PrefixConn returns c reading pre first: bytes already read off c go
// back in front (a server that waited for a connection's first bytes
// before handing it on hands on a PrefixConn).
func PrefixConn(c net.Conn, pre []byte) net.Conn { return &prefixConn{Conn: c, pre: pre} }

// prefixConn replays bytes already read before reading from Conn.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.pre) > 0 {
		n := copy(b, p.pre)
		p.pre = p.pre[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

// CloseWrite half-closes when the underlying connection can.
func (p *prefixConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("turbo: connection cannot half-close")
}

// ConnID names one TurboTLS handshake; the client picks it at random.
type ConnID = wire.ConnID
