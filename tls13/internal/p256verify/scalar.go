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

// invertPair sets w = s^-1 * 2^256 mod n (the Montgomery form of the
// inverse of the plain s, 0 < s < n) and zi = z^-1 mod p (Montgomery form
// in and out, z != 0) with the variable-time binary GCD (inverse.go): both
// inputs are public (a signature's s, the Z of a public key's table).
// z stands for Z*2^256, so its plain inverse times 2^768 (rrrP, one
// Montgomery multiplication) is Z^-1*2^256.
func invertPair(w, s, zi, z *element) {
	var t element
	invertVartime(&t, s, &n, nInv0)
	ordMul(w, &t, &rrN)
	invertVartime(&t, z, &p, 1)
	fieldMul(zi, &t, &rrrP)
}
