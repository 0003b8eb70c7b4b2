package resolver

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func question(name string, qtype uint16) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	return q
}

func TestCacheTTL(t *testing.T) {
	clk := newFakeClock()
	c := newCache(10, clk.Now)
	q := question("a.test.", dns.TypeA)
	k := keyOf(q.Question[0])
	c.put(k, reply(t, q, "a.test. 300 IN A 192.0.2.1", "a.test. 100 IN A 192.0.2.2"), "udp")

	clk.Advance(40 * time.Second)
	hit, ok := c.get(k)
	if !ok {
		t.Fatal("miss before expiry")
	}
	for _, rr := range hit.msg.Answer {
		if want := map[string]uint32{"192.0.2.1": 260, "192.0.2.2": 60}[rr.(*dns.A).A.String()]; rr.Header().Ttl != want {
			t.Errorf("aged TTL of %v = %d, want %d", rr, rr.Header().Ttl, want)
		}
	}
	// The RRset lives as long as its shortest TTL.
	clk.Advance(60 * time.Second)
	if _, ok := c.get(k); ok {
		t.Fatal("hit after the smallest TTL expired")
	}
	// A different-case question is the same key.
	if keyOf(question("A.TEST.", dns.TypeA).Question[0]) != k {
		t.Fatal("keys are case-sensitive")
	}
}

func TestCacheNegative(t *testing.T) {
	clk := newFakeClock()
	c := newCache(10, clk.Now)
	soa := "test. 3600 IN SOA ns.test. host.test. 1 3600 600 86400 30"
	tests := []struct {
		name  string
		rcode int
		ns    []string
		ttl   time.Duration
	}{
		{"nxdomain uses SOA minimum", dns.RcodeNameError, []string{soa}, 30 * time.Second},
		{"nodata uses SOA minimum", dns.RcodeSuccess, []string{soa}, 30 * time.Second},
		{"SOA TTL below minimum", dns.RcodeNameError, []string{"test. 10 IN SOA ns.test. host.test. 1 3600 600 86400 30"}, 10 * time.Second},
		{"no SOA: not cached", dns.RcodeNameError, nil, 0},
		{"servfail: not cached", dns.RcodeServerFailure, []string{soa}, 0},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := question(fmt.Sprintf("n%d.test.", i), dns.TypeAAAA)
			m := new(dns.Msg)
			m.SetRcode(q, tc.rcode)
			for _, s := range tc.ns {
				rr, _ := dns.NewRR(s)
				m.Ns = append(m.Ns, rr)
			}
			k := keyOf(q.Question[0])
			c.put(k, m, "udp")
			if _, ok := c.get(k); ok != (tc.ttl > 0) {
				t.Fatalf("cached = %v, want %v", ok, tc.ttl > 0)
			}
			if tc.ttl == 0 {
				return
			}
			clk.Advance(tc.ttl - time.Second)
			if hit, ok := c.get(k); !ok || hit.msg.Rcode != tc.rcode {
				t.Fatal("negative entry gone early")
			}
			clk.Advance(time.Second)
			if _, ok := c.get(k); ok {
				t.Fatal("negative entry outlived its TTL")
			}
		})
	}
}

func TestCacheZeroTTLAndTruncatedNotCached(t *testing.T) {
	c := newCache(10, time.Now)
	q := question("z.test.", dns.TypeA)
	c.put(keyOf(q.Question[0]), reply(t, q, "z.test. 0 IN A 192.0.2.1"), "udp")
	tc := reply(t, q, "z.test. 60 IN A 192.0.2.1")
	tc.Truncated = true
	c.put(keyOf(q.Question[0]), tc, "udp")
	if c.len() != 0 {
		t.Fatal("cached a TTL 0 or truncated reply")
	}
}

