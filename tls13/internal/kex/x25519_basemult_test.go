package kex

import (
	"bytes"
	"crypto/ecdh"
	mathrand "math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
	"github.com/ztls-project/ztls/tls13/internal/field25519"
)

// edwardsPublicKey is the fixed-base path x25519PublicKey took before
// field25519.ScalarBaseMult (filippo.io/edwards25519's ScalarBaseMult and
// BytesMontgomery), kept as a reference and for the benchmark.
func edwardsPublicKey(pub, scalar *[32]byte) {
	s, err := new(edwards25519.Scalar).SetBytesWithClamping(scalar[:])
	if err != nil {
		panic("SetBytesWithClamping rejected 32 bytes: " + err.Error())
	}
	var p edwards25519.Point
	p.ScalarBaseMult(s)
	copy(pub[:], p.BytesMontgomery())
}

// TestX25519PublicKeyMatchesReferences compares x25519PublicKey with
// crypto/ecdh and with edwards25519's fixed-base multiplication on edge and
// random scalars (with -tags purego this is field25519's Go path).
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
		var got, old [32]byte
		x25519PublicKey(&got, &s)
		edwardsPublicKey(&old, &s)
		if want := ecdhPublic(t, s[:]); !bytes.Equal(got[:], want) || got != old {
			t.Fatalf("public key of %x: %x; crypto/ecdh %x, edwards25519 %x", s, got, want, old)
		}
	}
}

// BenchmarkX25519FixedBase puts the x25519 public-key computations side by
// side in one binary (issue 32): field25519 is x25519PublicKey
// (field25519.ScalarBaseMult, what the engine runs), edwards25519 the path
// it replaced, ladder9 field25519's ladder on u = 9, ecdh crypto/ecdh's
// NewPrivateKey and PublicKey. ns/op is wall time; cpu-ns/op the thread's
// CPU time (cpuLoop).
func BenchmarkX25519FixedBase(b *testing.B) {
	b.Logf("field25519.Accelerated() = %v", field25519.Accelerated())
	var scalar, base, out [32]byte
	copy(scalar[:], bytes.Repeat([]byte{0x5a}, 32))
	base[0] = 9
	b.Run("field25519", func(b *testing.B) {
		cpuLoop(b, func() error { x25519PublicKey(&out, &scalar); return nil })
	})
	b.Run("edwards25519", func(b *testing.B) {
		cpuLoop(b, func() error { edwardsPublicKey(&out, &scalar); return nil })
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
