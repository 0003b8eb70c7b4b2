package sig

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"io"
	"math/big"
	mathrand "math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/alert"
)

func seeded(seed byte) io.Reader {
	var s [32]byte
	s[0] = seed
	return mathrand.NewChaCha8(s)
}

// wantAlert checks err is an *alert.Error carrying a.
func wantAlert(t *testing.T, err error, a alert.Alert, what string) {
	t.Helper()
	var se *alert.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: got %v, want *alert.Error with alert %v", what, err, a)
	}
	if se.Alert != a {
		t.Fatalf("%s: alert %v (%v), want %v", what, se.Alert, err, a)
	}
	if !strings.HasPrefix(err.Error(), "tls13: ") {
		t.Fatalf("%s: %q lacks the tls13: prefix", what, err)
	}
}

type namedKey struct {
	name string
	key  crypto.Signer
}

func testKeys(t *testing.T) []namedKey {
	t.Helper()
	var keys []namedKey
	for _, kt := range testpki.KeyTypes {
		keys = append(keys, namedKey{kt, testpki.NewKey(t, kt)})
	}
	rsaKey := testpki.NewKey(t, "rsa2048").(*rsa.PrivateKey)
	keys = append(keys, namedKey{"rsa-pss", PSSPrivateKey{rsaKey}})
	return keys
}

