package authority

import (
	"bytes"
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// cachePair is a server with the answer cache and one without, over the
// same zone, clock and limits: the same query must get the same bytes.
func cachePair(t testing.TB, rl *RateLimit) (cached, plain *Server, zone *Zone) {
	zone = mustZone(t, "example.org.", testZone)
	h := Chain(mustZones(t, zone), CheckQuery)
	clock := func() time.Time { return time.Unix(1_700_000_000, 0) }
	mk := func(size int) *Server {
		var r *RateLimit
		if rl != nil {
			c := *rl
			r = &c
		}
		return &Server{Handler: h, AnswerCacheSize: size, RateLimit: r, Time: clock}
	}
	return mk(1000), mk(0), zone
}

// serveRaw runs one query through s as if it arrived on t from 192.0.2.7
// and returns what was sent (nil: nothing).
func serveRaw(s *Server, t Transport, raw []byte) []byte {
	s.init()
	out := &sliceOutlet{remote: netip.MustParseAddr("192.0.2.7")}
	rw := &responder{srv: s, t: t, out: out}
	if t.Stream() {
		s.serveFrame(raw, rw)
	} else {
		s.serveMsg(context.Background(), raw, rw)
	}
	switch len(out.sent) {
	case 0:
		return nil
	case 1:
		return out.sent[0]
	}
	panic("more than one answer to one query")
}

func cacheTestQueries(t testing.TB) [][]byte {
	var qs []*dns.Msg
	for _, name := range []string{"www.example.org.", "WwW.ExAmple.org.", "alias.example.org.", "nope.example.org.",
		"x.sub.example.org.", "big.example.org.", "example.org.", "loop1.example.org.", "www.example.net."} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeTXT, dns.TypeANY, dns.TypeNS, dns.TypeAXFR} {
			qs = append(qs, query(name, qt), ednsQuery(name, qt, 1232, true), ednsQuery(name, qt, 512, false))
		}
	}
	noRD := query("www.example.org.", dns.TypeA)
	noRD.RecursionDesired = false
	cd := query("www.example.org.", dns.TypeA)
	cd.CheckingDisabled = true
	notify := query("www.example.org.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	padded := ednsQuery("www.example.org.", dns.TypeA, 1232, false, &dns.EDNS0_PADDING{Padding: make([]byte, 30)})
	ka := ednsQuery("www.example.org.", dns.TypeA, 1232, false, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
	qs = append(qs, noRD, cd, notify, padded, ka)
	var raws [][]byte
	for i, m := range qs {
		m.Id = uint16(i + 1)
		raws = append(raws, packQuery(t, m))
	}
	return raws
}

// Every answer from the cache is byte for byte the answer the handler
// builds, on each transport, with the last query's ID.
func TestAnswerCacheMatchesHandler(t *testing.T) {
	cached, plain, _ := cachePair(t, &RateLimit{})
	for _, tr := range []Transport{TransportUDP, TransportTCP, TransportTLS} {
		for _, raw := range cacheTestQueries(t) {
			again := append([]byte(nil), raw...)
			again[0], again[1] = 0xbe, 0xef
			serveRaw(cached, tr, raw) // fills the cache (kept the second time)
			serveRaw(cached, tr, raw)
			got, want := serveRaw(cached, tr, again), serveRaw(plain, tr, again)
			if !bytes.Equal(got, want) {
				m := new(dns.Msg)
				m.Unpack(raw)
				t.Fatalf("%v %v: cached answer\n%x\nwant\n%x", tr, m.Question, got, want)
			}
		}
	}
	if hits := cached.Stats().CacheHits; hits == 0 {
		t.Fatal("no answer came from the cache")
	}
}

// A zone change outdates the cached answers at once.
func TestAnswerCacheZoneChange(t *testing.T) {
	cached, _, zone := cachePair(t, &RateLimit{})
	raw := packQuery(t, query("www.example.org.", dns.TypeA))
	first := serveRaw(cached, TransportUDP, raw)
	if !bytes.Equal(serveRaw(cached, TransportUDP, raw), first) || cached.Stats().CacheHits != 0 {
		t.Fatal("the second query was answered from the cache: an answer is kept when its question comes again")
	}
	if !bytes.Equal(serveRaw(cached, TransportUDP, raw), first) || cached.Stats().CacheHits != 1 {
		t.Fatal("the third query was not answered from the cache")
	}
	if err := zone.ReplaceRRset("www.example.org.", dns.TypeA, rrs(t, "www.example.org. 60 IN A 198.51.100.9")); err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(serveRaw(cached, TransportUDP, raw)); err != nil {
		t.Fatal(err)
	}
	if len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "198.51.100.9" {
		t.Fatalf("after ReplaceRRset: %v", m.Answer)
	}
}

// Queries with a cookie are answered by the handler every time (the
// server cookie depends on the client), and RRL counts answers from the
// cache as it counts the others.
func TestAnswerCacheCookiesAndRRL(t *testing.T) {
	cached, plain, _ := cachePair(t, &RateLimit{ResponsesPerSecond: 3, Slip: 2})
	cookie := &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: "0102030405060708"}
	craw := packQuery(t, ednsQuery("www.example.org.", dns.TypeA, 1232, false, cookie))
	for range 2 {
		serveRaw(cached, TransportTCP, craw)
	}
	if hits := cached.Stats().CacheHits; hits != 0 {
		t.Fatalf("%d answers with a cookie came from the cache", hits)
	}
	raw := packQuery(t, query("www.example.org.", dns.TypeA))
	for i := range 12 {
		got, want := serveRaw(cached, TransportUDP, raw), serveRaw(plain, TransportUDP, raw)
		if !bytes.Equal(got, want) {
			t.Fatalf("query %d: cached server sent %x, want %x", i, got, want)
		}
	}
	c, p := cached.Stats(), plain.Stats()
	if c.RRLDropped != p.RRLDropped || c.RRLSlipped != p.RRLSlipped || c.RRLDropped == 0 {
		t.Fatalf("RRL with cache dropped %d slipped %d, without %d and %d", c.RRLDropped, c.RRLSlipped, p.RRLDropped, p.RRLSlipped)
	}
}

