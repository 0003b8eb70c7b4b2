package resolver

import (
	"container/list"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
)

// maxCacheTTL caps how long any answer is cached, as Unbound's
// cache-max-ttl does: a server cannot pin a record for years.
const maxCacheTTL = 24 * time.Hour

// prefetchFraction: an entry used in the last 1/prefetchFraction of its
// TTL is refreshed in the background.
const prefetchFraction = 10

type cacheKey struct {
	name          string
	qtype, qclass uint16
}

func keyOf(q dns.Question) cacheKey {
	return cacheKey{dnsname.Canonical(q.Name), q.Qtype, q.Qclass}
}

type cacheEntry struct {
	key         cacheKey
	msg         *dns.Msg
	stored      time.Time
	ttl         time.Duration
	transport   string
	prefetching bool
}

// cache is a bounded LRU of replies keyed by question. Positive replies
// live for the smallest TTL of their answer records; negative replies
// (NXDOMAIN and NODATA) for the SOA's negative TTL (RFC 2308, Section 5).
// It is safe for concurrent use.
type cache struct {
	mu  sync.Mutex
	max int
	now func() time.Time
	ll  *list.List // front is most recently used
	m   map[cacheKey]*list.Element
}

func newCache(max int, now func() time.Time) *cache {
	return &cache{max: max, now: now, ll: list.New(), m: make(map[cacheKey]*list.Element)}
}

// cacheHit is a cached reply with its TTLs reduced by its age.
type cacheHit struct {
	msg       *dns.Msg
	transport string
	// prefetch tells the caller to refresh the entry in the background;
	// the caller must call prefetchDone when it finished.
	prefetch bool
}

func (c *cache) get(k cacheKey) (cacheHit, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.m[k]
	if !ok {
		return cacheHit{}, false
	}
	e := el.Value.(*cacheEntry)
	age := c.now().Sub(e.stored)
	if age < 0 {
		age = 0
	}
	if age >= e.ttl {
		c.ll.Remove(el)
		delete(c.m, k)
		return cacheHit{}, false
	}
	c.ll.MoveToFront(el)
	hit := cacheHit{msg: agedCopy(e.msg, age), transport: e.transport}
	if e.ttl-age <= e.ttl/prefetchFraction && !e.prefetching {
		e.prefetching = true
		hit.prefetch = true
	}
	return hit, true
}

func (c *cache) prefetchDone(k cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok {
		el.Value.(*cacheEntry).prefetching = false
	}
}

// put stores a reply if it is cacheable and evicts the least recently used
// entries beyond the bound.
func (c *cache) put(k cacheKey, m *dns.Msg, transport string) {
	ttl, ok := cacheTTL(m)
	if !ok {
		return
	}
	e := &cacheEntry{key: k, msg: m.Copy(), stored: c.now(), ttl: ttl, transport: transport}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[k]; ok {
		el.Value = e
		c.ll.MoveToFront(el)
		return
	}
	c.m[k] = c.ll.PushFront(e)
	for c.ll.Len() > c.max {
		old := c.ll.Back()
		c.ll.Remove(old)
		delete(c.m, old.Value.(*cacheEntry).key)
	}
}

func (c *cache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// cacheTTL says how long m may be cached. Truncated replies, server
// failures and negative replies without an SOA are not cached.
func cacheTTL(m *dns.Msg) (time.Duration, bool) {
	if m.Truncated {
		return 0, false
	}
	var ttl uint32
	switch {
	case m.Rcode == dns.RcodeSuccess && len(m.Answer) > 0:
		ttl = ^uint32(0)
		for _, rr := range m.Answer {
			ttl = min(ttl, rr.Header().Ttl)
		}
	case m.Rcode == dns.RcodeSuccess || m.Rcode == dns.RcodeNameError:
		// RFC 2308, Section 5: the negative TTL is the smaller of the SOA
		// record's own TTL and its MINIMUM field.
		found := false
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				ttl = min(soa.Hdr.Ttl, soa.Minttl)
				found = true
				break
			}
		}
		if !found {
			return 0, false
		}
	default:
		return 0, false
	}
	if ttl == 0 {
		return 0, false
	}
	return min(time.Duration(ttl)*time.Second, maxCacheTTL), true
}

// agedCopy returns a copy of m with every TTL lowered by age.
func agedCopy(m *dns.Msg, age time.Duration) *dns.Msg {
	out := m.Copy()
	sec := uint32(age / time.Second)
	for _, sec2 := range [][]dns.RR{out.Answer, out.Ns, out.Extra} {
		for _, rr := range sec2 {
			h := rr.Header()
			if h.Rrtype == dns.TypeOPT {
				continue
			}
			if h.Ttl > sec {
				h.Ttl -= sec
			} else {
				h.Ttl = 0
			}
		}
	}
	return out
}
