package p256verify

import (
	"math/bits"
	"sync"
)

// Points in Jacobian coordinates: [X, Y, Z] stands for the affine point
// (X/Z^2, Y/Z^3); Z = 0 is the point at infinity. Field elements are in
// Montgomery form. Every routine here is variable-time: verification has
// only public inputs.
type jacobian [3]element

// affinePoint is a point with Z = 1 (never the point at infinity).
type affinePoint [2]element

// doubleGeneric sets q = 2a (a = -3: "dbl-2001-b" of the Explicit-Formulas
// Database, 3M + 5S). It may alias a. The infinity stays the infinity
// (Z3 = 2*Y*Z); P-256 has no point of order two.
func doubleGeneric(q, a *jacobian) {
	var delta, gamma, beta, alpha, t0, t1 element
	fieldSqr(&delta, &a[2])
	fieldSqr(&gamma, &a[1])
	fieldMul(&beta, &a[0], &gamma)
	fSub(&t0, &a[0], &delta)
	fAdd(&t1, &a[0], &delta)
	fieldMul(&alpha, &t0, &t1)
	fAdd(&t0, &alpha, &alpha)
	fAdd(&alpha, &t0, &alpha) // alpha = 3(X-delta)(X+delta)
	fAdd(&t1, &a[1], &a[2])
	fieldSqr(&t1, &t1)
	fSub(&t1, &t1, &gamma)
	fSub(&q[2], &t1, &delta) // Z3 = (Y+Z)^2 - gamma - delta
	fAdd(&beta, &beta, &beta)
	fAdd(&beta, &beta, &beta) // 4 beta
	fieldSqr(&t0, &alpha)
	fSub(&t0, &t0, &beta)
	fSub(&q[0], &t0, &beta) // X3 = alpha^2 - 8 beta
	fSub(&t0, &beta, &q[0])
	fieldMul(&t0, &alpha, &t0)
	fieldSqr(&gamma, &gamma)
	fAdd(&gamma, &gamma, &gamma)
	fAdd(&gamma, &gamma, &gamma)
	fAdd(&gamma, &gamma, &gamma) // 8 gamma^2
	fSub(&q[1], &t0, &gamma)
}

// addMixedGeneric sets q = a + b for an affine b ("madd-2007-bl", 7M + 4S),
// handling the infinity and a = ±b. It may alias a.
func addMixedGeneric(q, a *jacobian, b *affinePoint) {
	if isZero(&a[2]) {
		q[0], q[1], q[2] = b[0], b[1], one
		return
	}
	var z1z1, u2, s2, h, hh, i, j, r, v element
	fieldSqr(&z1z1, &a[2])
	fieldMul(&u2, &b[0], &z1z1)
	fieldMul(&s2, &b[1], &a[2])
	fieldMul(&s2, &s2, &z1z1)
	fSub(&h, &u2, &a[0])
	fSub(&r, &s2, &a[1])
	if sameX(q, a, &h, &r) {
		return
	}
	fAdd(&r, &r, &r)
	fieldSqr(&hh, &h)
	fAdd(&i, &hh, &hh)
	fAdd(&i, &i, &i)
	fieldMul(&j, &h, &i)
	fieldMul(&v, &a[0], &i)
	var x3, t element
	fieldSqr(&x3, &r)
	fSub(&x3, &x3, &j)
	fSub(&x3, &x3, &v)
	fSub(&x3, &x3, &v)
	fAdd(&t, &a[2], &h)
	fieldSqr(&t, &t)
	fSub(&t, &t, &z1z1)
	fSub(&q[2], &t, &hh)
	fSub(&t, &v, &x3)
	fieldMul(&t, &r, &t)
	fieldMul(&j, &a[1], &j)
	fAdd(&j, &j, &j)
	fSub(&q[1], &t, &j)
	q[0] = x3
}