func transcript(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func TestSignVerifyEveryScheme(t *testing.T) {
	want := map[string][]uint16{
		"ecdsa-p256": {ECDSAWithP256AndSHA256},
		"ecdsa-p384": {ECDSAWithP384AndSHA384},
		"ecdsa-p521": {ECDSAWithP521AndSHA512},
		"ed25519":    {Ed25519},
		"rsa2048":    {PSSWithSHA256, PSSWithSHA384, PSSWithSHA512},
		"rsa-pss":    {PSSPSSWithSHA256, PSSPSSWithSHA384, PSSPSSWithSHA512},
	}
	covered := map[uint16]bool{}
	th := transcript("client hello .. certificate")
	for _, k := range testKeys(t) {
		t.Run(k.name, func(t *testing.T) {
			pub := k.key.Public()
			got := SchemesForKey(pub)
			if !slices.Equal(got, want[k.name]) {
				t.Fatalf("SchemesForKey = %v, want %v", names(got), names(want[k.name]))
			}
			for _, s := range got {
				covered[s] = true
				for _, ctx := range []string{ServerContext, ClientContext} {
					signature, err := Sign(seeded(1), k.key, s, ctx, th)
					if err != nil {
						t.Fatalf("%s: %v", Name(s), err)
					}
					if err := Verify(pub, s, ctx, th, signature); err != nil {
						t.Fatalf("%s: own signature rejected: %v", Name(s), err)
					}
					other := ClientContext
					if ctx == ClientContext {
						other = ServerContext
					}
					wantAlert(t, Verify(pub, s, other, th, signature), 51, Name(s)+" wrong context")
					wantAlert(t, Verify(pub, s, ctx, transcript("other"), signature), 51, Name(s)+" wrong transcript")
					for _, bit := range []int{0, len(signature)*8/2 + 3, len(signature)*8 - 1} {
						bad := bytes.Clone(signature)
						bad[bit/8] ^= 1 << (bit % 8)
						wantAlert(t, Verify(pub, s, ctx, th, bad), 51, Name(s)+" flipped bit")
					}
					wantAlert(t, Verify(pub, s, ctx, th, nil), 51, Name(s)+" empty signature")
					wantAlert(t, Verify(pub, s, ctx, th, append(signature, 0)), 51, Name(s)+" long signature")
				}
			}
		})
	}
	for _, s := range SupportedForCertificateVerify() {
		if !covered[s] {
			t.Errorf("scheme %s not exercised", Name(s))
		}
	}
}

// TestMismatchedSchemes: every CertificateVerify scheme a key cannot make is
// refused by Sign and, with a real signature of another scheme, by Verify
// with illegal_parameter.
func TestMismatchedSchemes(t *testing.T) {
	th := transcript("mismatch")
	for _, k := range testKeys(t) {
		pub := k.key.Public()
		own := SchemesForKey(pub)
		signature, err := Sign(seeded(2), k.key, own[0], ServerContext, th)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range SupportedForCertificateVerify() {
			if slices.Contains(own, s) {
				continue
			}
			if _, err := Sign(seeded(2), k.key, s, ServerContext, th); err == nil || !strings.HasPrefix(err.Error(), "sig: ") {
				t.Errorf("%s key signed with %s: %v", k.name, Name(s), err)
			}
			wantAlert(t, Verify(pub, s, ServerContext, th, signature), 47, k.name+" verify "+Name(s))
		}
	}
}

func TestForbiddenAndUnknownSchemes(t *testing.T) {
	th := transcript("forbidden")
	rsaKey := testpki.NewKey(t, "rsa2048")
	ecKey := testpki.NewKey(t, "ecdsa-p256")
	for _, s := range []uint16{PKCS1WithSHA256, PKCS1WithSHA384, PKCS1WithSHA512, PKCS1WithSHA1} {
		wantAlert(t, Verify(rsaKey.Public(), s, ServerContext, th, make([]byte, 256)), 47, Name(s))
		if _, err := Sign(nil, rsaKey, s, ServerContext, th); err == nil {
			t.Errorf("signed CertificateVerify with %s", Name(s))
		}
	}
	wantAlert(t, Verify(ecKey.Public(), ECDSAWithSHA1, ServerContext, th, make([]byte, 70)), 47, "ecdsa_sha1")
	wantAlert(t, Verify(ecKey.Public(), 0x0000, ServerContext, th, nil), 47, "unknown scheme")
	wantAlert(t, Verify("not a key", ECDSAWithP256AndSHA256, ServerContext, th, nil), 43, "string key with ecdsa scheme")
	wantAlert(t, Verify("not a key", PSSWithSHA256, ServerContext, th, nil), 43, "string key with rsa scheme")
	wantAlert(t, Verify(ed25519.PublicKey(make([]byte, 5)), Ed25519, ServerContext, th, make([]byte, 64)), 42, "short ed25519 key")
	wantAlert(t, Verify((*ecdsa.PublicKey)(nil), ECDSAWithP256AndSHA256, ServerContext, th, nil), 47, "nil ecdsa key")
	if _, err := Sign(nil, nil, Ed25519, ServerContext, th); err == nil {
		t.Fatal("nil key signed")
	}
}

func TestRSAKeySizes(t *testing.T) {
	// A 768-bit modulus (any odd number will do: Verify must refuse it before
	// doing arithmetic).
	small := &rsa.PublicKey{N: new(big.Int).SetBit(big.NewInt(1), 767, 1), E: 65537}
	if SchemesForKey(small) != nil {
		t.Fatal("schemes offered for a 768-bit RSA key")
	}
	wantAlert(t, Verify(small, PSSWithSHA256, ServerContext, transcript("x"), make([]byte, 96)), 42, "768-bit key")
	wantAlert(t, Verify(PSSPublicKey{small}, PSSPSSWithSHA256, ServerContext, transcript("x"), make([]byte, 96)), 42, "768-bit PSS key")
	// A 1024-bit key fits SHA-256 and SHA-384 with a hash-length salt, not SHA-512.
	k1024 := &rsa.PublicKey{N: new(big.Int).SetBit(big.NewInt(1), 1023, 1), E: 65537}
	if got := SchemesForKey(k1024); !slices.Equal(got, []uint16{PSSWithSHA256, PSSWithSHA384}) {
		t.Fatalf("1024-bit schemes %v", names(got))
	}
}

func TestSelect(t *testing.T) {
	ec := testpki.NewKey(t, "ecdsa-p256").Public()
	rsaPub := testpki.NewKey(t, "rsa2048").Public()
	pssPub := PSSPublicKey{rsaPub.(*rsa.PublicKey)}
	ed := testpki.NewKey(t, "ed25519").Public()
	cases := []struct {
		name string
		pub  crypto.PublicKey
		peer []uint16
		want uint16
	}{
		{"ecdsa", ec, []uint16{PSSWithSHA256, ECDSAWithP384AndSHA384, ECDSAWithP256AndSHA256}, ECDSAWithP256AndSHA256},
		{"rsa prefers sha256", rsaPub, []uint16{PSSWithSHA512, PSSWithSHA384, PSSWithSHA256}, PSSWithSHA256},
		{"rsa takes what it can", rsaPub, []uint16{PKCS1WithSHA256, PSSWithSHA512}, PSSWithSHA512},
		{"pss key", pssPub, []uint16{PSSWithSHA256, PSSPSSWithSHA384}, PSSPSSWithSHA384},
		{"pss key pointer", &pssPub, []uint16{PSSPSSWithSHA256}, PSSPSSWithSHA256},
		{"ed25519", ed, SupportedForCertificateVerify(), Ed25519},
	}
	for _, c := range cases {
		got, err := Select(c.pub, c.peer)
		if err != nil || got != c.want {
			t.Errorf("%s: Select = %s, %v; want %s", c.name, Name(got), err, Name(c.want))
		}
	}
	_, err := Select(ec, []uint16{PSSWithSHA256, ECDSAWithP384AndSHA384})
	wantAlert(t, err, 40, "no overlap")
	if !strings.Contains(err.Error(), "ECDSA P-256") {
		t.Errorf("error does not name the key: %v", err)
	}
	_, err = Select(rsaPub, nil)
	wantAlert(t, err, 40, "empty peer list")
	_, err = Select(pssPub, []uint16{PSSWithSHA256, PSSWithSHA384, PSSWithSHA512})
	wantAlert(t, err, 40, "pss key, rsae only")
}

func TestSignedContent(t *testing.T) {
	th := bytes.Repeat([]byte{0xab}, 48)
	got := SignedContent(ServerContext, th)
	want := append(append(append(bytes.Repeat([]byte{' '}, 64), "TLS 1.3, server CertificateVerify"...), 0), th...)
	if !bytes.Equal(got, want) {
		t.Fatalf("SignedContent = %x", got)
	}
	if len(SignedContent(ClientContext, nil)) != 64+33+1 {
		t.Fatal("client content length")
	}
}

func TestNamesAndLists(t *testing.T) {
	want := map[uint16]string{
		0x0403: "ecdsa_secp256r1_sha256", 0x0503: "ecdsa_secp384r1_sha384", 0x0603: "ecdsa_secp521r1_sha512",
		0x0807: "ed25519", 0x0804: "rsa_pss_rsae_sha256", 0x0805: "rsa_pss_rsae_sha384", 0x0806: "rsa_pss_rsae_sha512",
		0x0809: "rsa_pss_pss_sha256", 0x080a: "rsa_pss_pss_sha384", 0x080b: "rsa_pss_pss_sha512",
		0x0401: "rsa_pkcs1_sha256", 0x0501: "rsa_pkcs1_sha384", 0x0601: "rsa_pkcs1_sha512",
		0x0201: "rsa_pkcs1_sha1", 0x0203: "ecdsa_sha1", 0x1234: "0x1234",
	}
	for s, n := range want {
		if Name(s) != n {
			t.Errorf("Name(%#04x) = %q, want %q", s, Name(s), n)
		}
	}
	cv := SupportedForCertificateVerify()
	wantCV := []uint16{0x0807, 0x0403, 0x0503, 0x0603, 0x0804, 0x0805, 0x0806, 0x0809, 0x080a, 0x080b}
	if !slices.Equal(cv, wantCV) {
		t.Fatalf("SupportedForCertificateVerify = %v", names(cv))
	}
	certs := SupportedForCertificates()
	if !slices.Equal(certs, append(wantCV, 0x0401, 0x0501, 0x0601)) {
		t.Fatalf("SupportedForCertificates = %v", names(certs))
	}
	cv[0] = 0
	if SupportedForCertificateVerify()[0] != Ed25519 {
		t.Fatal("list shares its backing array")
	}
}

// opaqueSigner hides the concrete key type, as a hardware signer would.
type opaqueSigner struct{ k crypto.Signer }

func (o opaqueSigner) Public() crypto.PublicKey { return o.k.Public() }
func (o opaqueSigner) Sign(r io.Reader, d []byte, opts crypto.SignerOpts) ([]byte, error) {
	return o.k.Sign(r, d, opts)
}

func TestPSSDeterminismAndOpaqueSigners(t *testing.T) {
	rsaKey := testpki.NewKey(t, "rsa2048")
	th := transcript("determinism")
	for _, key := range []crypto.Signer{rsaKey, opaqueSigner{rsaKey}} {
		a, err := Sign(seeded(5), key, PSSWithSHA384, ServerContext, th)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Sign(seeded(5), key, PSSWithSHA384, ServerContext, th)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Sign(seeded(6), key, PSSWithSHA384, ServerContext, th)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) || bytes.Equal(a, c) {
			t.Fatal("PSS signatures do not follow the reader")
		}
	}
	pss := PSSPrivateKey{rsaKey.(*rsa.PrivateKey)}
	for _, key := range []crypto.Signer{pss, &pss, opaqueSigner{pss}} {
		s, err := Sign(seeded(5), key, PSSPSSWithSHA256, ClientContext, th)
		if err != nil {
			t.Fatal(err)
		}
		if err := Verify(pss.Public(), PSSPSSWithSHA256, ClientContext, th, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pss.Sign(nil, th, crypto.SHA256); err == nil {
		t.Fatal("PSS key made a PKCS#1 v1.5 signature")
	}
	if !pss.Equal(&pss) || pss.Equal(rsaKey) || !pss.Public().(PSSPublicKey).Equal(pss.Public()) ||
		pss.Public().(PSSPublicKey).Equal(rsaKey.Public()) {
		t.Fatal("PSS key equality")
	}
	// An ordinary RSA signature does not pass as rsa_pss_pss, nor the reverse.
	s, err := Sign(seeded(5), rsaKey, PSSWithSHA256, ServerContext, th)
	if err != nil {
		t.Fatal(err)
	}
	wantAlert(t, Verify(pss.Public(), PSSWithSHA256, ServerContext, th, s), 47, "rsae scheme, PSS key")
	wantAlert(t, Verify(rsaKey.Public(), PSSPSSWithSHA256, ServerContext, th, s), 47, "pss scheme, RSA key")
}

func BenchmarkSign(b *testing.B) {
	th := transcript("bench")
	for _, c := range []struct {
		kt     string
		scheme uint16
	}{{"ecdsa-p256", ECDSAWithP256AndSHA256}, {"ed25519", Ed25519}, {"rsa2048", PSSWithSHA256}} {
		key := testpki.NewKey(b, c.kt)
		b.Run(c.kt, func(b *testing.B) {
			for b.Loop() {
				if _, err := Sign(nil, key, c.scheme, ServerContext, th); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	th := transcript("bench")
	for _, c := range []struct {
		kt     string
		scheme uint16
	}{{"ecdsa-p256", ECDSAWithP256AndSHA256}, {"ed25519", Ed25519}, {"rsa2048", PSSWithSHA256}} {
		key := testpki.NewKey(b, c.kt)
		s, err := Sign(nil, key, c.scheme, ServerContext, th)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.kt, func(b *testing.B) {
			for b.Loop() {
				if err := Verify(key.Public(), c.scheme, ServerContext, th, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