// FuzzAnswerCache: for any datagram, the cached server's first and
// second answers are the plain server's, or nothing when it sends none.
func FuzzAnswerCache(f *testing.F) {
	for _, raw := range cacheTestQueries(f) {
		f.Add(raw, uint8(TransportUDP))
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, uint8(TransportTCP))
	cached, plain, _ := cachePair(f, &RateLimit{})
	f.Fuzz(func(t *testing.T, raw []byte, tb uint8) {
		tr := Transport(tb%3 + 1)
		for range 2 {
			got, want := serveRaw(cached, tr, raw), serveRaw(plain, tr, raw)
			if !bytes.Equal(got, want) {
				t.Fatalf("%v: cached server sent %x, want %x", tr, got, want)
			}
		}
	})
}

// The cache stays within its entries and bytes whatever it is fed.
func TestAnswerCacheBounds(t *testing.T) {
	c := newAnswerCache(cacheShards * 4)
	for i := range 1000 {
		key := []byte{byte(i), byte(i >> 8), 1, 2, 3}
		c.put(&cachedAnswer{key: key, wire: make([]byte, maxCachedAnswer)})
		c.put(&cachedAnswer{key: key[:4], wire: make([]byte, 100)})
	}
	c.put(&cachedAnswer{key: make([]byte, maxCachedQuery+1), wire: make([]byte, 100)}) // not kept
	for i := range c.shards {
		sh := &c.shards[i]
		if len(sh.m) > c.perShard || sh.bytes > c.maxBytes {
			t.Fatalf("shard %d: %d entries, %d bytes; bounds %d and %d", i, len(sh.m), sh.bytes, c.perShard, c.maxBytes)
		}
		n := 0
		for _, e := range sh.m {
			n += len(e.key) + len(e.wire)
		}
		if n != sh.bytes {
			t.Fatalf("shard %d counts %d bytes, holds %d", i, sh.bytes, n)
		}
	}
}

// respell returns raw with the letters of its question's name in the
// case that the bits of pattern give (0x20 randomisation).
func respell(raw []byte, pattern uint64) []byte {
	out := append([]byte(nil), raw...)
	end := questionEnd(out)
	for i, k := 12, 0; i < end; i++ {
		c := out[i] | 0x20
		if 'a' <= c && c <= 'z' {
			if pattern>>(k%64)&1 == 1 {
				c -= 'a' - 'A'
			}
			out[i] = c
			k++
		}
	}
	return out
}

// Every spelling of a question shares one cached answer, and the answer
// from the cache is still byte for byte the handler's for that spelling:
// the question comes back exactly as asked (0x20), on each transport.
func TestAnswerCacheSpellings(t *testing.T) {
	cached, plain, _ := cachePair(t, &RateLimit{})
	for _, tr := range []Transport{TransportUDP, TransportTCP, TransportTLS} {
		for _, raw := range cacheTestQueries(t) {
			for range 2 { // fills the cache (kept the second time), all in lower case
				serveRaw(cached, tr, respell(raw, 0))
			}
			for _, pattern := range []uint64{0x5555, 0xaaaa, ^uint64(0), 0x1234} {
				again := respell(raw, pattern)
				hits := cached.Stats().CacheHits
				got, want := serveRaw(cached, tr, again), serveRaw(plain, tr, again)
				if !bytes.Equal(got, want) {
					m := new(dns.Msg)
					m.Unpack(again)
					t.Fatalf("%v %v: cached answer\n%x\nwant\n%x", tr, m.Question, got, want)
				}
				if want == nil {
					continue
				}
				off := 0
				if tr.Stream() {
					off = 2
				}
				if end := questionEnd(again); end > 12 {
					if !bytes.Equal(got[off+12:off+end], again[12:end]) {
						t.Fatalf("%v: question %q, asked %q", tr, got[off+12:off+end], again[12:end])
					}
					if cached.Stats().CacheHits == hits && len(again) < 100 {
						m := new(dns.Msg)
						m.Unpack(again)
						t.Errorf("%v %v: not answered from the cache", tr, m.Question)
					}
				}
			}
		}
	}
}