// addGeneric sets q = a + b ("add-2007-bl", 11M + 5S), handling the infinity and
// a = ±b. It may alias a.
func addGeneric(q, a, b *jacobian) {
	if isZero(&a[2]) {
		*q = *b
		return
	}
	if isZero(&b[2]) {
		*q = *a
		return
	}
	var z1z1, z2z2, u1, u2, s1, s2, h, i, j, r, v element
	fieldSqr(&z1z1, &a[2])
	fieldSqr(&z2z2, &b[2])
	fieldMul(&u1, &a[0], &z2z2)
	fieldMul(&u2, &b[0], &z1z1)
	fieldMul(&s1, &a[1], &b[2])
	fieldMul(&s1, &s1, &z2z2)
	fieldMul(&s2, &b[1], &a[2])
	fieldMul(&s2, &s2, &z1z1)
	fSub(&h, &u2, &u1)
	fSub(&r, &s2, &s1)
	if sameX(q, a, &h, &r) {
		return
	}
	fAdd(&r, &r, &r)
	fAdd(&i, &h, &h)
	fieldSqr(&i, &i)
	fieldMul(&j, &h, &i)
	fieldMul(&v, &u1, &i)
	var x3, t element
	fieldSqr(&x3, &r)
	fSub(&x3, &x3, &j)
	fSub(&x3, &x3, &v)
	fSub(&x3, &x3, &v)
	fAdd(&t, &a[2], &b[2])
	fieldSqr(&t, &t)
	fSub(&t, &t, &z1z1)
	fSub(&t, &t, &z2z2)
	fieldMul(&q[2], &t, &h)
	fSub(&t, &v, &x3)
	fieldMul(&t, &r, &t)
	fieldMul(&j, &s1, &j)
	fAdd(&j, &j, &j)
	fSub(&q[1], &t, &j)
	q[0] = x3
}

// Window widths of the width-w NAFs: the base point's odd multiples up to
// (2^(w-1)-1)G are a table made once, the key's are made per verification,
// both affine (one inversion for the key's eight: the additions are then
// mixed, 7M + 4S instead of 11M + 5S, which over some 43 additions pays for
// the inversion twice).
const (
	wG = 8
	wQ = 5
)

var (
	gTableOnce sync.Once
	gTable     [1 << (wG - 2)]affinePoint
)

// The base point G (SP 800-186, Section 3.2.1.3), big-endian.
var (
	gxBytes = [32]byte{0x6b, 0x17, 0xd1, 0xf2, 0xe1, 0x2c, 0x42, 0x47, 0xf8, 0xbc, 0xe6, 0xe5, 0x63, 0xa4, 0x40, 0xf2, 0x77, 0x03, 0x7d, 0x81, 0x2d, 0xeb, 0x33, 0xa0, 0xf4, 0xa1, 0x39, 0x45, 0xd8, 0x98, 0xc2, 0x96}
	gyBytes = [32]byte{0x4f, 0xe3, 0x42, 0xe2, 0xfe, 0x1a, 0x7f, 0x9b, 0x8e, 0xe7, 0xeb, 0x4a, 0x7c, 0x0f, 0x9e, 0x16, 0x2b, 0xce, 0x33, 0x57, 0x6b, 0x31, 0x5e, 0xce, 0xcb, 0xb6, 0x40, 0x68, 0x37, 0xbf, 0x51, 0xf5}
)

// initGTable fills gTable with G, 3G, 5G, ..., made affine.
func initGTable() {
	var g affinePoint
	setBytes(&g[0], gxBytes[:], &p)
	setBytes(&g[1], gyBytes[:], &p)
	fieldMul(&g[0], &g[0], &rrP)
	fieldMul(&g[1], &g[1], &rrP)
	var jt [len(gTable)]jacobian
	oddMultiples(jt[:], &jacobian{g[0], g[1], one})
	toAffine(gTable[:], jt[:])
}

// toAffine sets out[i] to in[i] made affine (none may be the infinity),
// with one inversion for all (Montgomery's trick: invert the product of
// the Z's, then peel each Z^-1 off it).
func toAffine(out []affinePoint, in []jacobian) {
	var buf [len(gTable)]element
	prefix := buf[:len(in)]
	zProducts(prefix, in)
	var inv element
	fieldInvert(&inv, &prefix[len(in)-1])
	fromProducts(out, in, prefix, &inv)
}

// zProducts sets prefix[i] = Z_0 * ... * Z_i.
func zProducts(prefix []element, in []jacobian) {
	prefix[0] = in[0][2]
	for i := 1; i < len(in); i++ {
		fieldMul(&prefix[i], &prefix[i-1], &in[i][2])
	}
}

// fromProducts finishes toAffine given inv, the inverse of the last prefix.
func fromProducts(out []affinePoint, in []jacobian, prefix []element, inv *element) {
	acc := *inv
	for i := len(in) - 1; i >= 0; i-- {
		zi := acc // Z_i^-1 = (Z_0...Z_i)^-1 * (Z_0...Z_(i-1))
		if i > 0 {
			fieldMul(&zi, &acc, &prefix[i-1])
			fieldMul(&acc, &acc, &in[i][2])
		}
		var zi2 element
		fieldSqr(&zi2, &zi)
		fieldMul(&out[i][0], &in[i][0], &zi2)
		fieldMul(&zi2, &zi2, &zi)
		fieldMul(&out[i][1], &in[i][1], &zi2)
	}
}

