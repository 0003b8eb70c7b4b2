package sig

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	encasn1 "encoding/asn1"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

var oidRSAEncryption = encasn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 1}

// buildSPKI encodes a SubjectPublicKeyInfo for an RSA key under oid, with the
// given raw parameters (nil: absent).
func buildSPKI(t testing.TB, pub *rsa.PublicKey, oid encasn1.ObjectIdentifier, params []byte) []byte {
	t.Helper()
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oid)
			b.AddBytes(params)
		})
		b.AddASN1BitString(x509.MarshalPKCS1PublicKey(pub))
	})
	der, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// buildPSSPKCS8 encodes a PKCS#8 PrivateKeyInfo with id-RSASSA-PSS.
func buildPSSPKCS8(t testing.TB, k *rsa.PrivateKey, params, trailer []byte) []byte {
	t.Helper()
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1Int64(0)
		b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
			b.AddASN1ObjectIdentifier(oidRSASSAPSS)
			b.AddBytes(params)
		})
		b.AddASN1OctetString(x509.MarshalPKCS1PrivateKey(k))
		b.AddBytes(trailer)
	})
	der, err := b.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return der
}

// sha256PSSParams is RSASSA-PSS-params restricting the key to SHA-256 (as
// `openssl genpkey -pkeyopt rsa_pss_keygen_md:sha256` writes).
var sha256PSSParams = func() []byte {
	var b cryptobyte.Builder
	b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
		b.AddASN1(asn1.Tag(0).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1(asn1.SEQUENCE, func(b *cryptobyte.Builder) {
				b.AddASN1ObjectIdentifier(encasn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1})
			})
		})
		b.AddASN1(asn1.Tag(2).Constructed().ContextSpecific(), func(b *cryptobyte.Builder) {
			b.AddASN1Int64(32)
		})
	})
	return b.BytesOrPanic()
}()

