package sig

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

func writeTemp(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadKeyPairEveryKeyType(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	for _, kt := range testpki.KeyTypes {
		for _, inter := range []bool{false, true} {
			leaf := ca.Issue(t, testpki.LeafOpts{KeyType: kt, Intermediate: inter})
			certFile, keyFile := leaf.WritePEM(t, t.TempDir())
			c, err := LoadKeyPair(certFile, keyFile)
			if err != nil {
				t.Fatalf("%s: %v", kt, err)
			}
			if len(c.Chain) != len(leaf.Chain) || !c.Leaf.Equal(leaf.Cert) {
				t.Fatalf("%s: chain %d certs", kt, len(c.Chain))
			}
			for i := range c.Chain {
				if string(c.Chain[i]) != string(leaf.Chain[i]) {
					t.Fatalf("%s: chain[%d] differs", kt, i)
				}
			}
			s, err := Select(c.Public, SupportedForCertificateVerify())
			if err != nil {
				t.Fatal(err)
			}
			signature, err := Sign(nil, c.Key, s, ServerContext, transcript(kt))
			if err != nil {
				t.Fatal(err)
			}
			if err := Verify(c.Public, s, ServerContext, transcript(kt), signature); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestLoadLegacyKeyFormats: PKCS#1 "RSA PRIVATE KEY" and SEC1 "EC PRIVATE
// KEY" (with the "EC PARAMETERS" block openssl puts before it), and a key file
// that also holds the certificate.
func TestLoadLegacyKeyFormats(t *testing.T) {
	ca := testpki.NewCA(t, "ed25519")
	rsaLeaf := ca.Issue(t, testpki.LeafOpts{KeyType: "rsa2048"})
	ecLeaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p384"})
	sec1, err := x509.MarshalECPrivateKey(ecLeaf.Key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certOf := func(l *testpki.Leaf) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: l.Chain[0]})
	}
	cases := []struct {
		name    string
		cert    []byte
		key     []byte
		keyType any
	}{
		{"pkcs1", certOf(rsaLeaf), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaLeaf.Key.(*rsa.PrivateKey))}), &rsa.PrivateKey{}},
		{"sec1", certOf(ecLeaf), append([]byte("-----BEGIN EC PARAMETERS-----\nBgUrgQQAIg==\n-----END EC PARAMETERS-----\n"),
			pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...), &ecdsa.PrivateKey{}},
		{"combined file", certOf(ecLeaf), append(certOf(ecLeaf), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1})...), &ecdsa.PrivateKey{}},
	}
	for _, c := range cases {
		got, err := ParseKeyPair(c.cert, c.key)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if _, ok := c.keyType.(*rsa.PrivateKey); ok {
			if _, ok := got.Key.(*rsa.PrivateKey); !ok {
				t.Fatalf("%s: key %T", c.name, got.Key)
			}
		} else if _, ok := got.Key.(*ecdsa.PrivateKey); !ok {
			t.Fatalf("%s: key %T", c.name, got.Key)
		}
	}
}

func TestLoadErrorsAreClear(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{})
	other := ca.Issue(t, testpki.LeafOpts{})
	dir := t.TempDir()
	certFile, keyFile := leaf.WritePEM(t, dir)
	_, otherKey := other.WritePEM(t, dir)
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	xDER, err := x509.MarshalPKCS8PrivateKey(x25519)
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	cases := []struct {
		name       string
		cert, key  string
		wantInErrs []string
	}{
		{"missing cert", missing, keyFile, []string{"no such file", "read certificate chain", "missing.pem"}},
		{"missing key", certFile, missing, []string{"no such file", "read private key", "missing.pem"}},
		{"cert not PEM", writeTemp(t, "c.pem", []byte("hello")), keyFile, []string{"no CERTIFICATE block", "c.pem", "want a PEM file"}},
		{"cert is DER", writeTemp(t, "c.der", leaf.Chain[0]), keyFile, []string{"binary DER", "openssl x509 -inform der"}},
		{"cert empty", writeTemp(t, "e.pem", nil), keyFile, []string{"empty"}},
		{"key empty", certFile, writeTemp(t, "k.pem", nil), []string{"no PRIVATE KEY block", "k.pem", "want a PEM file"}},
		{"swapped", keyFile, certFile, []string{"certificate and key files swapped"}},
		{"mismatched", certFile, otherKey, []string{"does not match", "pass the key that belongs"}},
		{"encrypted", certFile, writeTemp(t, "enc.pem", pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: []byte{1}})), []string{"encrypted", "openssl pkey"}},
		{"garbage key", certFile, writeTemp(t, "g.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})), []string{"PRIVATE KEY block in", "g.pem"}},
		{"x25519 key", certFile, writeTemp(t, "x.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: xDER})), []string{"cannot sign"}},
		{"unknown key block", certFile, writeTemp(t, "d.pem", pem.EncodeToMemory(&pem.Block{Type: "DSA PRIVATE KEY", Bytes: []byte{1}})), []string{"unknown key type"}},
		{"garbage cert", writeTemp(t, "gc.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1}})), keyFile, []string{"certificate 1 in"}},
	}
	for _, c := range cases {
		_, err := LoadKeyPair(c.cert, c.key)
		if err == nil {
			t.Errorf("%s: loaded", c.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "sig: ") {
			t.Errorf("%s: %q lacks the sig: prefix", c.name, err)
		}
		if strings.Contains(err.Error(), "--") { // a library error names no CLI flag
			t.Errorf("%s: %q names a command-line flag", c.name, err)
		}
		for _, w := range c.wantInErrs {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}
	// The in-memory form names its inputs generically.
	if _, err := ParseKeyPair(certPEM, nil); err == nil || !strings.Contains(err.Error(), "the key PEM") {
		t.Errorf("ParseKeyPair without key: %v", err)
	}
	if _, err := ParseKeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
}

func TestLoadCertPool(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p384")
	ca2 := testpki.NewCA(t, "ed25519")
	dir := t.TempDir()
	both := writeTemp(t, "both.pem", append(mustRead(t, ca.WritePEM(t, dir)), mustRead(t, ca2.WritePEM(t, dir))...))
	pool, err := LoadCertPool(both)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*testpki.CA{ca, ca2} {
		leaf := c.Issue(t, testpki.LeafOpts{})
		if _, err := leaf.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err != nil {
			t.Fatal(err)
		}
	}
	other := testpki.NewCA(t, "ecdsa-p256").Issue(t, testpki.LeafOpts{})
	if _, err := other.Cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost"}); err == nil {
		t.Fatal("pool trusts a foreign CA")
	}
	for name, want := range map[string]string{
		filepath.Join(dir, "nope.pem"):          "read CA certificates",
		writeTemp(t, "txt.pem", []byte("text")): "no CERTIFICATE block",
	} {
		if _, err := LoadCertPool(name); err == nil || !strings.Contains(err.Error(), want) || !strings.HasPrefix(err.Error(), "sig: ") || strings.Contains(err.Error(), "--") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
