package p256verify

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"math/bits"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// Verify reports whether sigDER, an ASN.1 DER Ecdsa-Sig-Value, is a valid
// ECDSA signature by pub (a P-256 key) over digest: FIPS 186-5, Section
// 6.4.2, with the same acceptance as crypto/ecdsa.VerifyASN1 (its DER
// parser, r and s in [1, n-1], the digest's leftmost 256 bits, the key's
// point on the curve). Any other curve, or a key crypto/ecdsa would refuse,
// is false.
func Verify(pub *ecdsa.PublicKey, digest, sigDER []byte) bool {
	if pub == nil || pub.Curve != elliptic.P256() {
		return false
	}
	var q affinePoint
	if !publicPoint(&q, pub) {
		return false
	}
	rBytes, sBytes, ok := parseSignature(sigDER)
	if !ok {
		return false
	}
	var r, s element
	if !scalarFromBytes(&r, rBytes) || !scalarFromBytes(&s, sBytes) {
		return false
	}
	// The key's table needs one inversion mod p and the scalars one mod n:
	// invertPair makes both (variable time: s and the key are public).
	var qj [len(keyTable{})]jacobian
	oddMultiples(qj[:], &jacobian{q[0], q[1], one})
	var prefix [len(qj)]element
	zProducts(prefix[:], qj[:])
	var w, zInv element
	invertPair(&w, &s, &zInv, &prefix[len(prefix)-1])
	var qt keyTable
	fromProducts(qt[:], qj[:], prefix[:], &zInv)

	e := digestToScalar(digest)
	var u1, u2 element
	ordMul(&u1, &e, &w) // e * s^-1, plain
	ordMul(&u2, &r, &w) // r * s^-1, plain
	acc := doubleScalarMult(&u1, &u2, &qt)
	return xMatches(&acc, &r)
}

// parseSignature reads SEQUENCE { r INTEGER, s INTEGER } exactly as
// crypto/ecdsa does (cryptobyte's DER rules: minimal lengths and integers,
// no trailing bytes, no negative values), returning the integers' bytes
// without leading zeros.
func parseSignature(sig []byte) (r, s []byte, ok bool) {
	var inner cryptobyte.String
	input := cryptobyte.String(sig)
	ok = input.ReadASN1(&inner, asn1.SEQUENCE) && input.Empty() &&
		inner.ReadASN1Integer(&r) && inner.ReadASN1Integer(&s) && inner.Empty()
	return r, s, ok
}

// scalarFromBytes sets z to the big-endian b and reports whether it lies in
// [1, n-1].
func scalarFromBytes(z *element, b []byte) bool {
	if len(b) > 32 {
		return false
	}
	var buf [32]byte
	copy(buf[32-len(b):], b)
	return setBytes(z, buf[:], &n) && !isZero(z)
}

// publicPoint sets q to pub's point in Montgomery form and reports whether
// it is a point of the curve (coordinates below p, y^2 = x^3 - 3x + b),
// which also excludes the infinity. The coordinates come from
// PublicKey.Bytes (the uncompressed encoding; crypto/ecdsa refuses there
// the keys its verification refuses); the curve equation is checked again
// here, so this package never relies on that.
func publicPoint(q *affinePoint, pub *ecdsa.PublicKey) bool {
	enc, err := pub.Bytes()
	if err != nil || len(enc) != 65 || enc[0] != 4 {
		return false
	}
	if !setBytes(&q[0], enc[1:33], &p) || !setBytes(&q[1], enc[33:65], &p) {
		return false
	}
	fieldMul(&q[0], &q[0], &rrP)
	fieldMul(&q[1], &q[1], &rrP)
	var lhs, rhs element
	fieldSqr(&lhs, &q[1])
	fieldSqr(&rhs, &q[0])
	fSub(&rhs, &rhs, &three)
	fieldMul(&rhs, &rhs, &q[0])
	fAdd(&rhs, &rhs, &curveB)
	return lhs == rhs
}

// xMatches reports whether acc is not the infinity and its affine x,
// X/Z^2, is r mod n: X = r*Z^2 or, when r + n < p, X = (r+n)*Z^2 (no
// inversion).
func xMatches(acc *jacobian, r *element) bool {
	if isZero(&acc[2]) {
		return false
	}
	var zz, rz, rm element
	fieldSqr(&zz, &acc[2])
	fieldMul(&rm, r, &rrP)
	fieldMul(&rz, &rm, &zz)
	if rz == acc[0] {
		return true
	}
	// r < n, so r + n < 2^257; it is a candidate only below p.
	var rn element
	var c uint64
	rn[0], c = bits.Add64(r[0], n[0], 0)
	rn[1], c = bits.Add64(r[1], n[1], c)
	rn[2], c = bits.Add64(r[2], n[2], c)
	rn[3], c = bits.Add64(r[3], n[3], c)
	if c != 0 || !less(&rn, &p) {
		return false
	}
	fieldMul(&rm, &rn, &rrP)
	fieldMul(&rz, &rm, &zz)
	return rz == acc[0]
}
