package field25519

import (
	"bytes"
	"crypto/ecdh"
	"encoding/hex"
	mathrand "math/rand/v2"
	"testing"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
)

// ecdhPublic is crypto/ecdh's X25519 public key for the 32-byte scalar.
func ecdhPublic(t testing.TB, scalar []byte) []byte {
	t.Helper()
	priv, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		t.Fatal(err)
	}
	return priv.PublicKey().Bytes()
}

// bothPaths runs f on the dispatching routines and, where they are the
// assembly, on the Go routines as well, naming each run.
func bothPaths(t *testing.T, f func(t *testing.T)) {
	t.Run("dispatch", f)
	if useADX {
		t.Run("generic", func(t *testing.T) { useGenericStep(t, func() { f(t) }) })
	}
}

// checkBaseMult compares ScalarBaseMult, on the current path, with
// crypto/ecdh and with the ladder on u = 9.
func checkBaseMult(t *testing.T, scalar []byte) {
	t.Helper()
	var got, ladder, nine [32]byte
	nine[0] = 9
	ScalarBaseMult(&got, (*[32]byte)(scalar))
	if want := ecdhPublic(t, scalar); !bytes.Equal(got[:], want) {
		t.Fatalf("ScalarBaseMult(%x) = %x, crypto/ecdh %x", scalar, got, want)
	}
	ScalarMult(&ladder, (*[32]byte)(scalar), &nine)
	if got != ladder {
		t.Fatalf("ScalarBaseMult(%x) = %x, ScalarMult(k, 9) %x", scalar, got, ladder)
	}
}

// TestScalarBaseMultRFC7748 derives Alice's and Bob's public keys of
// RFC 7748, Section 6.1, on both paths.
func TestScalarBaseMultRFC7748(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		for _, v := range []struct{ priv, pub string }{
			{"77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
				"8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"},
			{"5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb",
				"de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f"},
		} {
			var out [32]byte
			ScalarBaseMult(&out, unhex(t, v.priv))
			if got := hex.EncodeToString(out[:]); got != v.pub {
				t.Errorf("public key of %s = %s, want %s", v.priv, got, v.pub)
			}
		}
	})
}

// TestScalarBaseMultEdges runs scalars at the borders of the clamping and
// of the signed recoding: all zeros, all ones, only the bits clamping
// clears or sets, each single bit, runs of 0x88 and 0x77 (digits at the
// ends of [-8, 8)), and random scalars, on both paths.
func TestScalarBaseMultEdges(t *testing.T) {
	var scalars [][]byte
	for _, b := range []byte{0x00, 0xff, 0x88, 0x77, 0x80, 0x7f, 0x08, 0xf8, 0x0f, 0xf0} {
		scalars = append(scalars, bytes.Repeat([]byte{b}, 32))
	}
	clampOnly := make([]byte, 32)
	clampOnly[0], clampOnly[31] = 7, 0x80 // exactly the bits clamping clears
	scalars = append(scalars, clampOnly)
	for bit := range 256 {
		s := make([]byte, 32)
		s[bit/8] = 1 << (bit % 8)
		scalars = append(scalars, s)
	}
	rnd := mathrand.New(mathrand.NewPCG(32, 7748))
	for range 100 {
		s := make([]byte, 32)
		for i := range s {
			s[i] = byte(rnd.Uint32())
		}
		scalars = append(scalars, s)
	}
	bothPaths(t, func(t *testing.T) {
		for _, s := range scalars {
			checkBaseMult(t, s)
		}
	})
}

// TestScalarBaseMultClampingIgnored checks that the bits clamping
// overwrites do not change the result.
func TestScalarBaseMultClampingIgnored(t *testing.T) {
	s := bytes.Repeat([]byte{0x5a}, 32)
	var a, b [32]byte
	ScalarBaseMult(&a, (*[32]byte)(s))
	s[0] ^= 7
	s[31] ^= 0xc0
	ScalarBaseMult(&b, (*[32]byte)(s))
	if a != b {
		t.Fatalf("flipping clamped bits changed the public key: %x, %x", a, b)
	}
}

