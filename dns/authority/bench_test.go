package authority

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
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

// benchZone is scripts/dns-bench-lib.sh's zone: n hosts with A, AAAA and
// a Z-data TXT under bench.test.
func benchZone(b *testing.B, n int) *Zones {
	var sb strings.Builder
	sb.WriteString("$TTL 3600\n@ IN SOA ns hostmaster 1 3600 600 86400 300\n@ IN NS ns\nns IN A 127.0.0.1\n")
	for i := range n {
		fmt.Fprintf(&sb, "h%d IN A 192.0.2.%d\nh%d IN AAAA 2001:db8::%d\n_ztls._443._tcp.h%d IN TXT \"v=ztls1 id=%d\"\n",
			i, i%250+1, i, i, i, i)
	}
	return mustZones(b, mustZone(b, "bench.test.", sb.String()))
}

// BenchmarkAnswerMix answers the benchmark mixes of
// scripts/bench-dns-auth-cpu.sh one query at a time, as a UDP worker
// does, without sockets (RRL off, as there): "standard" is its standard
// mix (1000 names; after the first round every answer comes from the
// cache), "standard-0x20" the same with each query's letters in random
// case (resolvers' 0x20), "distinct" asks a new name each time (NXDOMAIN:
// parse, lookup, pack and, with the cache, storing an answer that is not
// asked again), "distinct-nocache" the same without the answer cache.
func BenchmarkAnswerMix(b *testing.B) {
	const names = 1000
	zones := benchZone(b, names)
	rng := rand.New(rand.NewPCG(1, 2))
	var standard, spelled [][]byte
	for range 20000 {
		i, r := rng.IntN(names), rng.Float64()
		var q *dns.Msg
		switch {
		case r < 0.4:
			q = query(fmt.Sprintf("h%d.bench.test.", i), dns.TypeA)
		case r < 0.6:
			q = query(fmt.Sprintf("h%d.bench.test.", i), dns.TypeAAAA)
		case r < 0.8:
			q = query(fmt.Sprintf("_ztls._443._tcp.h%d.bench.test.", i), dns.TypeTXT)
		case r < 0.9:
			q = query(fmt.Sprintf("h%d.bench.test.", i), dns.TypeMX)
		default:
			q = query(fmt.Sprintf("missing%d.bench.test.", i), dns.TypeA)
		}
		q.Id = uint16(rng.Uint32())
		raw := packQuery(b, q)
		standard = append(standard, raw)
		spelled = append(spelled, respell(raw, rng.Uint64()))
	}
	// A new name each time: the digits of the first label count up.
	distinct := packQuery(b, query("x000000000.bench.test.", dns.TypeA))
	next := func(raw []byte, n int) []byte {
		for k := 22; k >= 14; k-- {
			raw[k] = byte('0' + n%10)
			n /= 10
		}
		return raw
	}
	for _, bc := range []struct {
		name  string
		cache int
		query func(n int) []byte
	}{
		{"standard", 20000, func(n int) []byte { return standard[n%len(standard)] }},
		{"standard-0x20", 20000, func(n int) []byte { return spelled[n%len(spelled)] }},
		{"distinct", 20000, func(n int) []byte { return next(distinct, n) }},
		{"distinct-nocache", 0, func(n int) []byte { return next(distinct, n) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := &Server{Handler: Chain(zones, CheckQuery), AnswerCacheSize: bc.cache, RateLimit: &RateLimit{}}
			s.init()
			out := &countOutlet{}
			rw := &responder{}
			for n := range 2 * len(standard) { // warm the cache
				*rw = responder{srv: s, t: TransportUDP, out: out}
				s.serveMsg(context.Background(), bc.query(n), rw)
			}
			out.n = 0
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				*rw = responder{srv: s, t: TransportUDP, out: out}
				s.serveMsg(context.Background(), bc.query(n), rw)
				n++
			}
			if out.n != n {
				b.Fatalf("%d answers to %d queries", out.n, n)
			}
		})
	}
}

// BenchmarkServeUDPLoopback measures the whole UDP path on loopback: one
// client keeps a window of queries outstanding to a server reading and
// writing in batches on one socket. allocs/op counts the server's and the
// client's allocations per query.
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
