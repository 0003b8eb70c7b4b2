package authority

import (
	"bytes"
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
// its ID, the question's name in lower case), one cache per transport, so a repeated query is answered by a map
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
	// m holds the entries by the hash of their key; an entry whose key
	// is not the one looked up (a collision) is a miss.
	mu    sync.RWMutex
	m     map[uint64]*cachedAnswer
	bytes int // keys and answers held
	// seen holds hashes of keys missed once and not stored: an answer is
	// kept when its question is asked the second time (admit).
	seen [seenSlots]uint64
	_    [32]byte // keep shards on separate cache lines
}

// seenSlots is the size of a shard's seen table: together some 16 000
// questions can wait for their second time.
const seenSlots = 1024

// cachedAnswer is one packed answer, with its ID bytes zero.
type cachedAnswer struct {
	// key is the query after its ID, with the question's name in lower
	// case (caseFoldedKey); key and wire share one allocation.
	key     []byte
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
		c.shards[i].m = make(map[uint64]*cachedAnswer)
	}
	return c
}

func (c *answerCache) shard(h uint64) *cacheShard {
	return &c.shards[h%cacheShards]
}

// get returns the current answer for key, or nil.
func (c *answerCache) get(key []byte) *cachedAnswer {
	h := maphash.Bytes(c.seed, key)
	sh := c.shard(h)
	sh.mu.RLock()
	e := sh.m[h]
	sh.mu.RUnlock()
	if e == nil || e.version != zoneVersion.Load() || !bytes.Equal(e.key, key) {
		return nil
	}
	return e
}

// admit reports whether the answer to key (the hash of a case-folded key)
// is worth storing: when key was missed before. A question asked once
// (a random name under the zone, as floods and NXDOMAIN scans ask) then
// costs no allocation, no entry and no eviction; the price is one more
// miss for the others. Two questions sharing a slot push each other out,
// which only delays them.
func (c *answerCache) admit(h uint64) bool {
	sh := c.shard(h)
	slot := &sh.seen[(h>>32)%seenSlots]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if _, ok := sh.m[h]; ok || *slot == h {
		*slot = 0
		return true
	}
	*slot = h
	return false
}

// put stores e under e.key; a full shard loses entries, whichever the
// map yields first (effectively random), until it has room.
func (c *answerCache) put(e *cachedAnswer) {
	size := len(e.key) + len(e.wire)
	if len(e.key) > maxCachedQuery || size > c.maxBytes {
		return
	}
	c.putHashed(maphash.Bytes(c.seed, e.key), e)
}

func (c *answerCache) putHashed(h uint64, e *cachedAnswer) {
	size := len(e.key) + len(e.wire)
	sh := c.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if old, ok := sh.m[h]; ok {
		sh.bytes -= len(old.key) + len(old.wire)
		delete(sh.m, h)
	}
	for k, old := range sh.m {
		if len(sh.m) < c.perShard && sh.bytes+size <= c.maxBytes {
			break
		}
		sh.bytes -= len(old.key) + len(old.wire)
		delete(sh.m, k)
	}
	sh.m[h] = e
	sh.bytes += size
}

// Letter case: resolvers randomise the case of the names they ask about
// (draft-vixie-dnsext-dns0x20) and expect the question back exactly as
// asked. The cache keys a query with its question's name in lower case,
// so every spelling of a question shares one entry, and writes the
// spelling asked over the cached answer's question. That answer is the
// handler's byte for byte because the responder packs every answer with
// the question's name in lower case (names in the answer that compress to
// it then point at the same bytes whatever the spelling) and writes the
// spelling asked back afterwards (responder.WriteMsg).

// questionEnd is the offset in raw just past the name of its one
// question, or 12 (no name to fold: the key is raw as it is) when raw
// does not have exactly one question whose name is plain labels of
// letters, digits, '-', '_' and '*'.
func questionEnd(raw []byte) int {
	if len(raw) < 12 || binary.BigEndian.Uint16(raw[4:6]) != 1 {
		return 12
	}
	for i := 12; i < len(raw) && i-12 < 255; {
		l := int(raw[i])
		switch {
		case l == 0:
			return i + 1
		case l&0xc0 != 0 || i+1+l > len(raw):
			return 12
		}
		for _, c := range raw[i+1 : i+1+l] {
			if !plainNameByte(c) {
				return 12
			}
		}
		i += 1 + l
	}
	return 12
}

