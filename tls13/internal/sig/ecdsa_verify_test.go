package sig

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/p256verify"
)

// TestECDSAVerifyPaths: for each ECDSA scheme a CertificateVerify signature
// verifies, and one-bit changes of it (the DER framing, r, s) and a
// signature over another transcript are refused by Verify with the
// verdict crypto/ecdsa.VerifyASN1 gives the same bytes; for P-256 (the
// p256verify path on amd64 with BMI2/ADX outside FIPS 140-3 mode)
// p256verify.Verify gives it too, on whichever of its paths this build has.
func TestECDSAVerifyPaths(t *testing.T) {
	for _, c := range []struct {
		key    string
		scheme uint16
		hash   crypto.Hash
	}{
		{"ecdsa-p256", ECDSAWithP256AndSHA256, crypto.SHA256},
		{"ecdsa-p384", ECDSAWithP384AndSHA384, crypto.SHA384},
		{"ecdsa-p521", ECDSAWithP521AndSHA512, crypto.SHA512},
	} {
		t.Run(c.key, func(t *testing.T) {
			k := testpki.NewKey(t, c.key)
			pub := k.Public().(*ecdsa.PublicKey)
			th := transcript("verify paths " + c.key)
			good, err := Sign(seeded(3), k, c.scheme, ServerContext, th)
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(pub, c.scheme, ServerContext, th, good); err != nil {
				t.Fatalf("a valid signature: %v", err)
			}
			if err := Verify(pub, c.scheme, ServerContext, transcript("another"), good); err == nil {
				t.Fatal("a signature over another transcript verified")
			}
			h := c.hash.New()
			h.Write(SignedContent(ServerContext, th))
			digest := h.Sum(nil)
			step := 1 // every bit for P-256; one a byte for the slower curves
			if c.scheme != ECDSAWithP256AndSHA256 {
				step = 9
			}
			for i := 0; i < len(good)*8; i += step {
				bad := bytes.Clone(good)
				bad[i/8] ^= 1 << (i % 8)
				want := ecdsa.VerifyASN1(pub, digest, bad)
				if got := Verify(pub, c.scheme, ServerContext, th, bad) == nil; got != want {
					t.Fatalf("bit %d flipped: Verify %v, crypto/ecdsa %v", i, got, want)
				}
				if c.scheme == ECDSAWithP256AndSHA256 && p256verify.Verify(pub, digest, bad) != want {
					t.Fatalf("bit %d flipped: p256verify and crypto/ecdsa disagree", i)
				}
			}
		})
	}
}
