package zdata

import (
	"crypto/ecdh"
	"crypto/subtle"
	"fmt"
	"sync"
)

// Curve returns the crypto/ecdh curve of a ztls v1 group.
func Curve(group uint16) (ecdh.Curve, error) {
	switch group {
	case GroupX25519:
		return ecdh.X25519(), nil
	case GroupSecp256r1:
		return ecdh.P256(), nil
	}
	return nil, reasonErr(ReasonUnknownGroup, fmt.Errorf("%w %d", ErrUnknownGroup, group))
}

// probe is a fixed, public private key used only to test shares: an X25519
// share of small order gives an all-zero result with any scalar.
var probe = sync.OnceValue(func() *ecdh.PrivateKey {
	var b [32]byte
	for i := range b {
		b[i] = byte(0x5a + i)
	}
	k, err := ecdh.X25519().NewPrivateKey(b[:])
	if err != nil {
		panic(err) // cannot happen: any 32 bytes are an X25519 scalar
	}
	return k
})

// ValidateShare checks a published key share before a client uses it
// (ZTLS-SPEC.md, Section 3, key hygiene): a secp256r1 share must be an
// uncompressed point on the curve (RFC 8446, Section 4.2.8.2); an x25519
// share must be 32 bytes and not of small order (RFC 8446, Section 7.4.2).
func ValidateShare(group uint16, share []byte) error {
	curve, err := Curve(group)
	if err != nil {
		return err
	}
	pub, err := curve.NewPublicKey(share)
	if err != nil {
		return reasonErr(ReasonInvalidShare, fmt.Errorf("%w: %v", ErrInvalidShare, err))
	}
	if group == GroupX25519 {
		if _, err := ecdhChecked(probe(), pub); err != nil {
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
// an invalid share or an all-zero result is an error.
func SharedSecret(priv *ecdh.PrivateKey, peer []byte) ([]byte, error) {
	pub, err := priv.Curve().NewPublicKey(peer)
	if err != nil {
		return nil, fmt.Errorf("zdata: invalid peer share: %v", err)
	}
	return ecdhChecked(priv, pub)
}
