package p256sign

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"testing"
)

// BenchmarkSign puts crypto/ecdsa.SignASN1 and Sign side by side in one
// binary (docs/bench/p256sign-2026-11-28.txt).
func BenchmarkSign(b *testing.B) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	digest := sha256.Sum256([]byte("CertificateVerify"))
	b.Run("crypto-ecdsa", func(b *testing.B) {
		for b.Loop() {
			if _, err := ecdsa.SignASN1(rand.Reader, key, digest[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("p256sign", func(b *testing.B) {
		for b.Loop() {
			if _, err := Sign(rand.Reader, key, digest[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkParts times the pieces of Sign: R = kG through crypto/ecdh, the
// hedged DRBG up to k, the inversion (safegcd, and the two alternatives
// measured against it: Fermat and blinded math/big), one multiplication mod
// n, the key's scalar.
func BenchmarkParts(b *testing.B) {
	var kb [32]byte
	if _, err := rand.Read(kb[:]); err != nil {
		b.Fatal(err)
	}
	kb[0] &= 0x7f
	var k, bl scalar
	k.setBytes(&kb)
	bl = k
	bl[1] ^= 0x5555
	b.Run("ecdh-R", func(b *testing.B) {
		for b.Loop() {
			p, err := ecdh.P256().NewPrivateKey(kb[:])
			if err != nil {
				b.Fatal(err)
			}
			_ = p.PublicKey().Bytes()
		}
	})
	b.Run("drbg-seed+generate", func(b *testing.B) {
		var d hmacDRBG
		extra := make([]byte, 32)
		for b.Loop() {
			d.seed(&kb, &kb, extra)
			d.generate()
		}
	})
	b.Run("invert-fermat", func(b *testing.B) {
		var z scalar
		for b.Loop() {
			z.invertFermat(&k)
		}
	})
	b.Run("invert-safegcd", func(b *testing.B) {
		var z scalar
		for b.Loop() {
			z.invertSafegcd(&k)
		}
	})
	b.Run("invert-blinded", func(b *testing.B) {
		var z scalar
		for b.Loop() {
			z.invertBlinded(&k, &bl)
		}
	})
	b.Run("mul", func(b *testing.B) {
		z := k
		for b.Loop() {
			z.mul(&z, &bl)
		}
	})
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("key-bytes", func(b *testing.B) {
		var xb [32]byte
		for b.Loop() {
			if err := privateBytes(key, &xb); err != nil {
				b.Fatal(err)
			}
		}
	})
}
