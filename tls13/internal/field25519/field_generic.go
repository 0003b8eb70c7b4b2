package field25519

import "math/bits"

// The Go versions of the assembly routines: the same representation (four
// limbs below 2^256, 2^256 = 38 mod p) and the same reductions, in
// constant time (bits.Mul64, Add64 and Sub64 do not branch; carries become
// multipliers, never conditions).

// reduceGeneric sets out to t mod p (below 2^256), t being eight limbs.
func reduceGeneric(out *[4]uint64, t *[8]uint64) {
	var r [4]uint64
	var top uint64
	for i := 0; i < 4; i++ {
		hi, lo := bits.Mul64(t[i+4], 38)
		var c uint64
		lo, c = bits.Add64(lo, t[i], 0)
		hi += c
		lo, c = bits.Add64(lo, top, 0)
		hi += c
		r[i] = lo
		top = hi
	}
	// r + top*2^256 < 39*2^256, so top <= 38.
	var c uint64
	r[0], c = bits.Add64(r[0], top*38, 0)
	r[1], c = bits.Add64(r[1], 0, c)
	r[2], c = bits.Add64(r[2], 0, c)
	r[3], c = bits.Add64(r[3], 0, c)
	// After a carry out, r < 38*39: adding 38 cannot carry again.
	r[0] += c * 38
	*out = r
}

// mulGeneric sets out = a*b mod p.
func mulGeneric(out, a, b *[4]uint64) {
	var t [8]uint64
	for i := 0; i < 4; i++ {
		var carry uint64
		for j := 0; j < 4; j++ {
			// a[i]*b[j] + t[i+j] + carry < 2^128: no carry is lost.
			hi, lo := bits.Mul64(a[i], b[j])
			var c uint64
			lo, c = bits.Add64(lo, t[i+j], 0)
			hi += c
			lo, c = bits.Add64(lo, carry, 0)
			hi += c
			t[i+j] = lo
			carry = hi
		}
		t[i+4] = carry
	}
	reduceGeneric(out, &t)
}

// addGeneric sets out = a+b mod p.
func addGeneric(out, a, b *[4]uint64) {
	var r [4]uint64
	var c uint64
	r[0], c = bits.Add64(a[0], b[0], 0)
	r[1], c = bits.Add64(a[1], b[1], c)
	r[2], c = bits.Add64(a[2], b[2], c)
	r[3], c = bits.Add64(a[3], b[3], c)
	r[0], c = bits.Add64(r[0], c*38, 0)
	r[1], c = bits.Add64(r[1], 0, c)
	r[2], c = bits.Add64(r[2], 0, c)
	r[3], c = bits.Add64(r[3], 0, c)
	r[0] += c * 38
	*out = r
}

// subGeneric sets out = a-b mod p.
func subGeneric(out, a, b *[4]uint64) {
	var r [4]uint64
	var c uint64
	r[0], c = bits.Sub64(a[0], b[0], 0)
	r[1], c = bits.Sub64(a[1], b[1], c)
	r[2], c = bits.Sub64(a[2], b[2], c)
	r[3], c = bits.Sub64(a[3], b[3], c)
	r[0], c = bits.Sub64(r[0], c*38, 0)
	r[1], c = bits.Sub64(r[1], 0, c)
	r[2], c = bits.Sub64(r[2], 0, c)
	r[3], c = bits.Sub64(r[3], 0, c)
	// After a second borrow, r[0] >= 2^64-38: subtracting 38 cannot borrow.
	r[0] -= c * 38
	*out = r
}

// mul121666Generic sets out = 121666*a mod p.
func mul121666Generic(out, a *[4]uint64) {
	var r [4]uint64
	var carry uint64
	for i := 0; i < 4; i++ {
		hi, lo := bits.Mul64(a[i], 121666)
		var c uint64
		r[i], c = bits.Add64(lo, carry, 0)
		carry = hi + c
	}
	var c uint64
	r[0], c = bits.Add64(r[0], carry*38, 0)
	r[1], c = bits.Add64(r[1], 0, c)
	r[2], c = bits.Add64(r[2], 0, c)
	r[3], c = bits.Add64(r[3], 0, c)
	r[0] += c * 38
	*out = r
}

// cswapGeneric swaps a and b if swap is 1, not if it is 0.
func cswapGeneric(a, b *[4]uint64, swap uint64) {
	mask := -swap
	for i := range a {
		x := (a[i] ^ b[i]) & mask
		a[i] ^= x
		b[i] ^= x
	}
}

// stepGeneric is ladderStep in Go (RFC 7748, Section 5).
func stepGeneric(s *ladderState, swap uint64) {
	cswapGeneric(&s[sX2], &s[sX3], swap)
	cswapGeneric(&s[sZ2], &s[sZ3], swap)
	addGeneric(&s[sA], &s[sX2], &s[sZ2])
	subGeneric(&s[sB], &s[sX2], &s[sZ2])
	addGeneric(&s[sC], &s[sX3], &s[sZ3])
	subGeneric(&s[sD], &s[sX3], &s[sZ3])
	mulGeneric(&s[sAA], &s[sA], &s[sA])
	mulGeneric(&s[sBB], &s[sB], &s[sB])
	mulGeneric(&s[sDA], &s[sD], &s[sA])
	mulGeneric(&s[sCB], &s[sC], &s[sB])
	subGeneric(&s[sE], &s[sAA], &s[sBB])
	mulGeneric(&s[sX2], &s[sAA], &s[sBB])
	addGeneric(&s[sT], &s[sDA], &s[sCB])
	mulGeneric(&s[sX3], &s[sT], &s[sT])
	subGeneric(&s[sT], &s[sDA], &s[sCB])
	mulGeneric(&s[sT], &s[sT], &s[sT])
	mulGeneric(&s[sZ3], &s[sT], &s[sX1])
	mul121666Generic(&s[sT], &s[sE])
	addGeneric(&s[sT], &s[sT], &s[sBB])
	mulGeneric(&s[sZ2], &s[sT], &s[sE])
}
