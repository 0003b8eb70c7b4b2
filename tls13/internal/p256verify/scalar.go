package p256verify

import "math/bits"

// Scalars mod n: r, s and the digest become plain (non-Montgomery) elements
// below n; only the inversion of s works in Montgomery form mod n.

// digestToScalar returns bits2int(digest) mod n (FIPS 186-5, Section 6.4.1):
// the leftmost 256 bits of the digest (all of a shorter one, as an integer),
// reduced once (the value is below 2^256 < 2n).
func digestToScalar(digest []byte) element {
	var buf [32]byte
	if len(digest) >= 32 {
		copy(buf[:], digest[:32])
	} else {
		copy(buf[32-len(digest):], digest)
	}
	var e element
	if !setBytes(&e, buf[:], &n) {
		var b uint64
		e[0], b = bits.Sub64(e[0], n[0], 0)
		e[1], b = bits.Sub64(e[1], n[1], b)
		e[2], b = bits.Sub64(e[2], n[2], b)
		e[3], _ = bits.Sub64(e[3], n[3], b)
	}
	return e
}

// scalarInvertMont returns s^-1 * 2^256 mod n (the Montgomery form of s's
// inverse) for 0 < s < n, as s^(n-2) with four-bit windows: s is public
// (a signature's), which a variable-time exponent walk may rely on.
func scalarInvertMont(s *element) element {
	var table [16]element
	ordMul(&table[1], s, &rrN)
	table[0] = montOneN
	for i := 2; i < 16; i++ {
		ordMul(&table[i], &table[i-1], &table[1])
	}
	e := n
	e[0] -= 2 // n is odd and its lowest limb is above 2: no borrow.
	z := montOneN
	for i := 63; i >= 0; i-- {
		if i != 63 {
			for j := 0; j < 4; j++ {
				ordSqr(&z, &z)
			}
		}
		if nib := e[i/16] >> (uint(i%16) * 4) & 15; nib != 0 {
			ordMul(&z, &z, &table[nib])
		}
	}
	return z
}
