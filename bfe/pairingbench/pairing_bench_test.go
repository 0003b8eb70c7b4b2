// Package pairingbench measures the two BLS12-381 libraries that bfe could
// use, side by side in one run, on the operations the BFE KEM spends its time
// in. It is a module of its own so that the library bfe did not choose never
// enters the main module's go.mod:
//
//	cd bfe/pairingbench && go test -run '^$' -bench . -benchtime 2s
//
// The figures and the choice are in bfe/doc.go.
package pairingbench

import (
	"crypto/rand"
	"math/big"
	"testing"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// dst is the RFC 9380 suite both libraries implement for G1.
var dst = []byte("QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_")

func gnarkScalar(b *testing.B) *big.Int {
	var s fr.Element
	if _, err := s.SetRandom(); err != nil {
		b.Fatal(err)
	}
	return s.BigInt(new(big.Int))
}

func circlScalar(b *testing.B) *circl.Scalar {
	s := new(circl.Scalar)
	if err := s.Random(rand.Reader); err != nil {
		b.Fatal(err)
	}
	return s
}

func gnarkPoints(b *testing.B) (gnark.G1Affine, gnark.G2Affine) {
	_, _, g1, g2 := gnark.Generators()
	var p gnark.G1Affine
	var q gnark.G2Affine
	p.ScalarMultiplication(&g1, gnarkScalar(b))
	q.ScalarMultiplication(&g2, gnarkScalar(b))
	return p, q
}

func circlPoints(b *testing.B) (*circl.G1, *circl.G2) {
	p, q := new(circl.G1), new(circl.G2)
	p.ScalarMult(circlScalar(b), circl.G1Generator())
	q.ScalarMult(circlScalar(b), circl.G2Generator())
	return p, q
}

func BenchmarkPair(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		p, q := gnarkPoints(b)
		P, Q := []gnark.G1Affine{p}, []gnark.G2Affine{q}
		for b.Loop() {
			if _, err := gnark.Pair(P, Q); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("circl", func(b *testing.B) {
		p, q := circlPoints(b)
		for b.Loop() {
			circl.Pair(p, q)
		}
	})
}

// BenchmarkPairFixedQ is a pairing whose G2 argument was known in advance, so
// its Miller-loop lines were computed once (gnark PrecomputeLines). gnark
// evaluates the lines in place, so each pairing works on a copy, as bfe does;
// the copy is timed. circl has no such entry point; its row is the plain
// pairing again, for the table.
func BenchmarkPairFixedQ(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		p, q := gnarkPoints(b)
		base := gnark.PrecomputeLines(q)
		lines := make([][2][len(gnark.LoopCounter) - 1]gnark.LineEvaluationAff, 1)
		P := []gnark.G1Affine{p}
		for b.Loop() {
			lines[0] = base
			if _, err := gnark.PairFixedQ(P, lines); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("circl-none", func(b *testing.B) {
		p, q := circlPoints(b)
		for b.Loop() {
			circl.Pair(p, q)
		}
	})
}

// BenchmarkMillerLoop and BenchmarkFinalExp split gnark's pairing in its two
// halves (circl does not export them).
func BenchmarkMillerLoop(b *testing.B) {
	p, q := gnarkPoints(b)
	P, Q := []gnark.G1Affine{p}, []gnark.G2Affine{q}
	for b.Loop() {
		if _, err := gnark.MillerLoop(P, Q); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFinalExp(b *testing.B) {
	p, q := gnarkPoints(b)
	f, _ := gnark.MillerLoop([]gnark.G1Affine{p}, []gnark.G2Affine{q})
	for b.Loop() {
		gnark.FinalExponentiation(&f)
	}
}

func BenchmarkPrecomputeLines(b *testing.B) {
	_, q := gnarkPoints(b)
	for b.Loop() {
		gnark.PrecomputeLines(q)
	}
}

func BenchmarkHashToG1(b *testing.B) {
	msg := []byte("ztls bfe position 12345")
	b.Run("gnark", func(b *testing.B) {
		for b.Loop() {
			if _, err := gnark.HashToG1(msg, dst); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("circl", func(b *testing.B) {
		var p circl.G1
		for b.Loop() {
			p.Hash(msg, dst)
		}
	})
}

func BenchmarkG1ScalarMult(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		p, _ := gnarkPoints(b)
		s := gnarkScalar(b)
		var r gnark.G1Affine
		for b.Loop() {
			r.ScalarMultiplication(&p, s)
		}
	})
	b.Run("circl", func(b *testing.B) {
		p, _ := circlPoints(b)
		s := circlScalar(b)
		var r circl.G1
		for b.Loop() {
			r.ScalarMult(s, p)
		}
	})
}

func BenchmarkG2ScalarMult(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		_, q := gnarkPoints(b)
		s := gnarkScalar(b)
		var r gnark.G2Affine
		for b.Loop() {
			r.ScalarMultiplication(&q, s)
		}
	})
	b.Run("circl", func(b *testing.B) {
		_, q := circlPoints(b)
		s := circlScalar(b)
		var r circl.G2
		for b.Loop() {
			r.ScalarMult(s, q)
		}
	})
}

// BenchmarkG1Decompress is what reading one 48-byte secret-key slot costs.
func BenchmarkG1Decompress(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		p, _ := gnarkPoints(b)
		buf := p.Bytes()
		var r gnark.G1Affine
		for b.Loop() {
			if _, err := r.SetBytes(buf[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("circl", func(b *testing.B) {
		p, _ := circlPoints(b)
		buf := p.BytesCompressed()
		var r circl.G1
		for b.Loop() {
			if err := r.SetBytes(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkG2Decompress is what parsing a ciphertext's G2 element costs.
func BenchmarkG2Decompress(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		_, q := gnarkPoints(b)
		buf := q.Bytes()
		var r gnark.G2Affine
		for b.Loop() {
			if _, err := r.SetBytes(buf[:]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("circl", func(b *testing.B) {
		_, q := circlPoints(b)
		buf := q.BytesCompressed()
		var r circl.G2
		for b.Loop() {
			if err := r.SetBytes(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
