package bfe

import (
	"encoding/hex"
	"math/big"
	"testing"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// TestHashToG1RFC9380 checks the library's hash_to_curve, which H_G1 is,
// against RFC 9380's vectors for the suite H_G1 uses.
func TestHashToG1RFC9380(t *testing.T) {
	for _, c := range rfc9380G1Vectors.cases {
		p, err := bls.HashToG1([]byte(c.msg), []byte(rfc9380G1Vectors.dst))
		if err != nil {
			t.Fatal(err)
		}
		x, y := p.X.Bytes(), p.Y.Bytes()
		if hex.EncodeToString(x[:]) != c.x || hex.EncodeToString(y[:]) != c.y {
			t.Errorf("hash_to_curve(%.10q...) = (0x%x, 0x%x), want (0x%s, 0x%s)", c.msg, x, y, c.x, c.y)
		}
	}
}

func randScalar(t *testing.T) *big.Int {
	var s fr.Element
	if _, err := s.SetRandom(); err != nil {
		t.Fatal(err)
	}
	return s.BigInt(new(big.Int))
}

// TestPairingBilinear checks the properties BF-IBE decryption relies on:
// e(aP, bQ) = e(P, Q)^(ab), non-degeneracy, and in particular
// e(H^alpha, g2^r) = e(H, (g2^alpha)^r) = e(H^r, g2^alpha).
func TestPairingBilinear(t *testing.T) {
	_, _, g1, g2 := bls.Generators()
	for range 3 {
		a, b := randScalar(t), randScalar(t)
		var aP bls.G1Affine
		var bQ bls.G2Affine
		aP.ScalarMultiplication(&g1, a)
		bQ.ScalarMultiplication(&g2, b)
		lhs, err := bls.Pair([]bls.G1Affine{aP}, []bls.G2Affine{bQ})
		if err != nil {
			t.Fatal(err)
		}
		base, _ := bls.Pair([]bls.G1Affine{g1}, []bls.G2Affine{g2})
		var one bls.GT
		one.SetOne()
		if base.Equal(&one) {
			t.Fatal("e(g1, g2) = 1")
		}
		ab := new(big.Int).Mul(a, b)
		var rhs bls.GT
		rhs.Exp(base, ab)
		if !lhs.Equal(&rhs) {
			t.Fatal("e(aP, bQ) != e(P, Q)^(ab)")
		}
	}

	var digest [32]byte
	h := hashToG1(&digest, 42)
	alpha, r := randScalar(t), randScalar(t)
	var sk, hr bls.G1Affine
	var pk, c0, pkr bls.G2Affine
	sk.ScalarMultiplication(&h, alpha)
	hr.ScalarMultiplication(&h, r)
	pk.ScalarMultiplication(&g2, alpha)
	c0.ScalarMultiplication(&g2, r)
	pkr.ScalarMultiplication(&pk, r)
	dec, _ := bls.Pair([]bls.G1Affine{sk}, []bls.G2Affine{c0})
	enc, _ := bls.Pair([]bls.G1Affine{h}, []bls.G2Affine{pkr})
	alt, _ := bls.Pair([]bls.G1Affine{hr}, []bls.G2Affine{pk})
	if !dec.Equal(&enc) || !enc.Equal(&alt) {
		t.Fatal("e(H^a, g2^r), e(H, pk^r) and e(H^r, pk) differ")
	}
}

// TestFixedQMatchesPair: the fixed-argument pairing encrypt uses (lines
// of pk^r computed once, one copy per use) equals the plain pairing on every
// use, not only the first (gnark-crypto evaluates the lines in place).
func TestFixedQMatchesPair(t *testing.T) {
	_, _, g1, g2 := bls.Generators()
	var q bls.G2Affine
	q.ScalarMultiplication(&g2, randScalar(t))
	base := bls.PrecomputeLines(q)
	lines := make([][2][len(bls.LoopCounter) - 1]bls.LineEvaluationAff, 1)
	for i := range 4 {
		var p bls.G1Affine
		p.ScalarMultiplication(&g1, big.NewInt(int64(i+2)))
		want, _ := bls.Pair([]bls.G1Affine{p}, []bls.G2Affine{q})
		lines[0] = base
		ml, err := bls.MillerLoopFixedQ([]bls.G1Affine{p}, lines)
		if err != nil {
			t.Fatal(err)
		}
		if got := bls.FinalExponentiation(&ml); !got.Equal(&want) {
			t.Fatalf("use %d: fixed-argument pairing differs from Pair", i)
		}
	}
}
