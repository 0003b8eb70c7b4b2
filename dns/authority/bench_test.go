package authority

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
)

// countOutlet counts what a responder sends, allocating nothing.
type countOutlet struct{ n, bytes int }

func (o *countOutlet) send(b []byte) error  { o.n++; o.bytes += len(b); return nil }
func (o *countOutlet) localAddr() net.Addr  { return nil }
func (o *countOutlet) remoteAddr() net.Addr { return nil }
func (o *countOutlet) remoteIP() netip.Addr { return netip.AddrFrom4([4]byte{192, 0, 2, 7}) }

// benchAnswer answers one UDP query over and over, as a UDP worker does:
// with the answer cache, a repeated query costs no allocation.
func benchAnswer(b *testing.B, cacheSize int, q *dns.Msg) {
	s := &Server{Handler: Chain(mustZones(b, mustZone(b, "example.org.", testZone)), CheckQuery),
		AnswerCacheSize: cacheSize, RateLimit: &RateLimit{}}
	s.init()
	raw := packQuery(b, q)
	out := &countOutlet{}
	rw := &responder{}
	b.ReportAllocs()
	for b.Loop() {
		*rw = responder{srv: s, t: TransportUDP, out: out}
		s.serveMsg(context.Background(), raw, rw)
	}
	if out.n == 0 {
		b.Fatal("no answer")
	}
}

func BenchmarkAnswerUDP(b *testing.B) {
	for _, bc := range []struct {
		name string
		q    *dns.Msg
	}{
		{"A", query("www.example.org.", dns.TypeA)},
		{"A-EDNS", ednsQuery("www.example.org.", dns.TypeA, 1232, false)},
		{"TXT", query("_ztls._443._tcp.www.example.org.", dns.TypeTXT)},
		{"NXDOMAIN", query("nope.example.org.", dns.TypeA)},
	} {
		b.Run(bc.name+"/handler", func(b *testing.B) { benchAnswer(b, 0, bc.q) })
		b.Run(bc.name+"/cached", func(b *testing.B) { benchAnswer(b, 1000, bc.q) })
	}
}

// BenchmarkServeUDPLoopback measures the whole UDP path on loopback: one
// client keeps a window of queries outstanding to a server reading and
// writing in batches on one socket. allocs/op counts the server's and the
// client's allocations per query (golang.org/x/net parses each sender's
// address into a new *net.UDPAddr: two allocations per datagram).
func BenchmarkServeUDPLoopback(b *testing.B) {
	for _, cache := range []int{0, 1000} {
		name := "handler"
		if cache > 0 {
			name = "cached"
		}
		b.Run(name, func(b *testing.B) {
			s := &Server{Handler: Chain(mustZones(b, mustZone(b, "example.org.", testZone)), CheckQuery),
				AnswerCacheSize: cache, RateLimit: &RateLimit{}}
			pcs, ln, err := ListenReusePort("127.0.0.1:0", 1)
			if err != nil {
				b.Fatal(err)
			}
			ln.Close()
			done := make(chan error, 1)
			go func() { done <- s.ServeUDP(pcs[0]) }()
			defer func() { s.Close(); <-done }()
			c, err := net.DialUDP("udp", nil, pcs[0].LocalAddr().(*net.UDPAddr))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			q := packQuery(b, query("www.example.org.", dns.TypeA))
			buf := make([]byte, 1500)
			const window = 64
			b.ReportAllocs()
			b.ResetTimer()
			sent, got := 0, 0
			for got < b.N {
				for sent < b.N && sent-got < window {
					if _, err := c.Write(q); err != nil {
						b.Fatal(err)
					}
					sent++
				}
				if _, err := c.Read(buf); err != nil {
					b.Fatal(err)
				}
				got++
			}
		})
	}
}
