package tls13

import (
	"bytes"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// recordShares makes cfg's hooks note every key share it sends.
func recordShares(cfg *Config, seen map[string]int) {
	cfg.testHookClientHello = func(ch *wire.ClientHello) {
		for _, ks := range ch.KeyShares {
			seen[string(ks.Data)]++
		}
	}
	cfg.testHookServerHello = func(sh *wire.ServerHello) {
		if sh.HasKeyShare {
			seen[string(sh.KeyShare.Data)]++
		}
	}
}

// TestKeySharePoolHandshakes: handshakes of clients and servers sharing one
// pool all complete, take every x25519 and ML-KEM key through the pool
// (from it or inline), and never send the same key share twice.
func TestKeySharePoolHandshakes(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	pool := NewKeySharePool(4)
	seen := map[string]int{}
	ccfg, scfg := clientConfig(p), serverConfig(p)
	ccfg.KeySharePool, scfg.KeySharePool = pool, pool
	ccfg.SessionTicketsDisabled = true
	recordShares(ccfg, seen)
	recordShares(scfg, seen)
	const n = 12
	for i := range n {
		// Default groups: an X25519MLKEM768 share and an x25519 share
		// (3 keys); the server answers X25519MLKEM768 (1 x25519 key).
		cli, _, _, _, err := enginePair(ccfg, scfg, nil)
		if err != nil {
			t.Fatalf("handshake %d: %v", i, err)
		}
		if cli.info.Group != X25519MLKEM768 {
			t.Fatalf("negotiated %s", cli.info.Group)
		}
	}
	if got := pool.Taken() + pool.GeneratedInline(); got != 4*n {
		t.Fatalf("pool counted %d keys (%d taken, %d inline), want %d", got, pool.Taken(), pool.GeneratedInline(), 4*n)
	}
	if len(seen) != 3*n {
		t.Fatalf("%d distinct key shares in %d handshakes, want %d", len(seen), n, 3*n)
	}
	for share, count := range seen {
		if count != 1 {
			t.Fatalf("key share %x sent %d times", share[:8], count)
		}
	}
}

// TestKeySharePoolIgnoredWithRand: with Config.Rand set the pool is not
// touched, and the handshake's bytes still depend on Rand only.
func TestKeySharePoolIgnoredWithRand(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	pool := NewKeySharePool(4)
	run := func() []byte {
		ccfg, scfg := clientConfig(p), serverConfig(p)
		ccfg.Rand, scfg.Rand = seededRand(1), seededRand(2)
		ccfg.KeySharePool, scfg.KeySharePool = pool, pool
		var hello []byte
		ccfg.testHookClientHello = func(ch *wire.ClientHello) {
			for _, ks := range ch.KeyShares {
				hello = append(hello, ks.Data...)
			}
		}
		if _, _, _, _, err := enginePair(ccfg, scfg, nil); err != nil {
			t.Fatal(err)
		}
		return hello
	}
	a, b := run(), run()
	if !bytes.Equal(a, b) {
		t.Fatal("the same Rand gave different key shares with a pool set")
	}
	if pool.Taken() != 0 || pool.GeneratedInline() != 0 {
		t.Fatalf("pool used with Rand set: %d taken, %d inline", pool.Taken(), pool.GeneratedInline())
	}
}

// TestKeySharePoolZeroValue: a zero KeySharePool is no pool.
func TestKeySharePoolZeroValue(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	ccfg, scfg := clientConfig(p), serverConfig(p)
	ccfg.KeySharePool, scfg.KeySharePool = &KeySharePool{}, &KeySharePool{}
	if _, _, _, _, err := enginePair(ccfg, scfg, nil); err != nil {
		t.Fatal(err)
	}
}

// TestClientErasesKeyShares: once the ServerHello's secret is made, the
// client's key shares, the used one and the unused one, are erased (a
// share refuses to compute a secret afterwards).
func TestClientErasesKeyShares(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, pool := range []*KeySharePool{nil, NewKeySharePool(2)} {
		ccfg, scfg := clientConfig(p), serverConfig(p)
		ccfg.KeySharePool = pool
		c, s := newEngine(ccfg, true), newEngine(scfg, false)
		if err := c.startClient(nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		shares := c.st.(*clientExpectServerHello).p.shares
		if len(shares) != 2 {
			t.Fatalf("%d key shares, want the default 2", len(shares))
		}
		var pubs [][]byte
		for _, cs := range shares {
			pubs = append(pubs, cs.Public())
		}
		s.startServer()
		if err := s.feed(c.takeOutput()); err != nil {
			t.Fatal(err)
		}
		if err := c.feed(s.takeOutput()); err != nil {
			t.Fatal(err)
		}
		if !c.done {
			t.Fatal("client not done after the server's flight")
		}
		for i, cs := range shares {
			peer, _, err := kex.ServerShare(cs.Group(), pubs[i], nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := cs.Shared(peer); err == nil {
				t.Fatalf("%s share still usable after the handshake", CurveID(cs.Group()).String())
			}
		}
	}
}
