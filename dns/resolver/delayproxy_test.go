package resolver

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// startDelayProxy forwards UDP and TCP on one loopback port to target,
// delaying every datagram and every chunk of stream data by oneWay in each
// direction, so that benchmarks pay a network round trip the way a client
// on a WAN does (Go timers: accurate to a fraction of a millisecond, enough
// at several milliseconds). Order is kept per direction.
func startDelayProxy(tb testing.TB, target string, oneWay time.Duration) string {
	tb.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		pc.Close()
		tb.Skipf("TCP port taken: %v", err)
	}
	var mu sync.Mutex
	var open []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		open = append(open, c)
		mu.Unlock()
	}
	tb.Cleanup(func() {
		pc.Close()
		ln.Close()
		mu.Lock()
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
	})
	up, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		tb.Fatal(err)
	}
	// UDP: one upstream socket per client socket, closed after one reply
	// (the resolver uses a fresh socket per query).
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pkt := append([]byte(nil), buf[:n]...)
			time.AfterFunc(oneWay, func() {
				uc, err := net.DialUDP("udp", nil, up)
				if err != nil {
					return
				}
				track(uc)
				uc.Write(pkt)
				go func() {
					defer uc.Close()
					rb := make([]byte, 65535)
					uc.SetReadDeadline(time.Now().Add(5 * time.Second))
					m, err := uc.Read(rb)
					if err != nil {
						return
					}
					reply := rb[:m]
					time.AfterFunc(oneWay, func() { pc.WriteTo(reply, from) })
				}()
			})
		}
	}()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			go func() {
				s, err := net.Dial("tcp", target)
				if err != nil {
					c.Close()
					return
				}
				// ACK at once, as the resolver's own sockets do; see
				// quickack_linux.go.
				s = withQuickAck(s)
				track(s)
				go delayPump(s, c, oneWay)
				delayPump(c, s, oneWay)
			}()
		}
	}()
	return pc.LocalAddr().String()
}

// delayPump copies src to dst, each chunk oneWay after it was read.
func delayPump(dst, src net.Conn, oneWay time.Duration) {
	type chunk struct {
		b   []byte
		due time.Time
	}
	q := make(chan chunk, 1024)
	go func() {
		defer dst.Close()
		for ch := range q {
			time.Sleep(clock.Until(ch.due))
			if _, err := dst.Write(ch.b); err != nil {
				return
			}
		}
	}()
	defer close(q)
	buf := make([]byte, 65536)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{append([]byte(nil), buf[:n]...), clock.Now().Add(oneWay)}
		}
		if err != nil {
			return
		}
	}
}
