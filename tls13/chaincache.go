package tls13

// A client's cache of the server chains it verified, so that a handshake
// that meets the same chain again under the same trust settings skips
// path building and the certificate signatures (issue 19: the client's
// chain verification is one of its two P-256 verifications). Package
// dial's prefetch cache hands chains in through the other hook,
// Config.VerifiedChains; both are asked in checkServerChain.

import (
	"container/list"
	"crypto/sha256"
	"crypto/x509"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultChainCacheSize is NewChainCache's bound when given 0.
const DefaultChainCacheSize = 256

// ChainCache remembers server chains that clients using it verified:
// the chains x509 built for one presented chain (leaf and intermediates,
// byte for byte) under one RootCAs pool and one ServerName. A later
// handshake of a Config with the same ChainCache, the same RootCAs (the
// same *x509.CertPool: pools only grow, so a chain verified under it stays
// verified) and the same ServerName takes the chains without verifying
// them again, while every certificate in them is within its validity at
// Config.Time. Revocation (Config.Revocation) is checked again on every
// use, and VerifyPeerCertificate runs as without the cache.
//
// The cache is bounded (least recently used entries go first) and safe
// for concurrent use; one ChainCache may serve many Configs. A Config
// without one verifies every chain; package dial's Cache gives one to the
// connections through it. What a cached chain cannot learn is only what
// a verification would not learn either: x509 reads the system roots
// once per process, and revocation is asked again each time.
type ChainCache struct {
	mu      sync.Mutex
	max     int
	entries map[[32]byte]*list.Element // of *chainEntry
	lru     list.List                  // front: most recently used

	hits, misses atomic.Uint64
}

type chainEntry struct {
	key    [32]byte
	roots  *x509.CertPool // the pool it was verified under, compared by identity
	chains [][]*x509.Certificate
	// Every certificate of chains is valid from notBefore to notAfter.
	notBefore, notAfter time.Time
}

// NewChainCache returns a cache of at most max verified chains
// (DefaultChainCacheSize if max <= 0).
func NewChainCache(max int) *ChainCache {
	if max <= 0 {
		max = DefaultChainCacheSize
	}
	return &ChainCache{max: max, entries: make(map[[32]byte]*list.Element)}
}

// Clear forgets every chain.
func (c *ChainCache) Clear() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = make(map[[32]byte]*list.Element)
	c.lru.Init()
}

// ChainCacheStats counts a ChainCache's lookups.
type ChainCacheStats struct {
	Hits, Misses uint64
	Entries      int
}

// Stats returns the cache's counts so far (zero for a nil cache).
func (c *ChainCache) Stats() ChainCacheStats {
	if c == nil {
		return ChainCacheStats{}
	}
	c.mu.Lock()
	n := len(c.entries)
	c.mu.Unlock()
	return ChainCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Entries: n}
}

// chainKey names a presented chain for a server name: SHA-256 over the
// length-prefixed name and certificates, so no two inputs share a key
// short of a SHA-256 collision.
func chainKey(serverName string, certs []*x509.Certificate) [32]byte {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(serverName)))
	h.Write(n[:])
	h.Write([]byte(serverName))
	for _, cert := range certs {
		binary.BigEndian.PutUint32(n[:], uint32(len(cert.Raw)))
		h.Write(n[:])
		h.Write(cert.Raw)
	}
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// get returns copies of the chains verified for certs under roots and
// serverName, if every certificate in them is valid at now (else nil),
// and the entry's key, for put after a verification.
func (c *ChainCache) get(roots *x509.CertPool, serverName string, certs []*x509.Certificate, now time.Time) (chains [][]*x509.Certificate, key [32]byte) {
	if c == nil {
		return nil, key
	}
	key = chainKey(serverName, certs)
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.entries[key]
	if el == nil {
		c.misses.Add(1)
		return nil, key
	}
	e := el.Value.(*chainEntry)
	if e.roots != roots {
		c.misses.Add(1)
		return nil, key
	}
	if now.Before(e.notBefore) || now.After(e.notAfter) {
		// Outside some certificate's validity: verified again (and, if
		// valid after all, put back with that verification's chains).
		c.lru.Remove(el)
		delete(c.entries, key)
		c.misses.Add(1)
		return nil, key
	}
	c.lru.MoveToFront(el)
	c.hits.Add(1)
	return copyChains(e.chains), key
}

// put remembers chains, verified under roots for the presented chain and
// server name that get named key.
func (c *ChainCache) put(key [32]byte, roots *x509.CertPool, chains [][]*x509.Certificate) {
	if c == nil || len(chains) == 0 {
		return
	}
	e := &chainEntry{key: key, roots: roots, chains: copyChains(chains)}
	first := true
	for _, ch := range chains {
		for _, cert := range ch {
			if first || cert.NotBefore.After(e.notBefore) {
				e.notBefore = cert.NotBefore
			}
			if first || cert.NotAfter.Before(e.notAfter) {
				e.notAfter = cert.NotAfter
			}
			first = false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.entries[e.key]; el != nil {
		el.Value = e
		c.lru.MoveToFront(el)
		return
	}
	c.entries[e.key] = c.lru.PushFront(e)
	for len(c.entries) > c.max {
		old := c.lru.Back()
		c.lru.Remove(old)
		delete(c.entries, old.Value.(*chainEntry).key)
	}
}

// copyChains copies the slices (not the certificates), so that what a
// connection's state hands out cannot change the cache.
func copyChains(chains [][]*x509.Certificate) [][]*x509.Certificate {
	out := make([][]*x509.Certificate, len(chains))
	for i, ch := range chains {
		out[i] = append([]*x509.Certificate(nil), ch...)
	}
	return out
}
