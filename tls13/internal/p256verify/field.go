package p256verify

import (
	"encoding/binary"
	"math/bits"
)

// An element of GF(p) or of the scalars mod n: four 64-bit limbs, least
// significant first, always fully reduced (below its modulus), in Montgomery
// form (a stands for a*2^-256) wherever arithmetic touches it.
type element = [4]uint64

// p = 2^256 - 2^224 + 2^192 + 2^96 - 1, the field of P-256 (FIPS 186-5,
// SP 800-186, Section 3.2.1.3). Its lowest limb is 2^64-1, so -p^-1 mod
// 2^64 is 1 and a Montgomery reduction step multiplies by the limb itself.
var p = element{0xffffffffffffffff, 0x00000000ffffffff, 0, 0xffffffff00000001}

// n, the order of the base point, and -n^-1 mod 2^64 (computed in init).
var (
	n     = element{0xf3b9cac2fc632551, 0xbce6faada7179e84, 0xffffffffffffffff, 0xffffffff00000000}
	nInv0 uint64
)

// rr mod p and mod n: 2^512 reduced, which montMul turns a plain value into
// its Montgomery form with; rrrP is 2^768 mod p (invertPair).
var rrP, rrN, rrrP element

func init() {
	inv := n[0] // Newton's iteration for n[0]^-1 mod 2^64: 3, 6, ..., 96 bits.
	for i := 0; i < 5; i++ {
		inv *= 2 - n[0]*inv
	}
	nInv0 = -inv
	rrP, rrN = twoTo512(&p), twoTo512(&n)
	montMul(&rrrP, &rrP, &rrP, &p, 1)
	montMul(&one, &element{1}, &rrP, &p, 1)
	montMul(&montOneN, &element{1}, &rrN, &n, nInv0)
	montMul(&three, &element{3}, &rrP, &p, 1)
	var b element
	setBytes(&b, curveBBytes[:], &p)
	montMul(&curveB, &b, &rrP, &p, 1)
}

// three and the curve's coefficient b in Montgomery form.
var three, curveB element

// b of y^2 = x^3 - 3x + b (SP 800-186, Section 3.2.1.3), big-endian.
var curveBBytes = [32]byte{0x5a, 0xc6, 0x35, 0xd8, 0xaa, 0x3a, 0x93, 0xe7, 0xb3, 0xeb, 0xbd, 0x55, 0x76, 0x98, 0x86, 0xbc, 0x65, 0x1d, 0x06, 0xb0, 0xcc, 0x53, 0xb0, 0xf6, 0x3b, 0xce, 0x3c, 0x3e, 0x27, 0xd2, 0x60, 0x4b}

// one is 1 mod p and montOneN 1 mod n, both in Montgomery form (2^256 mod m).
var one, montOneN element

// twoTo512 returns 2^512 mod m by 512 doublings of 1 (init only).
func twoTo512(m *element) element {
	x := element{1}
	for i := 0; i < 512; i++ {
		addMod(&x, &x, &x, m)
	}
	return x
}

// madd returns t + a*b + c as (hi, lo); it cannot overflow 128 bits.
func madd(t, a, b, c uint64) (hi, lo uint64) {
	hi, lo = bits.Mul64(a, b)
	var cc uint64
	lo, cc = bits.Add64(lo, t, 0)
	hi += cc
	lo, cc = bits.Add64(lo, c, 0)
	hi += cc
	return hi, lo
}

// montMul sets z = x*y*2^-256 mod m for x, y < m (word-by-word Montgomery
// multiplication, the operand scanning form): m0 is -m^-1 mod 2^64. The
// running value stays below 2m, so one subtraction ends it.
func montMul(z, x, y, m *element, m0 uint64) {
	var t0, t1, t2, t3, t4 uint64
	for i := 0; i < 4; i++ {
		var c, t5 uint64
		yi := y[i]
		c, t0 = madd(t0, x[0], yi, 0)
		c, t1 = madd(t1, x[1], yi, c)
		c, t2 = madd(t2, x[2], yi, c)
		c, t3 = madd(t3, x[3], yi, c)
		t4, t5 = bits.Add64(t4, c, 0)
		q := t0 * m0
		c, _ = madd(t0, q, m[0], 0)
		c, t0 = madd(t1, q, m[1], c)
		c, t1 = madd(t2, q, m[2], c)
		c, t2 = madd(t3, q, m[3], c)
		t3, c = bits.Add64(t4, c, 0)
		t4 = t5 + c
	}
	reduceOnce(z, &element{t0, t1, t2, t3}, t4, m)
}

// reduceOnce sets z = t + top*2^256 - m if that is not negative, else t;
// the caller knows t + top*2^256 < 2m.
func reduceOnce(z, t *element, top uint64, m *element) {
	var d element
	var b uint64
	d[0], b = bits.Sub64(t[0], m[0], 0)
	d[1], b = bits.Sub64(t[1], m[1], b)
	d[2], b = bits.Sub64(t[2], m[2], b)
	d[3], b = bits.Sub64(t[3], m[3], b)
	_, b = bits.Sub64(top, 0, b)
	if b == 0 {
		*z = d
	} else {
		*z = *t
	}
}

