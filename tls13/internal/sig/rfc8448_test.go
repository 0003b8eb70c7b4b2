package sig

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"math/big"
	"slices"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/rfc8448"
)

// rfc8448Key builds the server's RSA key of RFC 8448, Section 2.
func rfc8448Key(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	num := func(label string) *big.Int { return new(big.Int).SetBytes(rfc8448.Must(t, "2/rsa."+label)) }
	k := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: num("modulus"), E: int(num("public_exponent").Int64())},
		D:         num("private_exponent"),
		Primes:    []*big.Int{num("prime1"), num("prime2")},
	}
	if err := k.Validate(); err != nil {
		t.Fatalf("RFC 8448 key: %v", err)
	}
	k.Precompute()
	return k
}

// rfc8448CertificateVerify returns the server's certificate, the transcript
// hash CertificateVerify signs (ClientHello..Certificate, RFC 8446, Section
// 4.4.3) and the scheme and signature of RFC 8448, Section 3.
func rfc8448CertificateVerify(t *testing.T) (cert *x509.Certificate, th []byte, scheme uint16, signature []byte) {
	t.Helper()
	h := sha256.New()
	for _, label := range []string{"client.hello", "server.hello", "server.encrypted_extensions", "server.certificate"} {
		h.Write(rfc8448.Must(t, "3/"+label))
	}
	th = h.Sum(nil)
	// RFC 8446, Section 4.4.3: struct { SignatureScheme algorithm; opaque signature<0..2^16-1>; }
	cv := rfc8448.Must(t, "3/server.certificate_verify")
	if cv[0] != 15 || int(cv[1])<<16|int(cv[2])<<8|int(cv[3]) != len(cv)-4 {
		t.Fatal("CertificateVerify header")
	}
	scheme = uint16(cv[4])<<8 | uint16(cv[5])
	n := int(cv[6])<<8 | int(cv[7])
	signature = cv[8:]
	if len(signature) != n {
		t.Fatal("CertificateVerify signature length")
	}
	cert, err := x509.ParseCertificate(rfc8448.Must(t, "3/server.certificate.cert_data"))
	if err != nil {
		t.Fatal(err)
	}
	return cert, th, scheme, signature
}

func TestRFC8448CertificateVerify(t *testing.T) {
	key := rfc8448Key(t)
	cert, th, scheme, signature := rfc8448CertificateVerify(t)
	if scheme != PSSWithSHA256 {
		t.Fatalf("scheme %s", Name(scheme))
	}
	pub, err := ParsePublicKey(cert)
	if err != nil {
		t.Fatal(err)
	}
	if !key.PublicKey.Equal(pub) {
		t.Fatal("certificate key is not the Section 2 key")
	}
	if got := SchemesForKey(pub); !slices.Equal(got, []uint16{PSSWithSHA256, PSSWithSHA384}) {
		t.Fatalf("1024-bit key schemes %v", names(got))
	}
	if err := Verify(pub, scheme, ServerContext, th, signature); err != nil {
		t.Fatalf("RFC 8448 CertificateVerify rejected: %v", err)
	}
	for _, bit := range []int{0, 7, 500, len(signature)*8 - 1} {
		bad := bytes.Clone(signature)
		bad[bit/8] ^= 1 << (bit % 8)
		wantAlert(t, Verify(pub, scheme, ServerContext, th, bad), 51, "flipped signature bit")
	}
	badTH := bytes.Clone(th)
	badTH[0] ^= 0x80
	wantAlert(t, Verify(pub, scheme, ServerContext, badTH, signature), 51, "flipped transcript bit")
	wantAlert(t, Verify(pub, scheme, ClientContext, th, signature), 51, "client context")
	wantAlert(t, Verify(pub, PSSPSSWithSHA256, ServerContext, th, signature), 47, "rsa_pss_pss scheme")
}

// TestRFC8448SignatureReproduced recovers the PSS salt of the RFC's signature
// and shows that Sign, fed that salt as its randomness, makes the same bytes.
func TestRFC8448SignatureReproduced(t *testing.T) {
	key := rfc8448Key(t)
	_, th, scheme, signature := rfc8448CertificateVerify(t)
	digest := sha256.Sum256(SignedContent(ServerContext, th))
	salt, err := RecoverPSSSalt(&key.PublicKey, crypto.SHA256, digest[:], signature)
	if err != nil {
		t.Fatal(err)
	}
	if len(salt) != sha256.Size {
		t.Fatalf("salt is %d bytes, want %d (RFC 8446: salt length = hash length)", len(salt), sha256.Size)
	}
	got, err := Sign(bytes.NewReader(salt), key, scheme, ServerContext, th)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, signature) {
		t.Fatalf("reproduced signature differs:\n got %x\nwant %x", got, signature)
	}

	bad := bytes.Clone(signature)
	bad[10] ^= 1
	if _, err := RecoverPSSSalt(&key.PublicKey, crypto.SHA256, digest[:], bad); err == nil {
		t.Fatal("salt recovered from a corrupted signature")
	}
	otherDigest := sha256.Sum256([]byte("other"))
	if _, err := RecoverPSSSalt(&key.PublicKey, crypto.SHA256, otherDigest[:], signature); err == nil {
		t.Fatal("salt recovered for the wrong digest")
	}
	if _, err := RecoverPSSSalt(&key.PublicKey, crypto.SHA256, digest[:], signature[1:]); err == nil {
		t.Fatal("salt recovered from a short signature")
	}
	if _, err := RecoverPSSSalt(&key.PublicKey, crypto.SHA384, digest[:], signature); err == nil {
		t.Fatal("salt recovered with a mismatched hash")
	}
	if _, err := RecoverPSSSalt(&rsa.PublicKey{}, crypto.SHA256, digest[:], signature); err == nil {
		t.Fatal("salt recovered with an empty key")
	}
}

// TestRecoverPSSSaltOwnSignatures checks the recovery for each hash on a
// 1024-bit key and on a 1033-bit key, whose encoded message is one byte
// shorter than the signature (RFC 8017, Section 9.1.2: emLen < k).
func TestRecoverPSSSaltOwnSignatures(t *testing.T) {
	odd, err := rsa.GenerateKey(rand.Reader, 1033)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []*rsa.PrivateKey{rfc8448Key(t), odd} {
		recoverOwnSalts(t, key)
	}
}

func recoverOwnSalts(t *testing.T, key *rsa.PrivateKey) {
	th := transcript("recover")
	for _, s := range SchemesForKey(&key.PublicKey) {
		want := make([]byte, schemes[s].hash.Size())
		for i := range want {
			want[i] = byte(i * 7)
		}
		signature, err := Sign(bytes.NewReader(want), key, s, ClientContext, th)
		if err != nil {
			t.Fatal(err)
		}
		h := schemes[s].hash.New()
		h.Write(SignedContent(ClientContext, th))
		got, err := RecoverPSSSalt(&key.PublicKey, schemes[s].hash, h.Sum(nil), signature)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: salt %x, %v", Name(s), got, err)
		}
	}
}
