package p256verify

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	mathrand "math/rand/v2"
	"testing"
)

// BenchmarkInvertPairVaried times Verify's two inversions on 4096
// different pairs in turn (what a client's handshakes feed them), against
// BenchmarkVerify/invert-pair's one pair, whose GCD path the branch
// predictor learns.
func BenchmarkInvertPairVaried(b *testing.B) {
	r := mathrand.New(mathrand.NewPCG(1, 2))
	ins := make([][2]element, 4096)
	for i := range ins {
		for j := range 4 {
			ins[i][0][j], ins[i][1][j] = r.Uint64(), r.Uint64()
		}
		ins[i][0][3] >>= 1 // below n and p
		ins[i][1][3] >>= 1
	}
	var w, zi element
	i := 0
	for b.Loop() {
		invertPair(&w, &ins[i][0], &zi, &ins[i][1])
		i = (i + 1) % len(ins)
	}
}

// BenchmarkVerifyVaried verifies 256 different signatures by one key in
// turn, crypto/ecdsa and Verify, as a client meets them in handshakes:
// BenchmarkVerify's one signature lets the branch predictor learn the
// variable-time paths (the GCD, the NAF digits), these do not.
func BenchmarkVerifyVaried(b *testing.B) {
	k := newKey(b)
	type in struct{ d, sig []byte }
	ins := make([]in, 256)
	for i := range ins {
		d := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
		if err != nil {
			b.Fatal(err)
		}
		ins[i] = in{d[:], sig}
	}
	run := func(b *testing.B, verify func(d, sig []byte) bool) {
		i := 0
		for b.Loop() {
			if !verify(ins[i].d, ins[i].sig) {
				b.Fatal("refused")
			}
			i = (i + 1) % len(ins)
		}
	}
	b.Run("crypto-ecdsa", func(b *testing.B) {
		run(b, func(d, sig []byte) bool { return ecdsa.VerifyASN1(&k.PublicKey, d, sig) })
	})
	b.Run("p256verify", func(b *testing.B) {
		run(b, func(d, sig []byte) bool { return Verify(&k.PublicKey, d, sig) })
	})
}