// sameX finishes an addition to a whose inputs have the same x (h = 0): q
// is 2a when they are equal (r = 0) and the infinity when they are
// opposite. It reports whether h was 0, i.e. whether it set q.
func sameX(q, a *jacobian, h, r *element) bool {
	if !isZero(h) {
		return false
	}
	if isZero(r) {
		double(q, a)
	} else {
		*q = jacobian{}
	}
	return true
}

// oddMultiples sets t[i] = (2i+1)a.
func oddMultiples(t []jacobian, a *jacobian) {
	var twice jacobian
	double(&twice, a)
	t[0] = *a
	for i := 1; i < len(t); i++ {
		add(&t[i], &t[i-1], &twice)
	}
}

// wnaf returns the width-w non-adjacent form of k (k < 2^256): digits
// least significant first, each 0 or odd with |d| < 2^(w-1), at most one
// non-zero in any w consecutive ones. Runs of zero digits are skipped a
// word's trailing zeros at a time: after a digit d is taken off, the next
// w-1 digits are zero by construction (k - d = 0 mod 2^w), so the loop
// runs once per non-zero digit, not once per bit (k is public).
func wnaf(k *element, w uint) (digits [257]int8) {
	x := [5]uint64{k[0], k[1], k[2], k[3]}
	mask := uint64(1)<<w - 1
	for i := 0; ; {
		for x[0] == 0 { // a whole zero word
			if x == [5]uint64{} {
				return digits
			}
			x = [5]uint64{x[1], x[2], x[3], x[4]}
			i += 64
		}
		tz := bits.TrailingZeros64(x[0])
		shr5(&x, uint(tz))
		i += tz
		d := int64(x[0] & mask)
		if d >= 1<<(w-1) {
			d -= 1 << w
		}
		digits[i] = int8(d)
		subSmall(&x, d)
		shr5(&x, w)
		i += int(w)
	}
}

// shr5 shifts x right by s bits, 0 <= s < 64.
func shr5(x *[5]uint64, s uint) {
	if s == 0 {
		return
	}
	x[0] = x[0]>>s | x[1]<<(64-s)
	x[1] = x[1]>>s | x[2]<<(64-s)
	x[2] = x[2]>>s | x[3]<<(64-s)
	x[3] = x[3]>>s | x[4]<<(64-s)
	x[4] >>= s
}

// subSmall sets x -= d for a small d of either sign (x >= d).
func subSmall(x *[5]uint64, d int64) {
	if d > 0 {
		var b uint64
		x[0], b = bits.Sub64(x[0], uint64(d), 0)
		for i := 1; i < 5 && b != 0; i++ {
			x[i], b = bits.Sub64(x[i], 0, b)
		}
		return
	}
	var c uint64
	x[0], c = bits.Add64(x[0], uint64(-d), 0)
	for i := 1; i < 5 && c != 0; i++ {
		x[i], c = bits.Add64(x[i], 0, c)
	}
}

// keyTable is the key's odd multiples Q, 3Q, ..., 15Q, affine.
type keyTable [1 << (wQ - 2)]affinePoint

// doubleScalarMult returns u1*G + u2*Q for Q's table qt (interleaved
// width-w NAFs, one chain of doublings shared by both scalars).
func doubleScalarMult(u1, u2 *element, qt *keyTable) jacobian {
	gTableOnce.Do(initGTable)
	d1, d2 := wnaf(u1, wG), wnaf(u2, wQ)
	top := len(d1) - 1
	for top >= 0 && d1[top] == 0 && d2[top] == 0 {
		top--
	}
	var acc jacobian
	for i := top; i >= 0; i-- {
		if !isZero(&acc[2]) {
			double(&acc, &acc)
		}
		if d := d1[i]; d > 0 {
			addMixed(&acc, &acc, &gTable[d>>1])
		} else if d < 0 {
			neg := gTable[(-d)>>1]
			fSub(&neg[1], &element{}, &neg[1])
			addMixed(&acc, &acc, &neg)
		}
		if d := d2[i]; d > 0 {
			addMixed(&acc, &acc, &qt[d>>1])
		} else if d < 0 {
			neg := qt[(-d)>>1]
			fSub(&neg[1], &element{}, &neg[1])
			addMixed(&acc, &acc, &neg)
		}
	}
	return acc
}
