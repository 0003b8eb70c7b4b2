package field25519

import (
	"bytes"
	"encoding/hex"
	mathrand "math/rand/v2"
	"testing"
)

// lowOrderU are u-coordinates of Curve25519's points of order 1, 2, 4 and 8,
// and non-canonical encodings of some (p and p+1), for which X25519 gives
// all zeros; TestPublicAndSharedLowOrder checks that ScalarMult does.
var lowOrderU = []string{
	"0000000000000000000000000000000000000000000000000000000000000000",
	"0100000000000000000000000000000000000000000000000000000000000000",
	"e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
	"5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
	"ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
	"eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
}

// checkPublicAndShared compares PublicAndShared with ScalarBaseMult and
// ScalarMult, each with its own inversion, on the current path.
func checkPublicAndShared(t *testing.T, scalar, u *[32]byte) {
	t.Helper()
	var pub, shared, wantPub, wantShared [32]byte
	PublicAndShared(&pub, &shared, scalar, u)
	ScalarBaseMult(&wantPub, scalar)
	ScalarMult(&wantShared, scalar, u)
	if pub != wantPub {
		t.Fatalf("PublicAndShared(%x, %x): public key %x, ScalarBaseMult %x", scalar, u, pub, wantPub)
	}
	if shared != wantShared {
		t.Fatalf("PublicAndShared(%x, %x): shared %x, ScalarMult %x", scalar, u, shared, wantShared)
	}
}

// TestPublicAndSharedRFC7748 gives Alice's public key and the shared
// secret with Bob of RFC 7748, Section 6.1, from one call, on both paths.
func TestPublicAndSharedRFC7748(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		alice := unhex(t, "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
		bobPub := unhex(t, "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
		var pub, shared [32]byte
		PublicAndShared(&pub, &shared, alice, bobPub)
		if got, want := pub, unhex(t, "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"); got != *want {
			t.Errorf("public key %x, want %x", got, want)
		}
		if got, want := shared, unhex(t, "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"); got != *want {
			t.Errorf("shared secret %x, want %x", got, want)
		}
	})
}

// TestPublicAndSharedLowOrder: a low-order u zeroes the ladder's Z2, and
// with it the product PublicAndShared inverts unless it puts 1 in Z2's
// place. The shared secret must still be all zeros (as ScalarMult gives,
// so the caller refuses it) and the public key still right.
func TestPublicAndSharedLowOrder(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		r := mathrand.New(mathrand.NewPCG(7, 8))
		for _, h := range lowOrderU {
			u := unhex(t, h)
			for range 4 {
				var scalar [32]byte
				fillRandom(r, scalar[:])
				var zero, ladder [32]byte
				ScalarMult(&ladder, &scalar, u)
				if ladder != zero {
					t.Fatalf("ScalarMult(%x, %s) = %x: not a low-order u", scalar, h, ladder)
				}
				checkPublicAndShared(t, &scalar, u)
			}
		}
	})
}

// TestPublicAndSharedRandom runs random scalars and points on both paths.
func TestPublicAndSharedRandom(t *testing.T) {
	bothPaths(t, func(t *testing.T) {
		r := mathrand.New(mathrand.NewPCG(9, 10))
		for range 64 {
			var scalar, u [32]byte
			fillRandom(r, scalar[:])
			fillRandom(r, u[:])
			checkPublicAndShared(t, &scalar, &u)
		}
	})
}

func fillRandom(r *mathrand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

// FuzzPublicAndShared compares PublicAndShared with ScalarBaseMult and
// ScalarMult for any scalar and u, on the dispatching routines and, on a
// machine with the assembly, the Go ones.
func FuzzPublicAndShared(f *testing.F) {
	for _, h := range lowOrderU {
		seed := bytes.Repeat([]byte{0x5a}, 32)
		u, _ := hex.DecodeString(h)
		f.Add(append(seed, u...))
	}
	f.Add(bytes.Repeat([]byte{0xff}, 64))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) < 64 {
			return
		}
		scalar, u := (*[32]byte)(in[:32]), (*[32]byte)(in[32:64])
		checkPublicAndShared(t, scalar, u)
		if useADX {
			useGenericStep(t, func() { checkPublicAndShared(t, scalar, u) })
		}
	})
}
