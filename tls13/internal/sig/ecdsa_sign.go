package sig

import (
	"crypto"
	"io"
)

// signECDSA makes an ECDSA signature over digest (already hashed with h) with
// key, ASN.1 DER encoded as RFC 8446, Section 4.2.3 requires.
func signECDSA(rand io.Reader, key crypto.Signer, h crypto.Hash, digest []byte) ([]byte, error) {
	return key.Sign(rand, digest, h)
}
