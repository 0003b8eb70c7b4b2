package kex

import (
	"bytes"
	"crypto/ecdh"
	"testing"

	"filippo.io/edwards25519/field"
	"github.com/ztls-project/ztls/tls13/internal/field25519"
)

// BenchmarkX25519Primitives puts the x25519 primitives side by side in one
// run (issue 32):
//
//   - field/{mul,square,invert}/{field25519,filippo}: one field operation,
//     field25519 (the MULX/ADCX/ADOX assembly when Accelerated, else its Go
//     code) against filippo.io/edwards25519/field (crypto/ecdh's field);
//   - fixedbase/...: an x25519 public key from a scalar: edwards is
//     x25519PublicKey (field25519.ScalarBaseMult since issue 32's fixed-base
//     work; BenchmarkX25519FixedBase compares it with the edwards25519 path
//     it replaced); ladder9
//     field25519's ladder on u = 9; ecdh crypto/ecdh's NewPrivateKey and
//     PublicKey;
//   - ladder/...: X25519 with a peer's public key: x25519Ladder (what this
//     machine picks), portable (filippo's field), ecdh (crypto/ecdh with the
//     private key already made).
//
// ns/op is wall time; cpu-ns/op is the thread's CPU time (see cpuLoop).
func BenchmarkX25519Primitives(b *testing.B) {
	b.Logf("field25519.Accelerated() = %v", field25519.Accelerated())
	x := bytes.Repeat([]byte{0x5a}, 32)
	y := bytes.Repeat([]byte{0xa7}, 32)
	var fa, fb field25519.Element
	var ra, rb field.Element
	for _, err := range []error{set(&fa, x), set(&fb, y), setRef(&ra, x), setRef(&rb, y)} {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.Run("field/mul/field25519", func(b *testing.B) {
		for b.Loop() {
			fa.Multiply(&fa, &fb)
		}
	})
	b.Run("field/mul/filippo", func(b *testing.B) {
		for b.Loop() {
			ra.Multiply(&ra, &rb)
		}
	})
	b.Run("field/square/field25519", func(b *testing.B) {
		for b.Loop() {
			fa.Square(&fa)
		}
	})
	b.Run("field/square/filippo", func(b *testing.B) {
		for b.Loop() {
			ra.Square(&ra)
		}
	})
	b.Run("field/invert/field25519", func(b *testing.B) {
		for b.Loop() {
			fa.Invert(&fa)
		}
	})
	b.Run("field/invert/filippo", func(b *testing.B) {
		for b.Loop() {
			ra.Invert(&ra)
		}
	})

	var scalar, base, out [32]byte
	copy(scalar[:], x)
	base[0] = 9
	b.Run("fixedbase/edwards", func(b *testing.B) {
		cpuLoop(b, func() error { x25519PublicKey(&out, &scalar); return nil })
	})
	b.Run("fixedbase/ladder9", func(b *testing.B) {
		cpuLoop(b, func() error { field25519.ScalarMult(&out, &scalar, &base); return nil })
	})
	b.Run("fixedbase/ecdh", func(b *testing.B) {
		cpuLoop(b, func() error {
			priv, err := ecdh.X25519().NewPrivateKey(scalar[:])
			if err == nil {
				sinkBytes = priv.PublicKey().Bytes()
			}
			return err
		})
	})

	peer := ecdhPublic(b, y)
	for _, l := range ladders {
		b.Run("ladder/"+l.name, func(b *testing.B) {
			cpuLoop(b, func() error { return l.f(&out, &scalar, peer) })
		})
	}
	b.Run("ladder/ecdh", func(b *testing.B) {
		priv, err := ecdh.X25519().NewPrivateKey(scalar[:])
		if err != nil {
			b.Fatal(err)
		}
		pub, err := ecdh.X25519().NewPublicKey(peer)
		if err != nil {
			b.Fatal(err)
		}
		cpuLoop(b, func() (err error) {
			sinkBytes, err = priv.ECDH(pub)
			return err
		})
	})
}

func set(e *field25519.Element, b []byte) error { _, err := e.SetBytes(b); return err }
func setRef(e *field.Element, b []byte) error   { _, err := e.SetBytes(b); return err }
