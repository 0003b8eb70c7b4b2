package p256sign

import (
	"encoding/binary"
	"math/big"
	"testing"
)

func scalarToBig(x *scalar) *big.Int {
	b := x.bytes()
	return new(big.Int).SetBytes(b[:])
}

func TestConstants(t *testing.T) {
	if got := scalarToBig(&n); got.Cmp(orderBig) != 0 {
		t.Fatalf("n = %x, want P-256's order %x", got, orderBig)
	}
	R := new(big.Int).Lsh(big.NewInt(1), 256)
	wantRR := new(big.Int).Mod(new(big.Int).Mul(R, R), orderBig)
	if got := scalarToBig(&rr); got.Cmp(wantRR) != 0 {
		t.Fatalf("rr = %x, want R^2 mod n = %x", got, wantRR)
	}
	two64 := new(big.Int).Lsh(big.NewInt(1), 64)
	inv := new(big.Int).ModInverse(new(big.Int).Mod(orderBig, two64), two64)
	want := new(big.Int).Sub(two64, inv)
	if want.Uint64() != n0inv {
		t.Fatalf("n0inv = %#x, want -n^-1 mod 2^64 = %#x", uint64(n0inv), want.Uint64())
	}
}

// scalarFrom makes a scalar of 32 fuzz bytes, reduced mod n when reduce.
func scalarFrom(b []byte, reduce bool) scalar {
	var a [32]byte
	copy(a[:], b)
	var s scalar
	s.setBytes(&a)
	if reduce {
		s.reduceOnce(&s)
	}
	return s
}

// checkScalarOps compares every scalar routine with math/big on x, y.
func checkScalarOps(t *testing.T, xb, yb []byte) {
	raw := scalarFrom(xb, false)
	x, y := scalarFrom(xb, true), scalarFrom(yb, true)
	X, Y := scalarToBig(&x), scalarToBig(&y)
	mod := func(v *big.Int) *big.Int { return v.Mod(v, orderBig) }
	if want := mod(scalarToBig(&raw)); X.Cmp(want) != 0 {
		t.Fatalf("reduceOnce(%x) = %x, want %x", scalarToBig(&raw), X, want)
	}
	var z scalar
	z.add(&x, &y)
	if want := mod(new(big.Int).Add(X, Y)); scalarToBig(&z).Cmp(want) != 0 {
		t.Fatalf("add(%x, %x) = %x, want %x", X, Y, scalarToBig(&z), want)
	}
	z.mul(&x, &y)
	if want := mod(new(big.Int).Mul(X, Y)); scalarToBig(&z).Cmp(want) != 0 {
		t.Fatalf("mul(%x, %x) = %x, want %x", X, Y, scalarToBig(&z), want)
	}
	z.montMul(&x, &y)
	Rinv := new(big.Int).ModInverse(new(big.Int).Lsh(big.NewInt(1), 256), orderBig)
	if want := mod(new(big.Int).Mul(new(big.Int).Mul(X, Y), Rinv)); scalarToBig(&z).Cmp(want) != 0 {
		t.Fatalf("montMul(%x, %x) = %x, want %x", X, Y, scalarToBig(&z), want)
	}
	if got, want := lessThanN(&raw) == 1, scalarToBig(&raw).Cmp(orderBig) < 0; got != want {
		t.Fatalf("lessThanN(%x) = %v", scalarToBig(&raw), got)
	}
	if got, want := isZero(&x) == 1, X.Sign() == 0; got != want {
		t.Fatalf("isZero(%x) = %v", X, got)
	}
	if X.Sign() == 0 {
		return
	}
	want := new(big.Int).ModInverse(X, orderBig)
	z.invertFermat(&x)
	if scalarToBig(&z).Cmp(want) != 0 {
		t.Fatalf("invertFermat(%x) = %x, want %x", X, scalarToBig(&z), want)
	}
	z.invertSafegcd(&x)
	if scalarToBig(&z).Cmp(want) != 0 {
		t.Fatalf("invertSafegcd(%x) = %x, want %x", X, scalarToBig(&z), want)
	}
	z.invertBlinded(&x, &y) // y = 0 takes the Fermat path
	if scalarToBig(&z).Cmp(want) != 0 {
		t.Fatalf("invertBlinded(%x, blind %x) = %x, want %x", X, Y, scalarToBig(&z), want)
	}
}

// FuzzScalarOps checks the arithmetic modulo n against math/big on any two
// 256-bit inputs (reduced first where the routine requires it).
func FuzzScalarOps(f *testing.F) {
	nb := n.bytes()
	nm1 := n
	nm1[0]--
	nm1b := nm1.bytes()
	ones := make([]byte, 32)
	for i := range ones {
		ones[i] = 0xff
	}
	f.Add(make([]byte, 32), make([]byte, 32))
	f.Add(nb[:], nm1b[:])
	f.Add(nm1b[:], nm1b[:])
	f.Add(ones, ones)
	one := make([]byte, 32)
	one[31] = 1
	f.Add(one, ones)
	f.Fuzz(func(t *testing.T, xb, yb []byte) {
		if len(xb) != 32 || len(yb) != 32 {
			return
		}
		checkScalarOps(t, xb, yb)
	})
}

// TestScalarOpsEdges runs the fuzz target's check on values next to n and
// 2^256 and on a sweep of limb patterns, so the default run covers the carry
// paths without fuzzing.
func TestScalarOpsEdges(t *testing.T) {
	var vals [][]byte
	for _, base := range []scalar{n, {}, {^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}} {
		for _, delta := range []uint64{0, 1, 2, 3} {
			v := base
			v[0] -= delta
			b := v.bytes()
			vals = append(vals, b[:])
		}
	}
	for i := range 64 {
		var b [32]byte
		binary.BigEndian.PutUint64(b[(i%4)*8:], ^uint64(0)>>(i%64))
		binary.BigEndian.PutUint64(b[((i+1)%4)*8:], uint64(i)*0x9e3779b97f4a7c15)
		vals = append(vals, b[:])
	}
	for _, x := range vals {
		for _, y := range vals {
			checkScalarOps(t, x, y)
		}
	}
}
