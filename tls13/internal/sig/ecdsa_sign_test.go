package sig

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/fips140"
	"crypto/sha256"
	"io"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/p256sign"
)

// countingSigner is an opaque crypto.Signer (as a hardware key is) that
// counts the signatures it makes.
type countingSigner struct {
	k     crypto.Signer
	calls *int
}

func (c countingSigner) Public() crypto.PublicKey { return c.k.Public() }
func (c countingSigner) Sign(r io.Reader, d []byte, opts crypto.SignerOpts) ([]byte, error) {
	*c.calls++
	return c.k.Sign(r, d, opts)
}

// TestECDSASignPaths: a software P-256 key signs ecdsa_secp256r1_sha256
// through p256sign (the same bytes as p256sign.Sign with the same
// randomness, so the reader decides the signature, which crypto/ecdsa's does
// not); opaque signers and other curves go through their own Sign. Every
// signature verifies.
func TestECDSASignPaths(t *testing.T) {
	th := transcript("ecdsa paths")
	p256 := testpki.NewKey(t, "ecdsa-p256")
	a, err := Sign(seeded(7), p256, ECDSAWithP256AndSHA256, ServerContext, th)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(p256.Public(), ECDSAWithP256AndSHA256, ServerContext, th, a); err != nil {
		t.Fatal(err)
	}
	b, err := Sign(seeded(7), p256, ECDSAWithP256AndSHA256, ServerContext, th)
	if err != nil {
		t.Fatal(err)
	}
	digest := sha256.Sum256(SignedContent(ServerContext, th))
	direct, err := p256sign.Sign(seeded(7), p256.(*ecdsa.PrivateKey), digest[:])
	if err != nil {
		t.Fatal(err)
	}
	if fips140.Enabled() {
		if bytes.Equal(a, b) {
			t.Fatal("FIPS 140-3 mode: two signatures are equal, so they did not come from crypto/ecdsa")
		}
	} else if !bytes.Equal(a, b) || !bytes.Equal(a, direct) {
		t.Fatal("a software P-256 key's signature did not come from p256sign")
	}
	for _, c := range []struct {
		kt     string
		scheme uint16
		opaque bool
	}{
		{"ecdsa-p256", ECDSAWithP256AndSHA256, true},
		{"ecdsa-p384", ECDSAWithP384AndSHA384, true},
		{"ecdsa-p521", ECDSAWithP521AndSHA512, true},
		{"ecdsa-p384", ECDSAWithP384AndSHA384, false},
	} {
		key := testpki.NewKey(t, c.kt)
		calls := 0
		signer := key
		if c.opaque {
			signer = countingSigner{key, &calls}
		}
		s, err := Sign(seeded(7), signer, c.scheme, ClientContext, th)
		if err != nil {
			t.Fatalf("%s: %v", c.kt, err)
		}
		if err := Verify(key.Public(), c.scheme, ClientContext, th, s); err != nil {
			t.Fatalf("%s: %v", c.kt, err)
		}
		if c.opaque && calls != 1 {
			t.Fatalf("%s behind an opaque signer: its Sign ran %d times, want 1", c.kt, calls)
		}
	}
}

// TestECDSAP256ManyKeys: signatures of many fresh P-256 keys over many
// transcripts all verify with Verify (crypto/ecdsa underneath).
func TestECDSAP256ManyKeys(t *testing.T) {
	for i := range 50 {
		key := testpki.NewKey(t, "ecdsa-p256")
		th := transcript(string(rune('a' + i%26)))
		s, err := Sign(nil, key, ECDSAWithP256AndSHA256, ServerContext, th)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(key.Public(), ECDSAWithP256AndSHA256, ServerContext, th, s); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}
