package p256verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// newKey returns a fresh P-256 key, failing the test if it cannot.
func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestVerifyAgreesWithCryptoECDSA(t *testing.T) {
	for i := 0; i < 200; i++ {
		k := newKey(t)
		d := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		if !Verify(&k.PublicKey, d[:], sig) {
			t.Fatalf("signature %d: a valid signature was refused", i)
		}
		d[i%32] ^= 1 << (i % 8)
		if Verify(&k.PublicKey, d[:], sig) {
			t.Fatalf("signature %d: accepted over another digest", i)
		}
		other := newKey(t)
		if Verify(&other.PublicKey, d[:], sig) {
			t.Fatalf("signature %d: accepted under another key", i)
		}
	}
}

// TestVerifyRefusesOtherCurves: a P-384 key is never handled here.
func TestVerifyRefusesOtherCurves(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("x"))
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		t.Fatal(err)
	}
	if Verify(&k.PublicKey, d[:], sig) || Verify(nil, d[:], sig) {
		t.Fatal("a P-384 key or a nil key was accepted")
	}
}

// BenchmarkVerify: crypto/ecdsa.VerifyASN1 and Verify side by side on the
// same key, digest and signature (the digest already made, as sig's is),
// Verify on the Go code too, and the two inversions (invertPair) alone.
func BenchmarkVerify(b *testing.B) {
	k := newKey(b)
	d := sha256.Sum256(make([]byte, 130))
	sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
	if err != nil {
		b.Fatal(err)
	}
	b.Run("crypto-ecdsa", func(b *testing.B) {
		for b.Loop() {
			if !ecdsa.VerifyASN1(&k.PublicKey, d[:], sig) {
				b.Fatal("refused")
			}
		}
	})
	verify := func(b *testing.B) {
		Verify(&k.PublicKey, d[:], sig) // the base point's table, once
		for b.Loop() {
			if !Verify(&k.PublicKey, d[:], sig) {
				b.Fatal("refused")
			}
		}
	}
	b.Run("p256verify", verify)
	if Accelerated() {
		b.Run("p256verify-go", func(b *testing.B) { withGoPath(func() { verify(b) }) })
	}
	b.Run("invert-pair", func(b *testing.B) {
		// Full-size values (the binary GCD's time depends on them): below
		// n and p, as a signature's s and a table's Z are.
		s := element{0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89}
		z := element{0x452821e638d01377, 0xbe5466cf34e90c6c, 0xc0ac29b7c97c50dd, 0x3f84d5b5b5470917}
		var w, zi element
		for b.Loop() {
			invertPair(&w, &s, &zi, &z)
		}
	})
}
