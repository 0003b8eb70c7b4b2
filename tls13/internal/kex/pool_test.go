package kex

import (
	"bytes"
	"sync"
	"testing"
	"time"
)

// waitFull waits until the pool's x25519 stack is full. It asserts
// nothing about time: a pool that never fills hangs the test until go
// test's -timeout.
func waitFull[K comparable](s *keyStack[K]) {
	for {
		s.mu.Lock()
		n := len(s.keys)
		s.mu.Unlock()
		if n == s.size {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// holds reports whether any slot of the stack's array, used or not,
// still refers to k.
func holds[K comparable](s *keyStack[K], k K) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.keys[:cap(s.keys)] {
		if v == k {
			return true
		}
	}
	return false
}

// TestPoolSharesAgree: shares made from a pool interoperate with shares
// made without one, both ways, for both pooled groups.
func TestPoolSharesAgree(t *testing.T) {
	p := NewPool(4)
	for _, g := range []uint16{X25519, X25519MLKEM768, P256} {
		for range 2 {
			cs, err := p.ClientShare(g)
			if err != nil {
				t.Fatal(err)
			}
			srvPub, secret, err := ServerShare(g, cs.Public(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := cs.Shared(srvPub); err != nil || !bytes.Equal(got, secret) {
				t.Fatalf("%s: pooled client share disagrees: %v", Name(g), err)
			}
			plain, err := GenerateClientShare(g, nil)
			if err != nil {
				t.Fatal(err)
			}
			srvPub, secret, err = p.ServerShare(g, plain.Public())
			if err != nil {
				t.Fatal(err)
			}
			if got, err := plain.Shared(srvPub); err != nil || !bytes.Equal(got, secret) {
				t.Fatalf("%s: pooled server share disagrees: %v", Name(g), err)
			}
		}
	}
}

// TestPoolKeysUsedOnce: many concurrent handshakes on one pool, which is
// full at the start; no two of them get the same public key, and most
// keys came from the pool.
func TestPoolKeysUsedOnce(t *testing.T) {
	const size, workers, each = 8, 4, 40
	p := NewPool(size)
	if _, err := p.ClientShare(X25519MLKEM768); err != nil { // starts both refills
		t.Fatal(err)
	}
	waitFull(&p.x)
	waitFull(&p.mlkem)
	before := p.Taken()
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				var pubs [][]byte
				switch (w + i) % 3 {
				case 0:
					cs, err := p.ClientShare(X25519)
					if err != nil {
						errs <- err
						return
					}
					pubs = append(pubs, cs.Public())
				case 1:
					cs, err := p.ClientShare(X25519MLKEM768)
					if err != nil {
						errs <- err
						return
					}
					pub := cs.Public()
					pubs = append(pubs, pub[:mlkemEKLen], pub[mlkemEKLen:])
				case 2:
					peer, err := GenerateClientShare(X25519, nil)
					if err != nil {
						errs <- err
						return
					}
					srv, _, err := p.ServerShare(X25519, peer.Public())
					if err != nil {
						errs <- err
						return
					}
					pubs = append(pubs, srv)
				}
				mu.Lock()
				for _, pub := range pubs {
					if seen[string(pub)] {
						mu.Unlock()
						t.Errorf("public key %x handed out twice", pub[:8])
						return
					}
					seen[string(pub)] = true
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// 2*size keys were waiting: the first takes cannot all have missed.
	if p.Taken()-before < size {
		t.Fatalf("only %d keys taken from a full pool", p.Taken()-before)
	}
}

// TestPoolForgetsTakenKeys: once taken, a key is in no slot of the pool,
// and the share erases it after use.
func TestPoolForgetsTakenKeys(t *testing.T) {
	p := NewPool(4)
	if _, err := p.ClientShare(X25519MLKEM768); err != nil {
		t.Fatal(err)
	}
	waitFull(&p.x)
	waitFull(&p.mlkem)
	taken := p.Taken()
	cs, err := p.ClientShare(X25519MLKEM768)
	if err != nil {
		t.Fatal(err)
	}
	if p.Taken() != taken+2 {
		t.Fatalf("Taken went from %d to %d, want +2", taken, p.Taken())
	}
	h := cs.(*hybridShare)
	x := h.x
	if holds(&p.x, x) || holds(&p.mlkem, h.dk) {
		t.Fatal("the pool still refers to a key it handed out")
	}
	if x.pub == ([32]byte{}) {
		t.Fatal("a pooled key's public key was not made ahead")
	}
	srvPub, _, err := ServerShare(X25519MLKEM768, cs.Public(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Shared(srvPub); err != nil {
		t.Fatal(err)
	}
	cs.Erase()
	if x.scalar != ([32]byte{}) || h.dk != nil {
		t.Fatal("Erase left key material in the share")
	}
	if _, err := cs.Shared(srvPub); err == nil {
		t.Fatal("Shared worked after Erase")
	}

	// The server's key: taken, used, erased.
	var used *x25519Key
	peer, err := GenerateClientShare(X25519, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = serverShare(X25519, peer.Public(), nil, func() (*x25519Key, error) {
		k, err := p.takeX(newX25519Scalar)
		used = k
		return k, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if holds(&p.x, used) || used.scalar != ([32]byte{}) {
		t.Fatal("the server's pooled key survived its handshake")
	}
}

// TestPoolDryFallsBack: with no refill able to run, every key is made
// inline, counted as such, and the shares still work.
func TestPoolDryFallsBack(t *testing.T) {
	p := NewPool(4)
	p.x.refilling, p.mlkem.refilling = true, true // as if a refill were stuck
	const n = 5
	for range n {
		cs, err := p.ClientShare(X25519)
		if err != nil {
			t.Fatal(err)
		}
		srvPub, secret, err := p.ServerShare(X25519, cs.Public())
		if err != nil {
			t.Fatal(err)
		}
		if got, err := cs.Shared(srvPub); err != nil || !bytes.Equal(got, secret) {
			t.Fatalf("shares from a dry pool disagree: %v", err)
		}
	}
	if p.Taken() != 0 || p.Inline() != 2*n {
		t.Fatalf("dry pool: Taken %d, Inline %d; want 0 and %d", p.Taken(), p.Inline(), 2*n)
	}
	if len(p.x.keys) != 0 {
		t.Fatal("a dry pool without refills gained keys")
	}
}

// TestPoolRejectsBadShareWithoutTakingAKey: a malformed client share is
// refused before the server takes a key from the pool.
func TestPoolRejectsBadShareWithoutTakingAKey(t *testing.T) {
	p := NewPool(2)
	_, _, err := p.ServerShare(X25519, make([]byte, 31))
	wantIllegal(t, err, "short share")
	if p.Taken()+p.Inline() != 0 {
		t.Fatal("a refused share used a key")
	}
}

// TestPoolFill: Fill makes the keys of the groups named, in the caller,
// up to the pool's size and no further; the next shares of those groups
// take them (no key made inline), and a group not named gets none.
func TestPoolFill(t *testing.T) {
	p := NewPool(3)
	if err := p.Fill([]uint16{X25519MLKEM768}); err != nil {
		t.Fatal(err)
	}
	if len(p.x.keys) != 3 || len(p.mlkem.keys) != 3 {
		t.Fatalf("after Fill: %d x25519 keys, %d ML-KEM keys; want 3 and 3", len(p.x.keys), len(p.mlkem.keys))
	}
	if err := p.Fill([]uint16{X25519}); err != nil || len(p.x.keys) != 3 {
		t.Fatalf("a second Fill: %v, %d x25519 keys", err, len(p.x.keys))
	}
	p.x.refilling, p.mlkem.refilling = true, true // no background refill: count what Fill made
	for range 3 {
		if _, err := p.ClientShare(X25519MLKEM768); err != nil {
			t.Fatal(err)
		}
	}
	if p.Taken() != 6 || p.Inline() != 0 {
		t.Fatalf("shares after Fill: Taken %d, Inline %d; want 6 and 0", p.Taken(), p.Inline())
	}
	q := NewPool(2)
	if err := q.Fill([]uint16{P256}); err != nil || len(q.x.keys) != 0 || len(q.mlkem.keys) != 0 {
		t.Fatalf("Fill for P-256 made pool keys: %v, %d, %d", err, len(q.x.keys), len(q.mlkem.keys))
	}
}
