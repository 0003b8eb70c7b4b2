package p256verify

import (
	"math/big"
	"testing"
)

// FuzzPointFormulas holds the assembly's doubling and additions to the
// Go code's exact Jacobian coordinates (not just the same affine point) for
// any field elements as coordinates, on the curve or not: the formulas are
// polynomials, so rewriting one (2YZ for (Y+Z)^2 - Y^2 - Z^2, a multiple
// doubled in registers) must not change a single limb. Without the
// assembly both sides are the Go code.
func FuzzPointFormulas(f *testing.F) {
	e := fieldEdges()
	for i, x := range e {
		f.Add(x, e[(i+1)%len(e)], e[(i+2)%len(e)], e[(i*3+1)%len(e)], e[(i*5+2)%len(e)])
	}
	f.Fuzz(func(t *testing.T, xb, yb, zb, bx, by []byte) {
		var a jacobian
		var b affinePoint
		for i, in := range [][]byte{xb, yb, zb, bx, by} {
			v := toElement(new(big.Int).Mod(new(big.Int).SetBytes(in), new(big.Int).SetBytes(beBytes(&p))))
			if i < 3 {
				a[i] = v
			} else {
				b[i-3] = v
			}
		}
		var got, want jacobian
		double(&got, &a)
		withGoPath(func() { double(&want, &a) })
		if got != want {
			t.Fatalf("double(%x) = %x, the Go code gives %x", a, got, want)
		}
		addMixed(&got, &a, &b)
		withGoPath(func() { addMixed(&want, &a, &b) })
		if got != want {
			t.Fatalf("addMixed(%x, %x) = %x, the Go code gives %x", a, b, got, want)
		}
		bj := jacobian{b[0], b[1], a[0]}
		add(&got, &a, &bj)
		withGoPath(func() { add(&want, &a, &bj) })
		if got != want {
			t.Fatalf("add(%x, %x) = %x, the Go code gives %x", a, bj, got, want)
		}
		got = a // the output may alias the input
		double(&got, &got)
		withGoPath(func() { double(&want, &a) })
		if got != want {
			t.Fatalf("double in place (%x) = %x, the Go code gives %x", a, got, want)
		}
	})
}
