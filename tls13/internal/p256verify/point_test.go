package p256verify

import (
	"math/bits"
	"testing"
)

// randomPoint returns a fresh key's point, affine, in Montgomery form.
func randomPoint(t *testing.T) affinePoint {
	t.Helper()
	var a affinePoint
	if !publicPoint(&a, &newKey(t).PublicKey) {
		t.Fatal("a generated key is not on the curve")
	}
	return a
}

// scaled returns a as Jacobian coordinates with Z = z (not 1).
func scaled(a *affinePoint, z element) jacobian {
	var z2, z3 element
	fieldSqr(&z2, &z)
	fieldMul(&z3, &z2, &z)
	var j jacobian
	fieldMul(&j[0], &a[0], &z2)
	fieldMul(&j[1], &a[1], &z3)
	j[2] = z
	return j
}

func affineOf(t *testing.T, j *jacobian) affinePoint {
	t.Helper()
	if isZero(&j[2]) {
		t.Fatal("the infinity where a point was expected")
	}
	var out [1]affinePoint
	toAffine(out[:], []jacobian{*j})
	return out[0]
}

// TestPointExceptions drives the additions' special cases, which random
// signatures never reach: a + a (the doubling), a + (-a) (the infinity)
// and the infinity as either input, on both paths, each against the
// doubling or the input.
func TestPointExceptions(t *testing.T) {
	forEachPath(t, func(t *testing.T) {
		for i := 0; i < 20; i++ {
			a, b := randomPoint(t), randomPoint(t)
			ja := scaled(&a, element{uint64(i) + 2, 7, 9, 11})
			ja2 := scaled(&a, element{uint64(i) + 5, 3})
			var neg affinePoint
			neg[0] = a[0]
			fSub(&neg[1], &element{}, &a[1])
			jneg := scaled(&neg, element{13, uint64(i) + 1})

			var want, got jacobian
			double(&want, &ja)
			wantA := affineOf(t, &want)
			addMixed(&got, &ja, &a)
			if affineOf(t, &got) != wantA {
				t.Fatal("a + a (mixed) is not 2a")
			}
			add(&got, &ja, &ja2)
			if affineOf(t, &got) != wantA {
				t.Fatal("a + a is not 2a")
			}
			if addMixed(&got, &ja, &neg); !isZero(&got[2]) {
				t.Fatal("a + (-a) (mixed) is not the infinity")
			}
			if add(&got, &ja, &jneg); !isZero(&got[2]) {
				t.Fatal("a + (-a) is not the infinity")
			}
			var inf jacobian
			if addMixed(&got, &inf, &a); affineOf(t, &got) != a {
				t.Fatal("infinity + a (mixed) is not a")
			}
			if add(&got, &inf, &ja); affineOf(t, &got) != a {
				t.Fatal("infinity + a is not a")
			}
			if add(&got, &ja, &inf); affineOf(t, &got) != a {
				t.Fatal("a + infinity is not a")
			}
			// The general case: mixed and full additions agree, and a + b
			// + (-b) is a again.
			jb := scaled(&b, element{17, 19})
			var sum, sum2 jacobian
			addMixed(&sum, &ja, &b)
			add(&sum2, &ja, &jb)
			if affineOf(t, &sum) != affineOf(t, &sum2) {
				t.Fatal("a + b differs between the mixed and the full addition")
			}
			negB := b
			fSub(&negB[1], &element{}, &b[1])
			addMixed(&sum, &sum, &negB)
			if affineOf(t, &sum) != a {
				t.Fatal("a + b - b is not a")
			}
		}
	})
}

// TestDoubleScalarMultEdges: with Q = G the two chains meet the same
// points, so the sum or an intermediate is the infinity or a table point:
// u*G + (n-u)*G must be the infinity and u*G + u*G must be (2u)*G.
func TestDoubleScalarMultEdges(t *testing.T) {
	gTableOnce.Do(initGTable)
	forEachPath(t, func(t *testing.T) {
		var gj [len(keyTable{})]jacobian
		oddMultiples(gj[:], &jacobian{gTable[0][0], gTable[0][1], one})
		var g keyTable
		toAffine(g[:], gj[:])
		for _, u := range []element{{1}, {2}, {3}, {0x1234, 5, 6, 7}, {n[0] - 1, n[1], n[2], n[3]}} {
			nu := n
			subPlain(&nu, &u)
			if r := doubleScalarMult(&u, &nu, &g); !isZero(&r[2]) {
				t.Fatalf("u*G + (n-u)*G for u = %x is not the infinity", u)
			}
			twice := u
			addPlainMod(&twice, &u)
			zero := element{}
			a := doubleScalarMult(&u, &u, &g)
			b := doubleScalarMult(&twice, &zero, &g)
			if affineOf(t, &a) != affineOf(t, &b) {
				t.Fatalf("u*G + u*G differs from (2u)*G for u = %x", u)
			}
		}
	})
}

// subPlain sets x -= y (x >= y), addPlainMod x = x + y mod n, for the tests.
func subPlain(x, y *element) {
	var b uint64
	for i := 0; i < 4; i++ {
		x[i], b = bits.Sub64(x[i], y[i], b)
	}
}

func addPlainMod(x, y *element) {
	var r element
	addMod(&r, x, y, &n)
	*x = r
}