// addMod sets z = x+y mod m for x, y < m.
func addMod(z, x, y, m *element) {
	var s element
	var c uint64
	s[0], c = bits.Add64(x[0], y[0], 0)
	s[1], c = bits.Add64(x[1], y[1], c)
	s[2], c = bits.Add64(x[2], y[2], c)
	s[3], c = bits.Add64(x[3], y[3], c)
	reduceOnce(z, &s, c, m)
}

// The Go field routines mod p; fieldMul and the others (field_amd64.go,
// field_noasm.go) pick them or the assembly.
func mulGeneric(z, x, y *element) { montMul(z, x, y, &p, 1) }
func sqrGeneric(z, x *element)    { montMul(z, x, x, &p, 1) }

// fAdd sets z = x+y mod p for x, y < p. Its correction is a mask, not a
// branch: which way it goes is a coin flip for random inputs, and a
// mispredicted branch costs more than the arithmetic.
func fAdd(z, x, y *element) {
	var s0, s1, s2, s3, c, b uint64
	s0, c = bits.Add64(x[0], y[0], 0)
	s1, c = bits.Add64(x[1], y[1], c)
	s2, c = bits.Add64(x[2], y[2], c)
	s3, c = bits.Add64(x[3], y[3], c)
	d0, b := bits.Sub64(s0, 0xffffffffffffffff, 0)
	d1, b := bits.Sub64(s1, 0x00000000ffffffff, b)
	d2, b := bits.Sub64(s2, 0, b)
	d3, b := bits.Sub64(s3, 0xffffffff00000001, b)
	_, b = bits.Sub64(c, 0, b)
	keep := -b // all ones: s < p, keep s
	z[0] = s0&keep | d0&^keep
	z[1] = s1&keep | d1&^keep
	z[2] = s2&keep | d2&^keep
	z[3] = s3&keep | d3&^keep
}

// fSub sets z = x-y mod p for x, y < p (p added back under a mask).
func fSub(z, x, y *element) {
	var d0, d1, d2, d3, b, c uint64
	d0, b = bits.Sub64(x[0], y[0], 0)
	d1, b = bits.Sub64(x[1], y[1], b)
	d2, b = bits.Sub64(x[2], y[2], b)
	d3, b = bits.Sub64(x[3], y[3], b)
	m := -b
	d0, c = bits.Add64(d0, m, 0)
	d1, c = bits.Add64(d1, m&0x00000000ffffffff, c)
	d2, c = bits.Add64(d2, 0, c)
	d3, _ = bits.Add64(d3, m&0xffffffff00000001, c)
	z[0], z[1], z[2], z[3] = d0, d1, d2, d3
}

// ordMulGeneric is Montgomery multiplication mod n in Go.
func ordMulGeneric(z, x, y *element) { montMul(z, x, y, &n, nInv0) }

// isZero reports whether x is 0 (x reduced: 0 is its only representation).
func isZero(x *element) bool { return x[0]|x[1]|x[2]|x[3] == 0 }

// less reports whether x < y as integers.
func less(x, y *element) bool {
	_, b := bits.Sub64(x[0], y[0], 0)
	_, b = bits.Sub64(x[1], y[1], b)
	_, b = bits.Sub64(x[2], y[2], b)
	_, b = bits.Sub64(x[3], y[3], b)
	return b != 0
}

// setBytes sets z to the 32-byte big-endian b and reports whether it is
// below m (z is then reduced but not yet in Montgomery form).
func setBytes(z *element, b []byte, m *element) bool {
	z[3] = binary.BigEndian.Uint64(b[0:8])
	z[2] = binary.BigEndian.Uint64(b[8:16])
	z[1] = binary.BigEndian.Uint64(b[16:24])
	z[0] = binary.BigEndian.Uint64(b[24:32])
	return less(z, m)
}

// fieldInvert sets z = x^-1 mod p (Montgomery form in and out; 0 for 0) by
// Fermat's little theorem, x^(p-2), on an addition chain of 255 squarings
// and 13 multiplications: p-2 is, from the top, 32 ones, 31 zeros and a
// one, 96 zeros, 94 ones, a zero and a one.
func fieldInvert(z, x *element) {
	var x2, x4, x8, x16, x32, r element
	sqrMul := func(out, a *element, k int, b *element) { // out = a^(2^k) * b
		t := *a
		for i := 0; i < k; i++ {
			fieldSqr(&t, &t)
		}
		fieldMul(out, &t, b)
	}
	sqrMul(&x2, x, 1, x) // x^(2^2-1)
	sqrMul(&x4, &x2, 2, &x2)
	sqrMul(&x8, &x4, 4, &x4)
	sqrMul(&x16, &x8, 8, &x8)
	sqrMul(&x32, &x16, 16, &x16)
	sqrMul(&r, &x32, 32, x)
	sqrMul(&r, &r, 128, &x32) // 96 zeros, then 32 ones
	sqrMul(&r, &r, 32, &x32)
	sqrMul(&r, &r, 16, &x16)
	sqrMul(&r, &r, 8, &x8)
	sqrMul(&r, &r, 4, &x4)
	sqrMul(&r, &r, 2, &x2)
	sqrMul(&r, &r, 2, x) // "01"
	*z = r
}
