package kex

import (
	"bytes"
	"crypto/ecdh"
	mathrand "math/rand/v2"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/field25519"
)

// TestX25519PublicKeyMatchesReferences compares both fixed-base
// multiplications, field25519.ScalarBaseMult (on its assembly or, with
// -tags purego, its Go code) and x25519PublicKeyPortable, and what
// x25519PublicKey picks, with crypto/ecdh on edge and random scalars.
func TestX25519PublicKeyMatchesReferences(t *testing.T) {
	t.Logf("field25519.Accelerated() = %v", field25519.Accelerated())
	var scalars [][32]byte
	for _, b := range []byte{0x00, 0xff, 0x88, 0x77, 0x01, 0x80} {
		scalars = append(scalars, [32]byte(bytes.Repeat([]byte{b}, 32)))
	}
	rnd := mathrand.New(mathrand.NewPCG(25519, 32))
	for range 200 {
		var s [32]byte
		for i := range s {
			s[i] = byte(rnd.Uint32())
		}
		scalars = append(scalars, s)
	}
	for _, s := range scalars {
		var got, fast, portable [32]byte
		x25519PublicKey(&got, &s)
		field25519.ScalarBaseMult(&fast, &s)
		x25519PublicKeyPortable(&portable, &s)
		if want := ecdhPublic(t, s[:]); !bytes.Equal(got[:], want) || fast != got || portable != got {
			t.Fatalf("public key of %x: x25519PublicKey %x, ScalarBaseMult %x, portable %x; crypto/ecdh %x", s, got, fast, portable, want)
		}
	}
}

// BenchmarkX25519FixedBase puts the x25519 public-key computations side by
// side in one binary (issue 32): field25519 is field25519.ScalarBaseMult
// (what x25519PublicKey runs when Accelerated), edwards25519 the path it
// replaced (x25519PublicKeyPortable, still used without BMI2/ADX), ladder9
// field25519's ladder on u = 9, ecdh crypto/ecdh's NewPrivateKey and
// PublicKey. ns/op is wall time; cpu-ns/op the thread's CPU time (cpuLoop).
func BenchmarkX25519FixedBase(b *testing.B) {
	b.Logf("field25519.Accelerated() = %v", field25519.Accelerated())
	var scalar, base, out [32]byte
	copy(scalar[:], bytes.Repeat([]byte{0x5a}, 32))
	base[0] = 9
	b.Run("field25519", func(b *testing.B) {
		cpuLoop(b, func() error { field25519.ScalarBaseMult(&out, &scalar); return nil })
	})
	b.Run("edwards25519", func(b *testing.B) {
		cpuLoop(b, func() error { x25519PublicKeyPortable(&out, &scalar); return nil })
	})
	b.Run("ladder9", func(b *testing.B) {
		cpuLoop(b, func() error { field25519.ScalarMult(&out, &scalar, &base); return nil })
	})
	b.Run("ecdh", func(b *testing.B) {
		cpuLoop(b, func() error {
			priv, err := ecdh.X25519().NewPrivateKey(scalar[:])
			if err == nil {
				sinkBytes = priv.PublicKey().Bytes()
			}
			return err
		})
	})
}