func TestCacheLRUBound(t *testing.T) {
	c := newCache(3, time.Now)
	key := func(i int) cacheKey { return keyOf(question(fmt.Sprintf("h%d.test.", i), dns.TypeA).Question[0]) }
	for i := 0; i < 3; i++ {
		q := question(fmt.Sprintf("h%d.test.", i), dns.TypeA)
		c.put(key(i), reply(t, q, fmt.Sprintf("h%d.test. 60 IN A 192.0.2.%d", i, i)), "udp")
	}
	c.get(key(0)) // h0 becomes the most recently used; h1 is now the oldest
	q := question("h3.test.", dns.TypeA)
	c.put(key(3), reply(t, q, "h3.test. 60 IN A 192.0.2.3"), "udp")
	if c.len() != 3 {
		t.Fatalf("len = %d, want 3", c.len())
	}
	for i, want := range []bool{true, false, true, true} {
		if _, ok := c.get(key(i)); ok != want {
			t.Errorf("h%d cached = %v, want %v", i, ok, want)
		}
	}
}

// TestResolverCacheAndPrefetch drives the cache through the Resolver with a
// fake clock: the second lookup is served from cache, a lookup in the last
// 10 % of the TTL triggers one background refresh, and after the original
// TTL the refreshed answer is still served from cache.
func TestResolverCacheAndPrefetch(t *testing.T) {
	var queries atomic.Int32
	refreshed := make(chan struct{}, 4)
	addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		n := queries.Add(1)
		m := reply(t, q, fmt.Sprintf("p.test. 100 IN A 192.0.2.%d", n))
		pc.WriteTo(pack(t, m), from)
		if n > 1 {
			refreshed <- struct{}{}
		}
	})
	clk := newFakeClock()
	r, err := New(Config{Servers: []string{addr}, Prefetch: true, Now: clk.Now, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx := context.Background()
	lookup := func() *Answer {
		t.Helper()
		a, err := r.Lookup(ctx, "p.test", dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if a := lookup(); a.FromCache || firstA(a) != "192.0.2.1" || a.Transport != "udp" {
		t.Fatalf("first lookup: %+v", a)
	}
	clk.Advance(50 * time.Second)
	if a := lookup(); !a.FromCache || a.RRs[0].Header().Ttl != 50 {
		t.Fatalf("second lookup not from cache with aged TTL: %+v", a)
	}
	if queries.Load() != 1 {
		t.Fatalf("queries = %d, want 1", queries.Load())
	}
	clk.Advance(41 * time.Second) // 9 s left of 100: within the last 10 %
	if a := lookup(); !a.FromCache || firstA(a) != "192.0.2.1" {
		t.Fatalf("lookup near expiry: %+v", a)
	}
	select {
	case <-refreshed:
	case <-time.After(10 * time.Second):
		t.Fatal("no prefetch query reached the server")
	}
	r.bg.Wait()                   // the refreshed answer is stored
	clk.Advance(20 * time.Second) // past the first answer's TTL
	if a := lookup(); !a.FromCache || firstA(a) != "192.0.2.2" {
		t.Fatalf("after prefetch: %+v", a)
	}
	if queries.Load() != 2 {
		t.Fatalf("queries = %d, want 2", queries.Load())
	}
}

func TestResolverNoPrefetchWhenDisabled(t *testing.T) {
	var queries atomic.Int32
	addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		queries.Add(1)
		pc.WriteTo(pack(t, reply(t, q, "p.test. 100 IN A 192.0.2.1")), from)
	})
	clk := newFakeClock()
	r, err := New(Config{Servers: []string{addr}, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.Lookup(context.Background(), "p.test", dns.TypeA)
	clk.Advance(95 * time.Second)
	r.Lookup(context.Background(), "p.test", dns.TypeA)
	r.bg.Wait()
	if queries.Load() != 1 {
		t.Fatalf("queries = %d, want 1", queries.Load())
	}
	clk.Advance(5 * time.Second)
	if a, _ := r.Lookup(context.Background(), "p.test", dns.TypeA); a.FromCache || queries.Load() != 2 {
		t.Fatalf("expired entry served from cache")
	}
}

// Names that differ only in bytes that are not UTF-8 are different
// names: strings.ToLower made one cache key of them.
func TestCacheKeyKeepsNonUTF8Bytes(t *testing.T) {
	a := keyOf(dns.Question{Name: "\xd3.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	b := keyOf(dns.Question{Name: "\xd4.example.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	c := keyOf(dns.Question{Name: "\xd3.EXAMPLE.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
	if a == b || a != c {
		t.Fatalf("keys %q %q %q", a.name, b.name, c.name)
	}
}
