package zdata

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"testing"
)

// TestSmallOrderTable: every listed x25519 u-coordinate (and its encoding
// with the top bit set) makes crypto/ecdh refuse the exchange as low
// order, so the table refuses nothing crypto/ecdh would accept; random
// shares and a real public key pass.
func TestSmallOrderTable(t *testing.T) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range x25519SmallOrder {
		for _, top := range []byte{0, 0x80} {
			enc := u
			enc[31] |= top
			pub, err := ecdh.X25519().NewPublicKey(enc[:])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := priv.ECDH(pub); err == nil {
				t.Errorf("entry %d (top bit %#x): crypto/ecdh accepts it, so it is not of small order", i, top)
			}
			if !x25519LowOrder(enc[:]) {
				t.Errorf("entry %d (top bit %#x) not refused", i, top)
			}
			if err := ValidateShare(GroupX25519, enc[:]); !errors.Is(err, ErrInvalidShare) {
				t.Errorf("entry %d: ValidateShare = %v", i, err)
			}
		}
	}
	for i := 0; i < 64; i++ {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateShare(GroupX25519, k.PublicKey().Bytes()); err != nil {
			t.Fatalf("a real public key refused: %v", err)
		}
	}
}

// ecdhReference is SharedSecret as it was with crypto/ecdh alone: the
// oracle the engine's ladder is held to.
func ecdhReference(priv *ecdh.PrivateKey, peer []byte) ([]byte, error) {
	pub, err := priv.Curve().NewPublicKey(peer)
	if err != nil {
		return nil, err
	}
	return ecdhChecked(priv, pub)
}

// checkAgainstECDH fails t unless SharedSecret and crypto/ecdh both refuse
// peer or both give the same secret.
func checkAgainstECDH(t *testing.T, priv *ecdh.PrivateKey, peer []byte) {
	t.Helper()
	got, err := SharedSecret(priv, peer)
	want, wantErr := ecdhReference(priv, peer)
	if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
		t.Fatalf("peer %x: SharedSecret = %x, %v; crypto/ecdh = %x, %v", peer, got, err, want, wantErr)
	}
}

// TestSharedSecretMatchesECDH: an x25519 Z-data key's ZS, now from the
// engine's ladder, equals crypto/ecdh's for random peers, peers with the
// top bit set, non-canonical u (p and above), every small-order point
// (refused by both: an all-zero result) and wrong lengths (refused).
func TestSharedSecretMatchesECDH(t *testing.T) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		peer := make([]byte, 32)
		rand.Read(peer)
		checkAgainstECDH(t, priv, peer)
	}
	for d := -1; d <= 12; d++ { // p-1 .. p+12: non-canonical encodings of 0 .. 12
		u := fieldPlus(d)
		checkAgainstECDH(t, priv, u[:])
		u[31] |= 0x80
		checkAgainstECDH(t, priv, u[:])
	}
	for _, u := range x25519SmallOrder {
		if _, err := SharedSecret(priv, u[:]); err == nil {
			t.Fatalf("small-order peer %x accepted", u)
		}
		checkAgainstECDH(t, priv, u[:])
	}
	for _, n := range []int{0, 31, 33, 65} {
		if _, err := SharedSecret(priv, make([]byte, n)); err == nil {
			t.Fatalf("a %d-byte peer share was accepted", n)
		}
	}
	peer, _ := ecdh.X25519().GenerateKey(rand.Reader)
	checkAgainstECDH(t, priv, peer.PublicKey().Bytes())
}

// FuzzSharedSecret holds an x25519 key's SharedSecret to crypto/ecdh on
// any private key and any peer bytes.
func FuzzSharedSecret(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{9}, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32), make([]byte, 32))
	one := fieldPlus(1)
	f.Add(make([]byte, 32), one[:])
	f.Add(bytes.Repeat([]byte{7}, 32), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, scalar, peer []byte) {
		s := make([]byte, 32)
		copy(s, scalar)
		priv, err := ecdh.X25519().NewPrivateKey(s)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstECDH(t, priv, peer)
	})
}

// BenchmarkSharedSecret is an x25519 Z-data key's ZS per accepted flight:
// ladder is SharedSecret now (the engine's ladder), ecdh as it was
// (crypto/ecdh's NewPublicKey and ECDH).
func BenchmarkSharedSecret(b *testing.B) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	peerKey, _ := ecdh.X25519().GenerateKey(rand.Reader)
	peer := peerKey.PublicKey().Bytes()
	b.Run("ladder", func(b *testing.B) {
		for b.Loop() {
			if _, err := SharedSecret(priv, peer); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ecdh", func(b *testing.B) {
		for b.Loop() {
			if _, err := ecdhReference(priv, peer); err != nil {
				b.Fatal(err)
			}
		}
	})
}
