package sig

import "crypto/ecdsa"

// verifyECDSA checks an ASN.1 DER ECDSA signature over digest by pub.
func verifyECDSA(pub *ecdsa.PublicKey, digest, signature []byte) bool {
	return ecdsa.VerifyASN1(pub, digest, signature)
}
