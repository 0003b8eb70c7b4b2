package ech

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/field25519"
)

// The ladder's shared secrets are crypto/ecdh's, and a low-order peer key
// is refused as crypto/ecdh refuses it.
func TestLadderKeyMatchesECDH(t *testing.T) {
	if !field25519.Accelerated() {
		t.Skip("no MULX/ADX on this CPU (or -tags purego): the server key is crypto/ecdh's own")
	}
	for i := 0; i < 64; i++ {
		priv, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		peer, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k := newLadderKey(priv)
		if _, ok := k.(*ladderKey); !ok {
			t.Fatalf("newLadderKey returned %T", k)
		}
		got, err := k.ECDH(peer.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		want, _ := priv.ECDH(peer.PublicKey())
		if !bytes.Equal(got, want) || !k.PublicKey().Equal(priv.PublicKey()) {
			t.Fatalf("key %d: ladder %x, crypto/ecdh %x", i, got, want)
		}
		lowOrder, _ := ecdh.X25519().NewPublicKey(make([]byte, 32))
		if _, err := k.ECDH(lowOrder); err == nil {
			t.Fatal("the ladder key accepted the zero point")
		}
		if p256, _ := ecdh.P256().GenerateKey(rand.Reader); p256 != nil {
			if _, err := k.ECDH(p256.PublicKey()); err == nil {
				t.Fatal("the ladder key accepted a P-256 key")
			}
		}
	}
}

// A server key made by the ladder opens what crypto/hpke's sender sealed,
// and serializes as crypto/hpke's own key does (clamped).
func TestLadderKeyOpensAndSerializes(t *testing.T) {
	k, err := GenerateKey(3, "public.test", 0, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := NewClientContext(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := cc.Seal([]byte("aad"), []byte("inner"))
	if err != nil {
		t.Fatal(err)
	}
	sc, err := NewServerContext(k, cc.Suite, cc.Enc)
	if err != nil {
		t.Fatal(err)
	}
	if pt, err := sc.Open([]byte("aad"), ct); err != nil || string(pt) != "inner" {
		t.Fatalf("open: %q, %v", pt, err)
	}
	raw, err := k.PrivateKeyBytes()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := hpke.DHKEM(ecdh.X25519()).NewPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	refRaw, _ := ref.Bytes()
	if !bytes.Equal(raw, refRaw) {
		t.Fatalf("PrivateKeyBytes %x, crypto/hpke's %x", raw, refRaw)
	}
	if _, err := LoadKey(k.Config.Raw, raw); err != nil {
		t.Fatalf("the serialized key does not load: %v", err)
	}
}
