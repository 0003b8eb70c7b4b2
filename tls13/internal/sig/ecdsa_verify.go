package sig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/fips140"
	"crypto/sha256"

	"github.com/ztls-project/ztls/tls13/internal/p256verify"
)

// verifyECDSA checks an ASN.1 DER ECDSA signature over digest by pub.
//
// A P-256 key with a SHA-256 digest (ecdsa_secp256r1_sha256, the only
// scheme Verify lets a P-256 key use) goes through p256verify, a
// variable-time verification (its inputs are all public) with the same
// verdicts as crypto/ecdsa.VerifyASN1, 1.28x faster on amd64 with BMI2 and
// ADX. Without those (or with -tags purego) p256verify's Go code is 2.5x
// slower than crypto/ecdsa's own assembly, so it is used only when
// p256verify.Accelerated; every other curve, and everything in FIPS 140-3
// mode, stays with crypto/ecdsa's validated code.
func verifyECDSA(pub *ecdsa.PublicKey, digest, signature []byte) bool {
	if pub.Curve == elliptic.P256() && len(digest) == sha256.Size && p256verify.Accelerated() && !fips140.Enabled() {
		return p256verify.Verify(pub, digest, signature)
	}
	return ecdsa.VerifyASN1(pub, digest, signature)
}
