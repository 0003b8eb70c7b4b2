package field25519

import (
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"math/bits"
)

// Element is an element of GF(2^255-19). Its zero value is 0. Methods set
// the receiver and return it, as filippo.io/edwards25519/field's do; the
// receiver may alias any argument.
type Element struct {
	l [4]uint64 // little-endian limbs, any value below 2^256
}

// Accelerated reports whether the arithmetic runs on the BMI2/ADX assembly
// (false without those instructions, off amd64, or with -tags purego).
func Accelerated() bool { return useADX }

// Zero sets v = 0.
func (v *Element) Zero() *Element { *v = Element{}; return v }

// One sets v = 1.
func (v *Element) One() *Element { *v = Element{l: [4]uint64{1}}; return v }

// Set sets v = a.
func (v *Element) Set(a *Element) *Element { *v = *a; return v }

// Add sets v = a + b.
func (v *Element) Add(a, b *Element) *Element { add(&v.l, &a.l, &b.l); return v }

// Subtract sets v = a - b.
func (v *Element) Subtract(a, b *Element) *Element { sub(&v.l, &a.l, &b.l); return v }

// Multiply sets v = a * b.
func (v *Element) Multiply(a, b *Element) *Element { mul(&v.l, &a.l, &b.l); return v }

// Square sets v = a * a.
func (v *Element) Square(a *Element) *Element { square(&v.l, &a.l); return v }

// Mult121666 sets v = 121666 * a (121666 = (486662 + 2) / 4, the ladder's
// constant in the form z2 = E * (BB + 121666 * E)).
func (v *Element) Mult121666(a *Element) *Element { mul121666(&v.l, &a.l); return v }

// Swap swaps v and u if cond is 1 and leaves them if it is 0, in constant
// time. Other values of cond are not allowed.
func (v *Element) Swap(u *Element, cond int) { cswap(&v.l, &u.l, uint64(cond)) }

// Invert sets v = 1/z mod p (z^(p-2), so 0 maps to 0), in constant time.
func (v *Element) Invert(z *Element) *Element {
	// p-2 = 2^255 - 21, by the usual chain of 254 squarings and 11
	// multiplications; tN holds z^N.
	var z2, z9, z11, t0, t1, t2 Element
	z2.Square(z)
	t0.Square(&z2)
	t0.Square(&t0)
	z9.Multiply(&t0, z)
	z11.Multiply(&z9, &z2)
	t0.Square(&z11)
	t1.Multiply(&t0, &z9) // 2^5 - 1
	t0.squareN(&t1, 5)
	t1.Multiply(&t0, &t1) // 2^10 - 1
	t0.squareN(&t1, 10)
	t2.Multiply(&t0, &t1) // 2^20 - 1
	t0.squareN(&t2, 20)
	t0.Multiply(&t0, &t2) // 2^40 - 1
	t0.squareN(&t0, 10)
	t1.Multiply(&t0, &t1) // 2^50 - 1
	t0.squareN(&t1, 50)
	t2.Multiply(&t0, &t1) // 2^100 - 1
	t0.squareN(&t2, 100)
	t0.Multiply(&t0, &t2) // 2^200 - 1
	t0.squareN(&t0, 50)
	t0.Multiply(&t0, &t1) // 2^250 - 1
	t0.squareN(&t0, 5)    // 2^255 - 32
	return v.Multiply(&t0, &z11)
}

// squareN sets v = a^(2^n), n >= 1.
func (v *Element) squareN(a *Element, n int) *Element {
	v.Square(a)
	for i := 1; i < n; i++ {
		v.Square(v)
	}
	return v
}

var errLength = errors.New("field25519: a field element is 32 bytes")

// SetBytes sets v to the 32-byte little-endian x, ignoring its top bit
// (RFC 7748, Section 5: a u-coordinate's bit 255 is masked) and accepting
// values from p to 2^255-1, as filippo.io/edwards25519/field does.
func (v *Element) SetBytes(x []byte) (*Element, error) {
	if len(x) != 32 {
		return nil, errLength
	}
	for i := range v.l {
		v.l[i] = binary.LittleEndian.Uint64(x[8*i:])
	}
	v.l[3] &= 1<<63 - 1
	return v, nil
}

// canonical returns v reduced into [0, p), in constant time.
func (v *Element) canonical() [4]uint64 {
	x := v.l
	// Fold bit 255 (2^255 = 19): x < 2^255 + 19 afterwards.
	top := x[3] >> 63
	x[3] &= 1<<63 - 1
	var c uint64
	x[0], c = bits.Add64(x[0], 19*top, 0)
	x[1], c = bits.Add64(x[1], 0, c)
	x[2], c = bits.Add64(x[2], 0, c)
	x[3], _ = bits.Add64(x[3], 0, c)
	// x >= p exactly when x + 19 reaches 2^255; then x - p is x + 19 - 2^255.
	var y [4]uint64
	y[0], c = bits.Add64(x[0], 19, 0)
	y[1], c = bits.Add64(x[1], 0, c)
	y[2], c = bits.Add64(x[2], 0, c)
	y[3], _ = bits.Add64(x[3], 0, c)
	mask := -(y[3] >> 63)
	y[3] &= 1<<63 - 1
	for i := range x {
		x[i] = x[i]&^mask | y[i]&mask
	}
	return x
}

// Bytes returns the canonical 32-byte little-endian encoding of v.
func (v *Element) Bytes() []byte {
	// Small enough to inline, so out can stay on the caller's stack.
	var out [32]byte
	return v.fillBytes(&out)
}

func (v *Element) fillBytes(out *[32]byte) []byte {
	x := v.canonical()
	for i := range x {
		binary.LittleEndian.PutUint64(out[8*i:], x[i])
	}
	return out[:]
}

// Equal returns 1 if v and u are the same element and 0 if not, in
// constant time.
func (v *Element) Equal(u *Element) int {
	a, b := v.Bytes(), u.Bytes()
	return subtle.ConstantTimeCompare(a, b)
}