func TestParsePSSSPKI(t *testing.T) {
	k := testpki.NewKey(t, "rsa2048").(*rsa.PrivateKey)
	for _, params := range [][]byte{nil, sha256PSSParams, {0x30, 0x00}} {
		pub, err := parsePSSSPKI(buildSPKI(t, &k.PublicKey, oidRSASSAPSS, params))
		if err != nil {
			t.Fatalf("params %x: %v", params, err)
		}
		if !k.PublicKey.Equal(pub.PublicKey) {
			t.Fatal("parsed key differs")
		}
	}
	good := buildSPKI(t, &k.PublicKey, oidRSASSAPSS, nil)
	bad := map[string][]byte{
		"rsaEncryption":    buildSPKI(t, &k.PublicKey, oidRSAEncryption, []byte{5, 0}),
		"NULL params":      buildSPKI(t, &k.PublicKey, oidRSASSAPSS, []byte{5, 0}),
		"trailing":         append(bytes.Clone(good), 0),
		"empty":            nil,
		"even modulus":     buildSPKI(t, &rsa.PublicKey{N: new(big.Int).SetInt64(1 << 40), E: 65537}, oidRSASSAPSS, nil),
		"even exponent":    buildSPKI(t, &rsa.PublicKey{N: k.N, E: 65536}, oidRSASSAPSS, nil),
		"exponent 1":       buildSPKI(t, &rsa.PublicKey{N: k.N, E: 1}, oidRSASSAPSS, nil),
		"huge modulus":     buildSPKI(t, &rsa.PublicKey{N: new(big.Int).Lsh(new(big.Int).SetInt64(1), 20000).Or(new(big.Int).Lsh(new(big.Int).SetInt64(1), 20000), new(big.Int).SetInt64(1)), E: 3}, oidRSASSAPSS, nil),
		"negative modulus": buildSPKI(t, &rsa.PublicKey{N: new(big.Int).Neg(k.N), E: 65537}, oidRSASSAPSS, nil),
	}
	for i := 1; i < len(good); i++ {
		if _, err := parsePSSSPKI(good[:i]); err == nil {
			t.Fatalf("truncated SPKI (%d of %d bytes) parsed", i, len(good))
		}
	}
	for name, der := range bad {
		if _, err := parsePSSSPKI(der); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
}

func TestParsePSSPrivateKey(t *testing.T) {
	k := testpki.NewKey(t, "rsa2048").(*rsa.PrivateKey)
	for _, params := range [][]byte{nil, sha256PSSParams} {
		for _, trailer := range [][]byte{nil, {0xa0, 0x00}} {
			got, err := ParsePSSPrivateKey(buildPSSPKCS8(t, k, params, trailer))
			if err != nil {
				t.Fatal(err)
			}
			if !got.PrivateKey.Equal(k) {
				t.Fatal("parsed key differs")
			}
		}
	}
	good := buildPSSPKCS8(t, k, nil, nil)
	for i := 1; i < len(good); i += 7 {
		if _, err := ParsePSSPrivateKey(good[:i]); err == nil {
			t.Fatalf("truncated key (%d bytes) parsed", i)
		}
	}
	rsaPKCS8, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	for name, der := range map[string][]byte{
		"rsaEncryption": rsaPKCS8,
		"trailing":      buildPSSPKCS8(t, k, nil, []byte{5, 0}),
		"bad params":    buildPSSPKCS8(t, k, []byte{2, 1, 0}, nil),
	} {
		if _, err := ParsePSSPrivateKey(der); err == nil || !strings.HasPrefix(err.Error(), "sig: ") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func opensslOrSkip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
}

func runOpenSSL(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("openssl", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestPSSKeyFromOpenSSL loads an openssl-made RSASSA-PSS key and certificate,
// signs with every rsa_pss_pss scheme and verifies with the key parsed from
// the certificate; openssl checks our signature and we check openssl's.
func TestPSSKeyFromOpenSSL(t *testing.T) {
	opensslOrSkip(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	certFile, keyFile := ca.IssuePSS(t, dir)

	c, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Key.(PSSPrivateKey); !ok {
		t.Fatalf("key is %T, want PSSPrivateKey", c.Key)
	}
	if _, ok := c.Public.(PSSPublicKey); !ok {
		t.Fatalf("public key is %T, want PSSPublicKey", c.Public)
	}
	pub, err := ParsePublicKey(c.Leaf)
	if err != nil {
		t.Fatal(err)
	}
	if got := SchemesForKey(pub); !slices.Equal(got, []uint16{PSSPSSWithSHA256, PSSPSSWithSHA384, PSSPSSWithSHA512}) {
		t.Fatalf("schemes %v", names(got))
	}
	if s, err := Select(pub, []uint16{PSSWithSHA256, PSSPSSWithSHA256}); err != nil || s != PSSPSSWithSHA256 {
		t.Fatalf("Select = %s, %v", Name(s), err)
	}
	if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost"}); err != nil {
		t.Fatalf("PSS leaf chain: %v", err)
	}

	th := transcript("pss interop")
	for _, s := range SchemesForKey(pub) {
		signature, err := Sign(nil, c.Key, s, ServerContext, th)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(pub, s, ServerContext, th, signature); err != nil {
			t.Fatalf("%s: %v", Name(s), err)
		}
		wantAlert(t, Verify(pub, s-0x0809+0x0804, ServerContext, th, signature), 47, "rsae scheme with the PSS key")
	}

	// Interop on the SHA-256 scheme: openssl verifies ours, we verify openssl's.
	content := filepath.Join(dir, "content")
	if err := os.WriteFile(content, SignedContent(ServerContext, th), 0o600); err != nil {
		t.Fatal(err)
	}
	pubFile := filepath.Join(dir, "pub.pem")
	if err := os.WriteFile(pubFile, runOpenSSL(t, "x509", "-in", certFile, "-noout", "-pubkey"), 0o600); err != nil {
		t.Fatal(err)
	}
	ours, err := Sign(nil, c.Key, PSSPSSWithSHA256, ServerContext, th)
	if err != nil {
		t.Fatal(err)
	}
	oursFile := filepath.Join(dir, "ours.sig")
	if err := os.WriteFile(oursFile, ours, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runOpenSSL(t, "dgst", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32",
		"-verify", pubFile, "-signature", oursFile, content)
	if !strings.Contains(string(out), "Verified OK") {
		t.Fatalf("openssl did not verify our signature: %s", out)
	}
	theirsFile := filepath.Join(dir, "theirs.sig")
	runOpenSSL(t, "dgst", "-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:digest",
		"-sign", keyFile, "-out", theirsFile, content)
	theirs, err := os.ReadFile(theirsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := Verify(pub, PSSPSSWithSHA256, ServerContext, th, theirs); err != nil {
		t.Fatalf("openssl's signature rejected: %v", err)
	}
}

// TestPSSCertificateWithRSAEncryptionKey pairs an id-RSASSA-PSS certificate
// with the same key written as an ordinary rsaEncryption PKCS#8 key: the key
// follows the certificate and becomes a PSSPrivateKey.
func TestPSSCertificateWithRSAEncryptionKey(t *testing.T) {
	opensslOrSkip(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ed25519")
	certFile, keyFile := ca.IssuePSS(t, dir)
	c, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(c.Key.(PSSPrivateKey).PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := ParseKeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c2.Key.(PSSPrivateKey); !ok {
		t.Fatalf("key is %T, want PSSPrivateKey", c2.Key)
	}
	// And a PSS key under an rsaEncryption certificate is used as an RSA key.
	rsaLeaf := ca.Issue(t, testpki.LeafOpts{KeyType: "rsa2048"})
	pssDER := buildPSSPKCS8(t, rsaLeaf.Key.(*rsa.PrivateKey), nil, nil)
	c3, err := ParseKeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: rsaLeaf.Chain[0]}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pssDER}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c3.Key.(*rsa.PrivateKey); !ok {
		t.Fatalf("key is %T, want *rsa.PrivateKey", c3.Key)
	}
	for _, c := range []*Certified{c2, c3} {
		s, err := Select(c.Public, SupportedForCertificateVerify())
		if err != nil {
			t.Fatal(err)
		}
		signature, err := Sign(nil, c.Key, s, ClientContext, transcript("adapt"))
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(c.Public, s, ClientContext, transcript("adapt"), signature); err != nil {
			t.Fatal(err)
		}
	}
}
