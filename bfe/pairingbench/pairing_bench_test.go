// Package pairingbench measures the two BLS12-381 libraries that bfe could
// use, side by side in one run, on the operations the BFE KEM spends its time
// in. It is a module of its own so that the library bfe did not choose never
// enters the main module's go.mod:
//
//	cd bfe/pairingbench && go test -run '^$' -bench . -cpu 1 -count 3
//
// Each benchmark reports, next to the wall-clock ns/op, cpu-ms/op: the CPU
// time of the benchmark's (locked) OS thread per operation, which on a
// machine shared with other work is the cost of the operation itself
// (Linux RUSAGE_THREAD). The figures and the choice are in bfe/doc.go.
package pairingbench

import (
	"crypto/rand"
	"math/big"
	"runtime"
	"syscall"
	"testing"
	"time"

	circl "github.com/cloudflare/circl/ecc/bls12381"
	gnark "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// dst is the RFC 9380 suite both libraries implement for G1.
var dst = []byte("QUUX-V01-CS02-with-BLS12381G1_XMD:SHA-256_SSWU_RO_")

// loop runs f b.N times on one locked OS thread and reports its CPU time.
func loop(b *testing.B, f func() error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	t0, ok := threadCPU()
	for b.Loop() {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	if t1, _ := threadCPU(); ok {
		b.ReportMetric(float64((t1-t0).Nanoseconds())/1e6/float64(b.N), "cpu-ms/op")
	}
}

func threadCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	const rusageThread = 1
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

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
		loop(b, func() error { _, err := gnark.Pair(P, Q); return err })
	})
	b.Run("circl", func(b *testing.B) {
		p, q := circlPoints(b)
		loop(b, func() error { circl.Pair(p, q); return nil })
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
		loop(b, func() error {
			lines[0] = base
			_, err := gnark.PairFixedQ(P, lines)
			return err
		})
	})
	b.Run("circl-none", func(b *testing.B) {
		p, q := circlPoints(b)
		loop(b, func() error { circl.Pair(p, q); return nil })
	})
}

// BenchmarkMillerLoop, BenchmarkFinalExp and BenchmarkPrecomputeLines split
// gnark's pairing in its parts (circl does not export them).
func BenchmarkMillerLoop(b *testing.B) {
	p, q := gnarkPoints(b)
	P, Q := []gnark.G1Affine{p}, []gnark.G2Affine{q}
	loop(b, func() error { _, err := gnark.MillerLoop(P, Q); return err })
}

func BenchmarkFinalExp(b *testing.B) {
	p, q := gnarkPoints(b)
	f, _ := gnark.MillerLoop([]gnark.G1Affine{p}, []gnark.G2Affine{q})
	loop(b, func() error { gnark.FinalExponentiation(&f); return nil })
}

func BenchmarkPrecomputeLines(b *testing.B) {
	_, q := gnarkPoints(b)
	loop(b, func() error { gnark.PrecomputeLines(q); return nil })
}

func BenchmarkHashToG1(b *testing.B) {
	msg := []byte("ztls bfe position 12345")
	b.Run("gnark", func(b *testing.B) {
		loop(b, func() error { _, err := gnark.HashToG1(msg, dst); return err })
	})
	b.Run("circl", func(b *testing.B) {
		var p circl.G1
		loop(b, func() error { p.Hash(msg, dst); return nil })
	})
}

func BenchmarkG1ScalarMult(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		p, _ := gnarkPoints(b)
		s := gnarkScalar(b)
		var r gnark.G1Affine
		loop(b, func() error { r.ScalarMultiplication(&p, s); return nil })
	})
	b.Run("circl", func(b *testing.B) {
		p, _ := circlPoints(b)
		s := circlScalar(b)
		var r circl.G1
		loop(b, func() error { r.ScalarMult(s, p); return nil })
	})
}

func BenchmarkG2ScalarMult(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		_, q := gnarkPoints(b)
		s := gnarkScalar(b)
		var r gnark.G2Affine
		loop(b, func() error { r.ScalarMultiplication(&q, s); return nil })
	})
	b.Run("circl", func(b *testing.B) {
		_, q := circlPoints(b)
		s := circlScalar(b)
		var r circl.G2
		loop(b, func() error { r.ScalarMult(s, q); return nil })
	})
}

// BenchmarkG1Decompress is what reading one 48-byte secret-key slot costs
// (with the subgroup check).
func BenchmarkG1Decompress(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		p, _ := gnarkPoints(b)
		buf := p.Bytes()
		var r gnark.G1Affine
		loop(b, func() error { _, err := r.SetBytes(buf[:]); return err })
	})
	b.Run("circl", func(b *testing.B) {
		p, _ := circlPoints(b)
		buf := p.BytesCompressed()
		var r circl.G1
		loop(b, func() error { return r.SetBytes(buf) })
	})
}

// BenchmarkG2Decompress is what parsing a ciphertext's G2 element costs
// (with the subgroup check).
func BenchmarkG2Decompress(b *testing.B) {
	b.Run("gnark", func(b *testing.B) {
		_, q := gnarkPoints(b)
		buf := q.Bytes()
		var r gnark.G2Affine
		loop(b, func() error { _, err := r.SetBytes(buf[:]); return err })
	})
	b.Run("circl", func(b *testing.B) {
		_, q := circlPoints(b)
		buf := q.BytesCompressed()
		var r circl.G2
		loop(b, func() error { return r.SetBytes(buf) })
	})
}
