package resolver

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// BenchmarkUnbound measures, side by side in one run against one Unbound
// on loopback with a warm cache (a stub zone at the project's authority):
//
//   - <transport>/A: one lone A lookup, the per-query latency; tls/A runs
//     on the kept-open, reused DoT connection (T-DNS's claim: within 1.1×
//     of udp/A).
//   - <transport>/quad: A, AAAA, TXT and TLSA in parallel, as the issue's
//     benchmark asks (target within 1.1× of <transport>/A), with
//     LookupBatch: one socket (UDP) or one write (TCP, TLS) for the four.
//   - <transport>/quad-goroutines: the same four as four concurrent
//     Lookup calls, one goroutine each (stream writes are still combined).
//   - <transport>/service: LookupService, all six questions (A, AAAA, TXT,
//     CERT, TLSA, HTTPS) in parallel.
//
// The resolver's own cache is off so every operation reaches Unbound.
// scripts/bench-dns-resolver.sh runs it and prints the ratios.
func BenchmarkUnbound(b *testing.B) {
	benchUnbound(b, 0)
}

// BenchmarkUnboundRTT is BenchmarkUnbound with a 10 ms round trip between
// the resolver and Unbound (a delaying proxy, 5 ms each way), where, as on
// a real network, latency is set by round trips rather than by CPU time.
func BenchmarkUnboundRTT(b *testing.B) {
	benchUnbound(b, 5*time.Millisecond)
}

func benchUnbound(b *testing.B, oneWay time.Duration) {
	setup := startUnboundSetup(b, unboundBenchExtra()...)
	if oneWay > 0 {
		setup.delayed = true
		setup.plainAddr = startDelayProxy(b, setup.u.Addr, oneWay)
		setup.tlsAddr = startDelayProxy(b, setup.u.TLSAddr, oneWay)
	}
	ctx := context.Background()
	const host = "www.svc.test"
	quad := []Question{
		{host, dns.TypeA}, {host, dns.TypeAAAA},
		{ZDataName(host, 443), dns.TypeTXT}, {TLSAName(host, 443), dns.TypeTLSA},
	}
	for _, tr := range []Transport{UDP, TCP, TLS} {
		r := setup.resolver(b, tr, -1)
		// Warm Unbound's cache and open the stream connection.
		for i := 0; i < 3; i++ {
			if _, err := r.LookupService(ctx, host, 443, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(string(tr)+"/A", func(b *testing.B) {
			for b.Loop() {
				a, err := r.Lookup(ctx, host, dns.TypeA)
				if err != nil || len(a.RRs) != 1 {
					b.Fatalf("lookup: %v %v", a, err)
				}
			}
		})
		b.Run(string(tr)+"/quad", func(b *testing.B) {
			for b.Loop() {
				answers, err := r.LookupBatch(ctx, quad, nil)
				if err != nil {
					b.Fatal(err)
				}
				for _, a := range answers {
					if a.Err != nil || len(a.RRs) != 1 {
						b.Fatalf("lookup %s: %v", a.Name, a)
					}
				}
			}
		})
		b.Run(string(tr)+"/quad-goroutines", func(b *testing.B) {
			for b.Loop() {
				var wg sync.WaitGroup
				for _, q := range quad {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if a, err := r.Lookup(ctx, q.Name, q.Qtype); err != nil || len(a.RRs) != 1 {
							b.Errorf("lookup %s: %v %v", q.Name, a, err)
						}
					}()
				}
				wg.Wait()
			}
		})
		b.Run(string(tr)+"/service", func(b *testing.B) {
			for b.Loop() {
				if _, err := r.LookupService(ctx, host, 443, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkCacheHit is the cost of an answer from the resolver's cache.
func BenchmarkCacheHit(b *testing.B) {
	c := newCache(1024, nilClock)
	q := question("a.test.", dns.TypeA)
	k := keyOf(q.Question[0])
	c.put(k, reply(b, q, "a.test. 300 IN A 192.0.2.1"), "udp")
	for b.Loop() {
		if _, ok := c.get(k); !ok {
			b.Fatal("miss")
		}
	}
}

var nilClock = newFakeClock().Now

// unboundBenchExtra returns extra unbound.conf lines from
// ZTLS_BENCH_UNBOUND (";"-separated), e.g. "num-threads: 2".
func unboundBenchExtra() []string {
	v := os.Getenv("ZTLS_BENCH_UNBOUND")
	if v == "" {
		return nil
	}
	return strings.Split(v, ";")
}