// plainNameByte: c stands for itself in a name's presentation form
// (miekg/dns escapes the others), so foldQuestion folds such a name.
func plainNameByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '*'
}

// lookup returns the current answer to the query raw, whose question's
// name ends at end, or nil. The key is raw after its ID with that name in
// lower case: raw itself when it has no capitals.
func (c *answerCache) lookup(raw []byte, end int) *cachedAnswer {
	if len(raw)-2 > maxCachedQuery {
		return nil
	}
	for _, ch := range raw[12:end] {
		if 'A' <= ch && ch <= 'Z' {
			return c.lookupFolded(raw, end)
		}
	}
	return c.get(raw[2:])
}

// lookupFolded is lookup for a name with capitals, apart so that only
// such queries pay for the buffer.
//
//go:noinline
func (c *answerCache) lookupFolded(raw []byte, end int) *cachedAnswer {
	var buf [maxCachedQuery]byte
	key := buf[:copy(buf[:], raw[2:])]
	lowerASCII(key[10 : end-2])
	return c.get(key)
}

// lowerASCII turns A-Z in b into a-z. In a name's wire form the length
// bytes (0 to 63) are never letters.
func lowerASCII(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
}

// cacheNote is what a responder carries to store its answer: the query
// after its ID (key, set while the query is being answered), the end of
// its question's name (nameEnd, an offset in the whole query) and the
// zone data version read before the handler ran (a change during the
// handler then outdates the entry at once).
type cacheNote struct {
	key     []byte
	nameEnd int
	version uint64
}

// storeAnswer keeps packed, the answer WriteMsg is about to send for m,
// if the query may be answered from the cache next time.
func (rw *responder) storeAnswer(m *dns.Msg, packed []byte, rrl rrlKey, hasRRL, capped bool) {
	s := rw.srv
	key, end := rw.note.key, rw.note.nameEnd
	if key == nil || rw.hasCookie || len(packed) > maxCachedAnswer || len(packed) < 12 || len(key) > maxCachedQuery {
		return
	}
	// A hit writes the question as asked over the answer's: only an
	// answer that carries it at the same place may be shared.
	if end > 12 && (len(packed) < end || !bytes.Equal(packed[12:end], key[10:end-2])) {
		return
	}
	c := s.cache[rw.t]
	var kb [maxCachedQuery]byte
	folded := kb[:copy(kb[:], key)]
	lowerASCII(folded[10 : end-2])
	h := maphash.Bytes(c.seed, folded)
	if len(folded)+len(packed) > c.maxBytes || !c.admit(h) {
		return
	}
	b := make([]byte, len(key)+len(packed))
	e := &cachedAnswer{
		key:     b[:copy(b, folded):len(key)],
		wire:    b[len(key):],
		version: rw.note.version,
		rrl:     rrl, hasRRL: hasRRL, capped: capped,
		rcode: uint16(m.Rcode),
	}
	copy(e.wire, packed)
	if len(m.Question) == 1 {
		e.qtype = m.Question[0].Qtype
	}
	e.wire[0], e.wire[1] = 0, 0
	c.putHashed(h, e)
}

// answerCached answers the query raw (header already checked) from the
// cache. It returns false when there is no current answer, or when RRL
// limits this one: then the slow path runs with the verdict already
// taken (rw.rrlPreset), so it is counted once.
func (s *Server) answerCached(raw []byte, rw *responder) bool {
	end := questionEnd(raw)
	rw.note.nameEnd = end
	e := s.cache[rw.t].lookup(raw, end)
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
	copy(buf[start+12:start+end], raw[12:end]) // the question as asked
	rw.send(buf[:start+n])                     // a failed send is the client's loss, as on the slow path
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
