//go:build !unix

package turbo

import (
	"context"
	"net"
	"time"
)

func canPoll(net.Conn) bool { return false }

func pollUntil(ctx context.Context, udp net.Conn, buf []byte, end time.Time) (int, error) {
	udp.SetReadDeadline(end)
	return udp.Read(buf)
}
