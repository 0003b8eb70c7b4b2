package authority

import (
	"encoding/binary"
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
)

// The answer cache: an authoritative server is asked the same few
// thousand questions over and over, and each answer costs a parse of the
// query, a lookup and a pack with name compression. The cache keeps the
// finished, packed answer keyed by the query's own bytes (everything but
// its ID), one cache per transport, so a repeated query is answered by a map
// lookup, a copy and two bytes of ID, without allocating (BIND 9 and
// Knot do not cache packed answers; NSD precompiles its answers for the
// same reason).
//
// What may differ between two queries with the same bytes is only the
// client: the per-client parts of an answer are excluded. Queries with
// a COOKIE option (the server cookie depends on the client's address)
// are never cached, and Response Rate Limiting runs on every hit, with
// the key the answer was counted under. Zone changes (ReplaceRRset, Swap)
// raise zoneVersion, which outdates every entry at once.

// zoneVersion counts changes to any zone's data; a cached answer is valid
// only while it has not moved.
var zoneVersion atomic.Uint64

// Limits of the answer cache.
const (
	cacheShards = 16
	// maxCachedAnswer: larger answers (rare, and costly to copy anyway)
	// are built each time.
	maxCachedAnswer = 4096
	// maxCachedQuery: a longer query (real ones are tens of bytes) is
	// not a key worth keeping.
	maxCachedQuery = 512
	// cacheBytesPerEntry is the average size an entry (key and answer)
	// may have: a shard's bytes are bounded by its entries times this,
	// so queries chosen for large answers cannot make the cache grow
	// beyond that.
	cacheBytesPerEntry = 1024
)

type answerCache struct {
	seed     maphash.Seed
	perShard int // entries
	maxBytes int // per shard
	shards   [cacheShards]cacheShard
}

type cacheShard struct {
	mu    sync.RWMutex
	m     map[string]*cachedAnswer
	bytes int      // keys and answers held
	_     [32]byte // keep shards on separate cache lines
}

// cachedAnswer is one packed answer, with its ID bytes zero.
type cachedAnswer struct {
	version uint64
	wire    []byte
	// rrl is the count the answer falls in, without the client's
	// network; valid when hasRRL.
	rrl    rrlKey
	hasRRL bool
	// capped: the answer was truncated by the amplification cap.
	capped bool
	qtype  uint16
	rcode  uint16
}

func newAnswerCache(size int) *answerCache {
	c := &answerCache{seed: maphash.MakeSeed(), perShard: max(size/cacheShards, 1)}
	c.maxBytes = c.perShard * cacheBytesPerEntry
	for i := range c.shards {
		c.shards[i].m = make(map[string]*cachedAnswer)
	}
	return c
}

func (c *answerCache) shard(key []byte) *cacheShard {
	return &c.shards[maphash.Bytes(c.seed, key)%cacheShards]
}

// get returns the current answer for key, or nil.
func (c *answerCache) get(key []byte) *cachedAnswer {
	sh := c.shard(key)
	sh.mu.RLock()
	e := sh.m[string(key)] // no allocation: the conversion is only looked up
	sh.mu.RUnlock()
	if e == nil || e.version != zoneVersion.Load() {
		return nil
	}
	return e
}

// put stores e under key; a full shard loses entries, whichever the map
// yields first (effectively random), until it has room.
func (c *answerCache) put(key []byte, e *cachedAnswer) {
	size := len(key) + len(e.wire)
	if len(key) > maxCachedQuery || size > c.maxBytes {
		return
	}
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[string(key)]; ok {
		sh.bytes -= len(key) + len(old.wire)
		delete(sh.m, string(key))
	}
	for k, old := range sh.m {
		if len(sh.m) < c.perShard && sh.bytes+size <= c.maxBytes {
			break
		}
		sh.bytes -= len(k) + len(old.wire)
		delete(sh.m, k)
	}
	sh.m[string(key)] = e
	sh.bytes += size
}

// cacheNote is what a responder carries to store its answer: the key of
// the query (its bytes after the ID), while the query is being answered, and the zone data version
// read before the handler ran (a change during the handler then outdates
// the entry at once).
type cacheNote struct {
	key     []byte
	version uint64
}

// storeAnswer keeps packed, the answer WriteMsg is about to send for m,
// if the query may be answered from the cache next time.
func (rw *responder) storeAnswer(m *dns.Msg, packed []byte, rrl rrlKey, hasRRL, capped bool) {
	s := rw.srv
	if rw.note.key == nil || rw.hasCookie || len(packed) > maxCachedAnswer || len(packed) < 12 {
		return
	}
	e := &cachedAnswer{
		version: rw.note.version,
		wire:    append([]byte(nil), packed...),
		rrl:     rrl, hasRRL: hasRRL, capped: capped,
		rcode: uint16(m.Rcode),
	}
	if len(m.Question) == 1 {
		e.qtype = m.Question[0].Qtype
	}
	e.wire[0], e.wire[1] = 0, 0
	s.cache[rw.t].put(rw.note.key, e)
}

// answerCached answers the query raw (header already checked) from the
// cache. It returns false when there is no current answer, or when RRL
// limits this one: then the slow path runs with the verdict already
// taken (rw.rrlPreset), so it is counted once.
func (s *Server) answerCached(raw []byte, rw *responder) bool {
	e := s.cache[rw.t].get(raw[2:])
	if e == nil {
		return false
	}
	if e.hasRRL && s.rrl != nil && rw.t == TransportUDP {
		if ip := rw.out.remoteIP(); ip.IsValid() {
			k := e.rrl
			k.net = s.rrl.prefix(ip)
			if v := s.rrl.decide(k, s.now().UnixNano()); v != rrlSend {
				s.countRRL(v)
				rw.rrlPreset = v
				return false
			}
		}
	}
	if e.capped {
		s.counters.amplificationTruncated.Add(1)
	}
	if s.CachedAnswer != nil {
		s.CachedAnswer(e.qtype, int(e.rcode))
	}
	s.counters.cacheHits.Add(1)
	rw.written = true
	bufp := s.getBuf()
	buf := *bufp
	start := 0
	if rw.t.Stream() {
		binary.BigEndian.PutUint16(buf, uint16(len(e.wire)))
		start = 2
	}
	n := copy(buf[start:], e.wire)
	buf[start], buf[start+1] = raw[0], raw[1]
	rw.send(buf[:start+n]) // a failed send is the client's loss, as on the slow path
	s.putBuf(bufp)
	return true
}

// prefix is the client network of ip for RRL.
func (l *rrl) prefix(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap()
	bitsLen := l.v6
	if ip.Is4() {
		bitsLen = l.v4
	}
	p, _ := ip.Prefix(bitsLen)
	return p
}
