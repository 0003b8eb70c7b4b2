package turbo_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// Server handshake throughput with a fixed pool of blocking workers (a
// thread-per-connection server with a bounded pool, as the TurboTLS paper
// measured): each worker holds a TCP connection from accept to the end of
// its handshake; TurboTLS's UDP flights are computed by the same pool.
// Latency is emulated at the client: every byte it sends or receives,
// TCP or UDP, is delayed by half the RTT, and connect takes one RTT.

// slowConn delays writes and reads by half an RTT each.
type slowConn struct {
	net.Conn
	half time.Duration
	in   chan []byte
	buf  []byte
	wmu  sync.Mutex
}

func newSlowConn(c net.Conn, rtt time.Duration) *slowConn {
	s := &slowConn{Conn: c, half: rtt / 2, in: make(chan []byte, 64)}
	go func() {
		defer close(s.in)
		for {
			b := make([]byte, 16<<10)
			n, err := c.Read(b)
			if n > 0 {
				at := clock.Now().Add(s.half)
				data := b[:n]
				time.Sleep(clock.Until(at))
				s.in <- data
			}
			if err != nil {
				return
			}
		}
	}()
	return s
}

func (s *slowConn) Read(p []byte) (int, error) {
	if len(s.buf) == 0 {
		b, ok := <-s.in
		if !ok {
			return 0, net.ErrClosed
		}
		s.buf = b
	}
	n := copy(p, s.buf)
	s.buf = s.buf[n:]
	return n, nil
}

func (s *slowConn) Write(p []byte) (int, error) {
	b := append([]byte(nil), p...)
	time.AfterFunc(s.half, func() { s.wmu.Lock(); s.Conn.Write(b); s.wmu.Unlock() })
	return len(p), nil
}

func handshakeThroughput(b *testing.B, useTurbo bool, workers, clients, total int, rtt time.Duration) float64 {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	pool := make(chan struct{}, workers)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	pc, _ := net.ListenPacket("udp", ln.Addr().String())
	tcpAddr := netip.MustParseAddrPort(ln.Addr().String())
	srv := turbo.NewServer(turbo.Config{SourceRate: 1e6, SourceBurst: 1e6, MaxEntries: 4 * clients,
		Flight: func(ctx context.Context, from netip.AddrPort, f []byte) ([]byte, any, error) {
			pool <- struct{}{}
			defer func() { <-pool }()
			eng := tls13.NewServerEngine(w.ServerTLS)
			if err := eng.Feed(f); err != nil {
				return nil, nil, err
			}
			return append([]byte(nil), eng.Output()...), eng, nil
		}})
	go srv.ServeUDP(pc)
	defer srv.Close()
	defer ln.Close()
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				pool <- struct{}{}
				defer func() { <-pool }()
				defer raw.Close()
				id, linked, c, err := turbo.ReadLink(raw, 10*time.Second)
				if err != nil {
					return
				}
				var conn *tls13.Conn
				if v, ok := srv.Link(id, netip.MustParseAddr("127.0.0.1")); linked && ok {
					conn = v.(*tls13.Engine).Conn(c, false)
				} else {
					conn = tls13.Server(c, w.ServerTLS)
				}
				if conn.Handshake() == nil {
					conn.Write([]byte("k")) // the client waits for it: the handshake is done on both sides
				}
			}()
		}
	}()
	cfg := w.ClientTLS()
	cfg.ServerName = w.Host
	cfg.SessionTicketsDisabled = true
	var done sync.WaitGroup
	work := make(chan struct{}, total)
	for i := 0; i < total; i++ {
		work <- struct{}{}
	}
	close(work)
	start := clock.Now()
	var mu sync.Mutex
	ok, fallbacks := 0, 0
	for i := 0; i < clients; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			for range work {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				dialTCP := func(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
					time.Sleep(rtt)
					c, err := net.Dial("tcp", a.String())
					if err != nil {
						return nil, err
					}
					return newSlowConn(c, rtt), nil
				}
				var err error
				if useTurbo {
					var res *turbo.ClientResult
					res, err = turbo.Dial(ctx, tcpAddr, tcpAddr, &turbo.ClientConfig{TLS: cfg, DialTCP: dialTCP, Wait: 10 * rtt,
						DialUDP: wrapUDP(func(c net.Conn) net.Conn { return newSlowConn(c, rtt) })})
					if err == nil {
						if !res.Turbo {
							mu.Lock()
							fallbacks++
							mu.Unlock()
						}
						_, err = res.Conn.Read(make([]byte, 1))
						res.Conn.Close()
					}
				} else {
					var c net.Conn
					c, err = dialTCP(ctx, tcpAddr)
					if err == nil {
						tc := tls13.Client(c, cfg)
						err = tc.HandshakeContext(ctx)
						if err == nil {
							_, err = tc.Read(make([]byte, 1))
						}
						c.Close()
					}
				}
				cancel()
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	done.Wait()
	if fallbacks > 0 {
		b.Logf("%d of %d TurboTLS handshakes fell back", fallbacks, ok)
	}
	return float64(ok) / clock.Since(start).Seconds()
}

// BenchmarkHandshakeThroughput40ms: 4 server workers, 64 concurrent
// clients, 40 ms RTT; handshakes per second (go test -bench Throughput).
func BenchmarkHandshakeThroughput40ms(b *testing.B) {
	for _, tc := range []struct {
		name  string
		turbo bool
	}{{"tls-tcp", false}, {"turbo", true}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.ReportMetric(handshakeThroughput(b, tc.turbo, 4, 64, 400, 40*time.Millisecond), "handshakes/s")
			}
		})
	}
}
