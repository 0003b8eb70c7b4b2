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
// in and out, z != 0): s^(n-2) and z^(p-2) with four-bit windows, in
// lockstep. Each chain of squarings waits on its multiplier's latency;
// two independent chains let the processor run one while the other waits.
// Both inputs are public (a signature's s, a public point's Z), which the
// exponent walk's variable timing may rely on.
func invertPair(w, s, zi, z *element) {
	var tn, tp [16]element
	ordMul(&tn[1], s, &rrN)
	tn[0], tp[0], tp[1] = montOneN, one, *z
	for i := 2; i < 16; i++ {
		ordMul(&tn[i], &tn[i-1], &tn[1])
		fieldMul(&tp[i], &tp[i-1], &tp[1])
	}
	en, ep := n, p
	en[0] -= 2 // neither lowest limb is below 2: no borrow
	ep[0] -= 2
	a, b := montOneN, one
	for i := 63; i >= 0; i-- {
		if i != 63 {
			for j := 0; j < 4; j++ {
				ordSqr(&a, &a)
				fieldSqr(&b, &b)
			}
		}
		shift := uint(i%16) * 4
		if nib := en[i/16] >> shift & 15; nib != 0 {
			ordMul(&a, &a, &tn[nib])
		}
		if nib := ep[i/16] >> shift & 15; nib != 0 {
			fieldMul(&b, &b, &tp[nib])
		}
	}
	*w, *zi = a, b
}
