// Package p256sign makes ECDSA signatures on P-256 (FIPS 186-5, Section 6.4)
// faster than crypto/ecdsa, for the server's CertificateVerify
// (ecdsa_secp256r1_sha256, RFC 8446, Section 4.2.3).
//
// Where the time goes: R = kG is crypto/ecdh's P-256 (Go's assembly, constant
// time); the nonce is RFC 6979's HMAC-DRBG with SHA-256 instead of
// crypto/ecdsa's SHA-512 one; the arithmetic modulo the group order n is this
// package's own (scalar.go: four 64-bit limbs, Montgomery multiplication with
// math/bits, masks instead of branches); k^-1 is Bernstein and Yang's safegcd
// in constant time (safegcd.go), 1.9 us where Fermat's little theorem with the
// same multiplication takes 10.
//
// Nonces are hedged: the DRBG is seeded with the private key and the digest
// (deterministic, RFC 6979) plus 32 bytes from rand as RFC 6979, Section 3.6's
// additional data, so a broken random source never gives one k to two
// different messages, and a good one makes k unpredictable even to someone
// who knows the key's DRBG inputs.
//
// Constant time: no branch or memory index depends on k, its inverse or the
// private key (reviewed: carries, borrows and signs become masks, loops have
// fixed counts; the branches in Sign are on the digest's length, on refused
// candidates, which are discarded, and on r and s, which are public).
// TestScalarPathDudect times the code that handles k (ZTLS_DUDECT=1).
package p256sign

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"
)

// ErrNotP256 is returned for a key on any other curve; the caller signs with
// crypto/ecdsa instead.
var ErrNotP256 = errors.New("p256sign: the key is not on P-256: sign with crypto/ecdsa")

// Sign returns an ECDSA signature of digest with key, ASN.1 DER encoded as
// crypto/ecdsa.SignASN1 encodes it (SEQUENCE of the INTEGERs r and s, each in
// its fewest bytes). digest is the message hash: a longer one is cut to its
// leftmost 256 bits and a shorter one taken as a smaller integer, as FIPS
// 186-5, Section 6.4.1 says. rand supplies 32 bytes of the nonce's seed
// (nil means crypto/rand.Reader); the same rand output, key and digest give
// the same signature. Safe for concurrent use with one key.
func Sign(rand io.Reader, key *ecdsa.PrivateKey, digest []byte) ([]byte, error) {
	if rand == nil {
		rand = cryptorand.Reader
	}
	var extra [32]byte
	if _, err := io.ReadFull(rand, extra[:]); err != nil {
		return nil, fmt.Errorf("p256sign: reading the nonce's randomness: %w", err)
	}
	return sign(key, digest, extra[:])
}

// signDeterministic is pure RFC 6979 (no additional data), for its
// Appendix A.2.5 vectors.
func signDeterministic(key *ecdsa.PrivateKey, digest []byte) ([]byte, error) {
	return sign(key, digest, nil)
}

func sign(key *ecdsa.PrivateKey, digest, extra []byte) ([]byte, error) {
	var xb [32]byte
	if err := privateBytes(key, &xb); err != nil {
		return nil, err
	}
	var d, e scalar
	d.setBytes(&xb)
	e = hashToScalar(digest)
	eb := e.bytes()
	var drbg hmacDRBG
	defer drbg.wipe()
	drbg.seed(&xb, &eb, extra)
	clear(xb[:])
	for {
		r, s, ok, err := tryNonce(&drbg, &d, &e)
		if err != nil {
			return nil, err
		}
		if ok {
			return encodeSignature(&r, &s), nil
		}
		drbg.reseed()
	}
}

// privateBytes checks that key is a P-256 key with 0 < D < n and writes D.
func privateBytes(key *ecdsa.PrivateKey, xb *[32]byte) error {
	if key == nil || key.Curve != elliptic.P256() {
		return ErrNotP256
	}
	// Reading D directly, not through key.Bytes: Bytes decodes and checks
	// the public point on every call (0.5 us, 4 % of a signature here), and
	// D is what crypto/ecdsa itself encodes from. The range check is the one
	// crypto/ecdsa makes.
	//lint:ignore SA1019 see above
	if key.D == nil || key.D.Sign() <= 0 || key.D.Cmp(key.Curve.Params().N) >= 0 {
		return errors.New("p256sign: the private key's scalar is not in [1, n-1]: the key is corrupt, load it again")
	}
	key.D.FillBytes(xb[:]) //lint:ignore SA1019 see above
	return nil
}

// hashToScalar is FIPS 186-5's e: the leftmost 256 bits of the digest as an
// integer, reduced modulo n (RFC 6979's bits2int, then mod q for
// bits2octets).
func hashToScalar(digest []byte) scalar {
	var hb [32]byte
	if len(digest) >= 32 {
		copy(hb[:], digest[:32])
	} else {
		copy(hb[32-len(digest):], digest)
	}
	var e scalar
	e.setBytes(&hb)
	e.reduceOnce(&e)
	return e
}

// tryNonce draws one k from the DRBG and signs with it. ok is false when
// RFC 6979 says to draw again: k is 0 or not below n (probability about
// 2^-32), or r or s came out 0 (about 2^-256); the refused values are public
// or discarded, so branching on them leaks nothing.
func tryNonce(drbg *hmacDRBG, d, e *scalar) (r, s scalar, ok bool, err error) {
	kb := drbg.generate()
	var k scalar
	k.setBytes(&kb)
	if isZero(&k)|(1^lessThanN(&k)) == 1 {
		return r, s, false, nil
	}
	priv, err := ecdh.P256().NewPrivateKey(kb[:])
	if err != nil {
		return r, s, false, fmt.Errorf("p256sign: computing R: %w", err)
	}
	pub := priv.PublicKey().Bytes() // 0x04 || x || y
	var xr [32]byte
	copy(xr[:], pub[1:33])
	r.setBytes(&xr)
	r.reduceOnce(&r)
	if isZero(&r) == 1 {
		return r, s, false, nil
	}
	var kinv, rd scalar
	kinv.invertSafegcd(&k)
	// s = k^-1 (e + r d) mod n
	rd.mul(&r, d)
	rd.add(&rd, e)
	s.mul(&kinv, &rd)
	if isZero(&s) == 1 {
		return r, s, false, nil
	}
	return r, s, true, nil
}

// encodeSignature is crypto/ecdsa.SignASN1's encoding: SEQUENCE { r INTEGER,
// s INTEGER }, each INTEGER in its fewest bytes with a 0x00 before a high bit
// (DER, X.690, Section 8.3). Both lengths stay under 128: short form.
func encodeSignature(r, s *scalar) []byte {
	rb, sb := r.bytes(), s.bytes()
	ri, si := derInteger(rb[:]), derInteger(sb[:])
	out := make([]byte, 0, 2+2+len(ri)+2+len(si))
	out = append(out, 0x30, byte(2+len(ri)+2+len(si)))
	out = append(out, 0x02, byte(len(ri)))
	out = append(out, ri...)
	out = append(out, 0x02, byte(len(si)))
	return append(out, si...)
}

// derInteger returns the content octets of a nonnegative INTEGER given
// big-endian: leading zeros dropped (one kept for 0), 0x00 prepended when the
// first byte has its high bit set. The returned slice may share b's array.
func derInteger(b []byte) []byte {
	for len(b) > 1 && b[0] == 0 {
		b = b[1:]
	}
	if b[0]&0x80 != 0 {
		return append([]byte{0}, b...)
	}
	return b
}
