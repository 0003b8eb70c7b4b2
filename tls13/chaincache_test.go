package tls13

import (
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// chainCachePair runs one full handshake of ccfg against p's server and
// returns the client's state.
func chainCachePair(t *testing.T, p *testPKI, ccfg *Config) (ConnectionState, error) {
	t.Helper()
	cli, _, _, _, err := enginePair(ccfg, serverConfig(p), nil)
	if err != nil {
		return ConnectionState{}, err
	}
	return cli.info, nil
}

// TestChainCacheSkipsVerification: the second handshake with the same
// chain, RootCAs and ServerName takes the verified chains from the cache
// (the cache counts a hit and no new miss) and still reports them.
func TestChainCacheSkipsVerification(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	cache := NewChainCache(0)
	ccfg := clientConfig(p)
	ccfg.ChainCache = cache
	first, err := chainCachePair(t, p, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Hits != 0 || st.Misses != 1 || st.Entries != 1 {
		t.Fatalf("after the first handshake: %+v", st)
	}
	second, err := chainCachePair(t, p, ccfg.Clone())
	if err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Fatalf("after the second handshake: %+v", st)
	}
	if first.ChainSource != ChainVerified || second.ChainSource != ChainCached {
		t.Fatalf("chain sources %q then %q", first.ChainSource, second.ChainSource)
	}
	if len(second.VerifiedChains) != len(first.VerifiedChains) || len(second.VerifiedChains) == 0 ||
		!second.VerifiedChains[0][0].Equal(p.server.Leaf) {
		t.Fatalf("cached chains %v, verified %v", second.VerifiedChains, first.VerifiedChains)
	}
	// What a connection hands out is its own: changing it changes no
	// other connection's chains.
	second.VerifiedChains[0][0] = nil
	third, err := chainCachePair(t, p, ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if third.VerifiedChains[0][0] == nil {
		t.Fatal("a connection's VerifiedChains share their slices with the cache")
	}
}

// TestChainCacheRefusals: a chain verified once is not taken for another
// ServerName, another RootCAs pool, outside a certificate's validity or
// once revoked; VerifyPeerCertificate runs on every cached use. Each
// attack runs against a cache that already holds the chain.
func TestChainCacheRefusals(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, tc := range []struct {
		name  string
		tweak func(*Config)
		alert Alert
	}{
		{"other server name", func(c *Config) { c.ServerName = "evil.test" }, AlertBadCertificate},
		{"other roots", func(c *Config) { c.RootCAs = getPKI(t, "ed25519").pool() }, AlertUnknownCA},
		{"other pool with the same roots", func(c *Config) { c.RootCAs = p.pool() }, 0},
		{"after the leaf expired", func(c *Config) {
			c.Time = func() time.Time { return p.server.Leaf.NotAfter.Add(time.Hour) }
		}, AlertCertificateExpired},
		{"before the leaf is valid", func(c *Config) {
			c.Time = func() time.Time { return p.server.Leaf.NotBefore.Add(-time.Hour) }
		}, AlertCertificateExpired},
		{"revoked since", func(c *Config) { c.Revocation = revoking(t, p, p.server.Leaf.SerialNumber) }, AlertCertificateRevoked},
		{"hook refuses", func(c *Config) {
			c.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error { return errors.New("pinned elsewhere") }
		}, AlertBadCertificate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := NewChainCache(0)
			ccfg := clientConfig(p)
			ccfg.ChainCache = cache
			if _, err := chainCachePair(t, p, ccfg); err != nil {
				t.Fatal(err)
			}
			attack := ccfg.Clone()
			tc.tweak(attack)
			_, err := chainCachePair(t, p, attack)
			if tc.alert == 0 {
				// A new pool is verified again (pools are compared by
				// identity), and passes: same roots.
				if err != nil {
					t.Fatal(err)
				}
				if st := cache.Stats(); st.Hits != 0 {
					t.Fatalf("a chain verified under one pool was taken for another: %+v", st)
				}
				return
			}
			wantAlert(t, err, tc.alert)
		})
	}
}

// TestChainCacheHookSeesCachedChains: VerifyPeerCertificate runs on a
// cached use with the chains and raw certificates.
func TestChainCacheHookSeesCachedChains(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	ccfg := clientConfig(p)
	ccfg.ChainCache = NewChainCache(0)
	calls := 0
	ccfg.VerifyPeerCertificate = func(raws [][]byte, chains [][]*x509.Certificate) error {
		calls++
		if len(raws) == 0 || len(chains) == 0 || !chains[0][0].Equal(p.server.Leaf) {
			return errors.New("hook without the chain")
		}
		return nil
	}
	for range 2 {
		if _, err := chainCachePair(t, p, ccfg); err != nil {
			t.Fatal(err)
		}
	}
	if st := ccfg.ChainCache.Stats(); calls != 2 || st.Hits != 1 {
		t.Fatalf("hook ran %d times, cache %+v", calls, st)
	}
}

// cachedChains is ChainCache.get's chains.
func cachedChains(c *ChainCache, roots *x509.CertPool, name string, certs []*x509.Certificate, now time.Time) [][]*x509.Certificate {
	chains, _ := c.get(roots, name, certs, now)
	return chains
}

// TestChainCacheBound: the least recently used entry goes first.
func TestChainCacheBound(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	certs := []*x509.Certificate{p.server.Leaf}
	chains := [][]*x509.Certificate{{p.server.Leaf, p.ca.Cert}}
	roots := p.pool()
	now := clock.Now()
	c := NewChainCache(2)
	c.put(chainKey("a.test", certs), roots, chains)
	c.put(chainKey("b.test", certs), roots, chains)
	if cachedChains(c, roots, "a.test", certs, now) == nil { // a is now the most recent
		t.Fatal("a missing")
	}
	c.put(chainKey("c.test", certs), roots, chains)
	if cachedChains(c, roots, "b.test", certs, now) != nil {
		t.Fatal("b, the least recently used, was kept past the bound")
	}
	if cachedChains(c, roots, "a.test", certs, now) == nil || cachedChains(c, roots, "c.test", certs, now) == nil {
		t.Fatal("a recent entry was evicted")
	}
	if st := c.Stats(); st.Entries != 2 {
		t.Fatalf("%d entries, bound 2", st.Entries)
	}
	c.Clear()
	if cachedChains(c, roots, "a.test", certs, now) != nil || c.Stats().Entries != 0 {
		t.Fatal("an entry outlived Clear")
	}
	var nilCache *ChainCache
	nilCache.Clear()
	if nilCache.Stats() != (ChainCacheStats{}) {
		t.Fatal("a nil cache counted something")
	}
	nilCache.put(chainKey("a.test", certs), roots, chains)
	if cachedChains(nilCache, roots, "a.test", certs, now) != nil {
		t.Fatal("a nil cache answered")
	}
}
