package p256sign

import (
	"encoding/binary"
	"math/bits"
)

// scalar is an integer below 2^256 in four 64-bit limbs, least significant
// first. The routines below keep their results reduced modulo n (the order of
// P-256's base point) when their inputs are, and run in constant time: loops
// have fixed bounds, carries and borrows become masks, and no branch or index
// depends on a limb's value.
type scalar [4]uint64

// n is the order of the P-256 base point (NIST SP 800-186, Section 3.2.1.3),
// n0inv is -n^-1 mod 2^64 (Montgomery's constant) and rr is R^2 mod n with
// R = 2^256. TestConstants recomputes all three with math/big.
var (
	n = scalar{0xf3b9cac2fc632551, 0xbce6faada7179e84, 0xffffffffffffffff, 0xffffffff00000000}

	rr = scalar{0x83244c95be79eea2, 0x4699799c49bd6fa6, 0x2845b2392b6bec59, 0x66e12d94f3d95620}
)

const n0inv = 0xccd1c8aaee00bc4f

// setBytes sets z to the big-endian 32-byte b, unreduced.
func (z *scalar) setBytes(b *[32]byte) {
	z[3] = binary.BigEndian.Uint64(b[0:])
	z[2] = binary.BigEndian.Uint64(b[8:])
	z[1] = binary.BigEndian.Uint64(b[16:])
	z[0] = binary.BigEndian.Uint64(b[24:])
}

// bytes returns z big-endian.
func (z *scalar) bytes() [32]byte {
	var b [32]byte
	binary.BigEndian.PutUint64(b[0:], z[3])
	binary.BigEndian.PutUint64(b[8:], z[2])
	binary.BigEndian.PutUint64(b[16:], z[1])
	binary.BigEndian.PutUint64(b[24:], z[0])
	return b
}

// subN returns x - n and the borrow out (1 when x < n).
func subN(x *scalar) (d scalar, borrow uint64) {
	d[0], borrow = bits.Sub64(x[0], n[0], 0)
	d[1], borrow = bits.Sub64(x[1], n[1], borrow)
	d[2], borrow = bits.Sub64(x[2], n[2], borrow)
	d[3], borrow = bits.Sub64(x[3], n[3], borrow)
	return d, borrow
}

// selectScalar sets z to a when mask is all ones and to b when it is zero.
func selectScalar(z, a, b *scalar, mask uint64) {
	for i := range z {
		z[i] = a[i]&mask | b[i]&^mask
	}
}

// reduceOnce sets z to x mod n for any x below 2^256 (< 2n, since n > 2^255).
func (z *scalar) reduceOnce(x *scalar) {
	d, borrow := subN(x)
	selectScalar(z, x, &d, -borrow)
}

// lessThanN reports, as 1 or 0, whether x < n.
func lessThanN(x *scalar) uint64 {
	_, borrow := subN(x)
	return borrow
}

// isZero returns 1 when x is 0 and 0 otherwise.
func isZero(x *scalar) uint64 {
	v := x[0] | x[1] | x[2] | x[3]
	return 1 ^ (v|-v)>>63
}

// add sets z = x + y mod n for x, y < n.
func (z *scalar) add(x, y *scalar) {
	var s scalar
	var c uint64
	s[0], c = bits.Add64(x[0], y[0], 0)
	s[1], c = bits.Add64(x[1], y[1], c)
	s[2], c = bits.Add64(x[2], y[2], c)
	s[3], c = bits.Add64(x[3], y[3], c)
	d, borrow := subN(&s)
	// x + y < n exactly when the 257-bit sum minus n borrows.
	_, borrow = bits.Sub64(c, 0, borrow)
	selectScalar(z, &s, &d, -borrow)
}

// montMul sets z = x * y * R^-1 mod n (Montgomery multiplication, the
// coarsely integrated operand scanning form) for x, y < n.
func (z *scalar) montMul(x, y *scalar) {
	var t0, t1, t2, t3, t4 uint64
	for i := range 4 {
		yi := y[i]
		// t += x * y[i]
		var c, cc, hi, lo uint64
		hi, lo = bits.Mul64(x[0], yi)
		t0, cc = bits.Add64(lo, t0, 0)
		c = hi + cc
		hi, lo = bits.Mul64(x[1], yi)
		lo, cc = bits.Add64(lo, t1, 0)
		hi += cc
		t1, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		hi, lo = bits.Mul64(x[2], yi)
		lo, cc = bits.Add64(lo, t2, 0)
		hi += cc
		t2, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		hi, lo = bits.Mul64(x[3], yi)
		lo, cc = bits.Add64(lo, t3, 0)
		hi += cc
		t3, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		var t5 uint64
		t4, t5 = bits.Add64(t4, c, 0)
		// t = (t + m*n) / 2^64 with m chosen so the low limb cancels.
		m := t0 * n0inv
		hi, lo = bits.Mul64(m, n[0])
		_, cc = bits.Add64(lo, t0, 0)
		c = hi + cc
		hi, lo = bits.Mul64(m, n[1])
		lo, cc = bits.Add64(lo, t1, 0)
		hi += cc
		t0, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		hi, lo = bits.Mul64(m, n[2])
		lo, cc = bits.Add64(lo, t2, 0)
		hi += cc
		t1, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		hi, lo = bits.Mul64(m, n[3])
		lo, cc = bits.Add64(lo, t3, 0)
		hi += cc
		t2, cc = bits.Add64(lo, c, 0)
		c = hi + cc
		t3, cc = bits.Add64(t4, c, 0)
		t4 = t5 + cc
	}
	// t < 2n: subtract n unless that borrows past t4.
	t := scalar{t0, t1, t2, t3}
	d, borrow := subN(&t)
	_, borrow = bits.Sub64(t4, 0, borrow)
	selectScalar(z, &t, &d, -borrow)
}

// mul sets z = x * y mod n for x, y < n: two Montgomery multiplications,
// the second by R^2 to cancel the first's R^-1.
func (z *scalar) mul(x, y *scalar) {
	var t scalar
	t.montMul(x, y)
	z.montMul(&t, &rr)
}
