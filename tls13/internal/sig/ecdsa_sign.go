package sig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"io"

	"github.com/ztls-project/ztls/tls13/internal/p256sign"
)

// signECDSA makes an ECDSA signature over digest (already hashed with h) with
// key, ASN.1 DER encoded as RFC 8446, Section 4.2.3 requires.
//
// A software P-256 key signing with SHA-256 (ecdsa_secp256r1_sha256) goes
// through p256sign, about twice as fast as crypto/ecdsa with the same
// encoding and a hedged RFC 6979 nonce; every other key or signer (P-384,
// P-521, hardware and remote crypto.Signers) and everything in FIPS 140-3
// mode stays with key.Sign, crypto/ecdsa's validated code.
func signECDSA(rand io.Reader, key crypto.Signer, h crypto.Hash, digest []byte) ([]byte, error) {
	if k, ok := key.(*ecdsa.PrivateKey); ok && h == crypto.SHA256 && k.Curve == elliptic.P256() && !fips140.Enabled() {
		return p256sign.Sign(rand, k, digest)
	}
	return key.Sign(rand, digest, h)
}
