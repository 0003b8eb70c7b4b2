package keyschedule

import (
	"bytes"
	"crypto"
	"crypto/hmac"
	mathrand "math/rand/v2"
	"testing"
)

// checkHMACStates MACs each message under one hmacKey keyed by key and
// compares with crypto/hmac; it reports whether hmacKey took the key.
func checkHMACStates(t *testing.T, h crypto.Hash, key []byte, msgs ...[]byte) bool {
	t.Helper()
	var k hmacKey
	defer k.clear()
	if !k.init(h, key) {
		if block := h.New().BlockSize(); (h == crypto.SHA256 || h == crypto.SHA384) && len(key) <= block {
			t.Fatalf("%v: a %d-byte key was refused", h, len(key))
		}
		return false
	}
	for _, msg := range msgs {
		var out [maxHashSize]byte
		got, ok := k.sum(&out, msg)
		mac := hmac.New(h.New, key)
		mac.Write(msg)
		if want := mac.Sum(nil); !ok || !bytes.Equal(got, want) {
			t.Fatalf("%v, key %d bytes, message %d bytes: %x, %v; crypto/hmac %x", h, len(key), len(msg), got, ok, want)
		}
	}
	return true
}

// hmacKey's saved states give crypto/hmac's MAC for SHA-256 and SHA-384,
// keys of every length class (empty, shorter than the hash, the hash's
// length, up to the block) and messages of every length class (empty,
// within the first block, a block boundary, several blocks), several
// messages under one key; keys past the block and other hashes are
// refused, and clear leaves no key state.
func TestHMACStatesMatchCryptoHMAC(t *testing.T) {
	r := mathrand.New(mathrand.NewPCG(3, 4))
	rnd := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384} {
		block := h.New().BlockSize()
		keyLens := []int{0, 1, h.Size() - 1, h.Size(), h.Size() + 1, block - 1, block}
		msgLens := []int{0, 1, 55, 56, block - 9, block - 8, block - 1, block, block + 1, 2*block + 3, 3 * maxHMACBlock}
		for _, kl := range keyLens {
			for i := 0; i < 20; i++ {
				msgs := make([][]byte, 0, len(msgLens)+5)
				for _, ml := range msgLens {
					msgs = append(msgs, rnd(ml))
				}
				for j := 0; j < 5; j++ {
					msgs = append(msgs, rnd(r.IntN(4*block)))
				}
				checkHMACStates(t, h, rnd(kl), msgs...)
			}
		}
		var k hmacKey
		if k.init(h, make([]byte, block+1)) || k.keyed() {
			t.Fatalf("%v: a key longer than the block was taken", h)
		}
		if !k.init(h, rnd(h.Size())) {
			t.Fatalf("%v: refused", h)
		}
		k.clear()
		if k.keyed() || k.inner != ([maxChain]byte{}) || k.outer != ([maxChain]byte{}) {
			t.Fatalf("%v: clear left key state", h)
		}
		if _, ok := k.sum(new([maxHashSize]byte), nil); ok {
			t.Fatalf("%v: a cleared key still MACs", h)
		}
	}
	var k hmacKey
	if k.init(crypto.SHA512, nil) {
		t.Fatal("SHA-512 was taken")
	}
}

// The stages' cached states derive what the one-shot functions derive.
func TestStageKeysMatchOneShot(t *testing.T) {
	for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384, crypto.SHA512} {
		th := bytes.Repeat([]byte{9}, h.Size())
		for _, ikm := range [][]byte{nil, bytes.Repeat([]byte{5}, h.Size())} {
			es := NewEarlySecret(h, ikm)
			esSecret := extract(new([maxHashSize]byte), h, nil, ikm)
			if got, want := es.BinderKey("ext binder"), DeriveSecret(h, esSecret, "ext binder", emptyHash(h)); !bytes.Equal(got, want) {
				t.Fatalf("%v: binder key %x, want %x", h, got, want)
			}
			if got, want := es.Expand("ztls time", 3*h.Size()), ExpandLabel(h, esSecret, "ztls time", nil, 3*h.Size()); !bytes.Equal(got, want) {
				t.Fatalf("%v: Expand %x, want %x", h, got, want)
			}
			shared := bytes.Repeat([]byte{6}, 64)
			hsSecret := extract(new([maxHashSize]byte), h, DeriveSecret(h, esSecret, "derived", emptyHash(h)), shared)
			hs := es.HandshakeSecret(shared)
			if got, want := hs.ClientHandshakeTrafficSecret(th), DeriveSecret(h, hsSecret, "c hs traffic", th); !bytes.Equal(got, want) {
				t.Fatalf("%v: c hs traffic %x, want %x", h, got, want)
			}
			key, iv := TrafficKeys(h, 16, hsSecret)
			if !bytes.Equal(key, ExpandLabel(h, hsSecret, "key", nil, 16)) || !bytes.Equal(iv, ExpandLabel(h, hsSecret, "iv", nil, 12)) {
				t.Fatalf("%v: traffic keys differ", h)
			}
		}
	}
}

// FuzzHMACStates: hmacKey agrees with crypto/hmac on both hashes for any
// key up to the block and any message, two messages under one key.
func FuzzHMACStates(f *testing.F) {
	f.Add([]byte("key"), []byte("message"), []byte{})
	f.Add(bytes.Repeat([]byte{1}, 128), bytes.Repeat([]byte{2}, 200), []byte{3})
	f.Fuzz(func(t *testing.T, key, msg1, msg2 []byte) {
		for _, h := range []crypto.Hash{crypto.SHA256, crypto.SHA384} {
			if took := checkHMACStates(t, h, key, msg1, msg2); took != (len(key) <= h.New().BlockSize()) {
				t.Fatalf("%v: %d-byte key taken %v", h, len(key), took)
			}
		}
	})
}

// TrafficKeysInto refuses, without panicking, a zero or unlinked hash and
// a wrong IV length, and derives keys longer than the hash.
func TestTrafficKeysIntoEdges(t *testing.T) {
	secret := bytes.Repeat([]byte{1}, 32)
	for _, h := range []crypto.Hash{0, crypto.MD4} {
		if TrafficKeysInto(make([]byte, 16), make([]byte, ivLen), h, secret) {
			t.Errorf("hash %v accepted", h)
		}
	}
	if TrafficKeysInto(make([]byte, 16), make([]byte, 8), crypto.SHA256, secret) {
		t.Error("8-byte IV accepted")
	}
	key := make([]byte, 40)
	if !TrafficKeysInto(key, make([]byte, ivLen), crypto.SHA256, secret) || !bytes.Equal(key, ExpandLabel(crypto.SHA256, secret, "key", nil, 40)) {
		t.Error("40-byte key differs from ExpandLabel")
	}
}

// The shared no-PSK early stage and the pooled workers give the same
// secrets from concurrent handshakes (run under -race too).
func TestSharedStageConcurrent(t *testing.T) {
	th := bytes.Repeat([]byte{4}, 32)
	want := NewEarlySecret(crypto.SHA256, nil).HandshakeSecret(th).ClientHandshakeTrafficSecret(th)
	errs := make(chan []byte, 8)
	for range 8 {
		go func() {
			var got []byte
			for range 50 {
				if got = NewEarlySecret(crypto.SHA256, nil).HandshakeSecret(th).ClientHandshakeTrafficSecret(th); !bytes.Equal(got, want) {
					break
				}
			}
			errs <- got
		}()
	}
	for range 8 {
		if got := <-errs; !bytes.Equal(got, want) {
			t.Fatalf("concurrent derivation %x, want %x", got, want)
		}
	}
}