// TestBaseTable checks every table entry against filippo.io/edwards25519:
// row m, entry j-1 is j * 16^(2m) * B, affine (y+x, y-x, 2dxy).
func TestBaseTable(t *testing.T) {
	table := computeBaseTable()
	if *table != *basePoints() {
		t.Fatal("the table computed twice differs")
	}
	step := edwards25519.NewGeneratorPoint() // 16^(2m) * B
	for m := range table {
		p := edwards25519.NewIdentityPoint()
		for j := range table[m] {
			p.Add(p, step)
			x, y := affine(t, p)
			if table[m][j] != affineNiels(x, y) {
				t.Fatalf("table[%d][%d] is not %d * 16^%d * B", m, j, j+1, 2*m)
			}
		}
		for range 8 {
			step.Add(step, step)
		}
	}
}

// affine returns the affine coordinates of p, computed with
// filippo.io/edwards25519/field and converted to field25519 elements.
func affine(t *testing.T, p *edwards25519.Point) (x, y *Element) {
	t.Helper()
	X, Y, Z, _ := p.ExtendedCoordinates()
	zinv := new(field.Element).Invert(Z)
	x, y = new(Element), new(Element)
	if _, err := x.SetBytes(new(field.Element).Multiply(X, zinv).Bytes()); err != nil {
		t.Fatal(err)
	}
	if _, err := y.SetBytes(new(field.Element).Multiply(Y, zinv).Bytes()); err != nil {
		t.Fatal(err)
	}
	return x, y
}

// FuzzScalarBaseMult compares ScalarBaseMult with crypto/ecdh's public key
// (X25519 NewPrivateKey(k).PublicKey().Bytes()) for any 32 bytes, on the
// dispatching routines and, on a machine with the assembly, the Go ones.
func FuzzScalarBaseMult(f *testing.F) {
	f.Add(make([]byte, 32))
	f.Add(bytes.Repeat([]byte{0xff}, 32))
	f.Add(bytes.Repeat([]byte{0x88}, 32))
	f.Fuzz(func(t *testing.T, scalar []byte) {
		if len(scalar) < 32 {
			return
		}
		scalar = scalar[:32]
		checkBaseMult(t, scalar)
		if useADX {
			useGenericStep(t, func() { checkBaseMult(t, scalar) })
		}
	})
}

// BenchmarkScalarBaseMult: this package's fixed-base multiplication, and
// the table's one-time cost.
func BenchmarkScalarBaseMult(b *testing.B) {
	var out [32]byte
	s := (*[32]byte)(bytes.Repeat([]byte{0x5a}, 32))
	b.Run("field25519", func(b *testing.B) {
		for b.Loop() {
			ScalarBaseMult(&out, s)
		}
	})
	b.Run("table", func(b *testing.B) {
		for b.Loop() {
			computeBaseTable()
		}
	})
}

// TestScalarBaseMultDudect is TestScalarMultDudect's timing test (see
// there) for ScalarBaseMult: class 0 the all-zero scalar (after clamping
// 2^254, so 63 of the 64 digits are 0 and select the identity), class 1
// random scalars. With ZTLS_DUDECT=1 it times the assembly, with
// ZTLS_DUDECT=generic the Go routines; the control of TestScalarMultDudect
// shows the harness can see a leak of 1 %.
func TestScalarBaseMultDudect(t *testing.T) {
	run := dudectRunner(t)
	basePoints() // the table is built once, outside the timed calls
	var worst float64
	run(func() {
		worst = dudect(t, "ScalarBaseMult", func(k *[32]byte) {
			var out [32]byte
			ScalarBaseMult(&out, k)
		})
	})
	if worst > 10 {
		t.Fatalf("|t| = %.1f > 10: ScalarBaseMult's time depends on the scalar", worst)
	}
}
