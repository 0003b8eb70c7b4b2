package zdata

import (
	"crypto/ecdh"
	"crypto/subtle"
	"fmt"

	"github.com/ztls-project/ztls/tls13"
)

// Curve returns the crypto/ecdh curve of a ztls v1 group.
func Curve(group tls13.CurveID) (ecdh.Curve, error) {
	switch group {
	case GroupX25519:
		return ecdh.X25519(), nil
	case GroupSecp256r1:
		return ecdh.P256(), nil
	}
	return nil, reasonErr(ReasonUnknownGroup, fmt.Errorf("%w %d", ErrUnknownGroup, group))
}

// x25519SmallOrder lists, little-endian with the top bit cleared (X25519
// ignores it, RFC 7748, Section 5), every u-coordinate whose X25519
// product with a clamped scalar is zero: the points of order 1, 2, 4 and
// 8 of Curve25519 and its twist (u = 0, 1, p-1 and the two order-8
// points) and the non-canonical encodings p and p+1 of 0 and 1. A table
// lookup replaces a probe scalar multiplication on the client's critical
// path; TestSmallOrderTable checks each entry against crypto/ecdh.
var x25519SmallOrder = [...][32]byte{
	{},
	{1},
	{0xe0, 0xeb, 0x7a, 0x7c, 0x3b, 0x41, 0xb8, 0xae, 0x16, 0x56, 0xe3, 0xfa, 0xf1, 0x9f, 0xc4, 0x6a,
		0xda, 0x09, 0x8d, 0xeb, 0x9c, 0x32, 0xb1, 0xfd, 0x86, 0x62, 0x05, 0x16, 0x5f, 0x49, 0xb8, 0x00},
	{0x5f, 0x9c, 0x95, 0xbc, 0xa3, 0x50, 0x8c, 0x24, 0xb1, 0xd0, 0xb1, 0x55, 0x9c, 0x83, 0xef, 0x5b,
		0x04, 0x44, 0x5c, 0xc4, 0x58, 0x1c, 0x8e, 0x86, 0xd8, 0x22, 0x4e, 0xdd, 0xd0, 0x9f, 0x11, 0x57},
	fieldPlus(-1), fieldPlus(0), fieldPlus(1),
}

// fieldPlus returns the encoding of p+d for small d (p = 2^255-19).
func fieldPlus(d int) [32]byte {
	var b [32]byte
	for i := range b {
		b[i] = 0xff
	}
	b[0] = byte(0xed + d)
	b[31] = 0x7f
	return b
}

// x25519LowOrder reports whether share is one of x25519SmallOrder.
func x25519LowOrder(share []byte) bool {
	if len(share) != 32 {
		return false
	}
	var u [32]byte
	copy(u[:], share)
	u[31] &= 0x7f
	found := 0
	for i := range x25519SmallOrder {
		found |= subtle.ConstantTimeCompare(u[:], x25519SmallOrder[i][:])
	}
	return found == 1
}

// ValidateShare checks a published key share before a client uses it
// (docs/ztls-spec.md, Section 3, key hygiene): a secp256r1 share must be an
// uncompressed point on the curve (RFC 8446, Section 4.2.8.2); an x25519
// share must be 32 bytes and not of small order (RFC 8446, Section 7.4.2).
//
// An X25519MLKEM768 share (docs/ztls-spec.md, Section 9.1) must be 1216
// bytes, its encapsulation key pass FIPS 203's modulus check and its
// x25519 half not be of small order.
func ValidateShare(group tls13.CurveID, share []byte) error {
	if group == GroupX25519MLKEM768 {
		return validatePQShare(share)
	}
	curve, err := Curve(group)
	if err != nil {
		return err
	}
	_, err = curve.NewPublicKey(share)
	if err != nil {
		return reasonErr(ReasonInvalidShare, fmt.Errorf("%w: %v", ErrInvalidShare, err))
	}
	if group == GroupX25519 {
		if x25519LowOrder(share) {
			return reasonErr(ReasonInvalidShare, fmt.Errorf("%w: small-order x25519 point", ErrInvalidShare))
		}
	}
	return nil
}

// ecdhChecked runs ECDH and refuses an all-zero shared secret.
func ecdhChecked(priv *ecdh.PrivateKey, pub *ecdh.PublicKey) ([]byte, error) {
	s, err := priv.ECDH(pub)
	if err != nil {
		return nil, fmt.Errorf("zdata: ECDH: %v", err)
	}
	if subtle.ConstantTimeCompare(s, make([]byte, len(s))) == 1 {
		return nil, fmt.Errorf("zdata: ECDH: all-zero shared secret")
	}
	return s, nil
}

// SharedSecret computes the semi-static secret ZS between the Z-data
// private key and a client's key_exchange bytes, validating the share;
// an invalid share or an all-zero result is an error. An x25519 key runs
// the TLS engine's ladder (tls13.X25519SharedSecret: field25519's MULX/ADX
// code where the CPU has it, about a third faster than crypto/ecdh's
// here), one per accepted ztls flight; its result equals crypto/ecdh's
// (TestSharedSecretMatchesECDH). secp256r1 keys use crypto/ecdh.
func SharedSecret(priv *ecdh.PrivateKey, peer []byte) ([]byte, error) {
	if priv.Curve() == ecdh.X25519() {
		return x25519Shared(priv, peer)
	}
	pub, err := priv.Curve().NewPublicKey(peer)
	if err != nil {
		return nil, fmt.Errorf("zdata: invalid peer share: %v", err)
	}
	return ecdhChecked(priv, pub)
}

// x25519Shared is SharedSecret for an x25519 key. The scalar is copied out
// of crypto/ecdh's key (it has no other accessor) and the copy zeroed.
func x25519Shared(priv *ecdh.PrivateKey, peer []byte) ([]byte, error) {
	scalar := priv.Bytes()
	defer clear(scalar)
	if len(peer) != 32 {
		return nil, fmt.Errorf("zdata: invalid peer share: x25519 share is %d bytes, want 32", len(peer))
	}
	s, err := tls13.X25519SharedSecret(scalar, peer)
	if err != nil {
		return nil, fmt.Errorf("zdata: ECDH: %v", err)
	}
	return s, nil
}
