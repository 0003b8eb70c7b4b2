// Package turbotest plays the client side of TurboTLS's UDP exchange by
// hand, for tests of servers against clients that stop half way (a
// handshake linked over TCP that then sends nothing, say). A client that
// completes its handshakes uses package turbo (or dial).
package turbotest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// SendFlight sends flight (a client's first flight, a ClientHello) to
// the TurboTLS UDP port at addr, with padding requests that make room for
// at least room response datagrams, and waits until ctx ends for the
// server's first response datagram of this handshake. It returns the
// link record that joins a TCP connection to the handshake: written
// first on a connection to the server's TCP port, the server's engine
// continues there.
func SendFlight(ctx context.Context, addr string, flight []byte, room int) (link []byte, err error) {
	id, err := wire.NewConnID()
	if err != nil {
		return nil, err
	}
	dgrams, err := wire.Fragment(wire.TypeRequest, id, flight)
	if err != nil {
		return nil, err
	}
	for len(dgrams) < room {
		dgrams = append(dgrams, wire.PaddingRequest(id, len(flight)))
	}
	var d net.Dialer
	u, err := d.DialContext(ctx, "udp", addr)
	if err != nil {
		return nil, err
	}
	defer u.Close()
	for _, b := range dgrams {
		if _, err := u.Write(b); err != nil {
			return nil, err
		}
	}
	if dl, ok := ctx.Deadline(); ok {
		u.SetReadDeadline(dl)
	} else {
		u.SetReadDeadline(time.Now().Add(10 * time.Second))
	}
	buf := make([]byte, 2*wire.MaxDatagram)
	for {
		n, err := u.Read(buf)
		if err != nil {
			return nil, fmt.Errorf("turbotest: no response datagram: %w", err)
		}
		r, err := wire.ParseDatagram(buf[:n])
		if err != nil || r.Type != wire.TypeResponse {
			return nil, errors.New("turbotest: the server answered with no response datagram")
		}
		if r.ID == id {
			return wire.AppendLink(nil, id), nil
		}
	}
}
