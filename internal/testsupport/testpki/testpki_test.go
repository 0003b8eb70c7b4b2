package testpki

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

func verify(t *testing.T, ca *CA, l *Leaf, host string, usage x509.ExtKeyUsage) error {
	t.Helper()
	inter := x509.NewCertPool()
	for _, der := range l.Chain[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		inter.AddCert(c)
	}
	_, err := l.Cert.Verify(x509.VerifyOptions{
		Roots: ca.Pool(), Intermediates: inter, DNSName: host,
		KeyUsages: []x509.ExtKeyUsage{usage},
	})
	return err
}

func samePublic(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

func TestEveryKeyTypeVerifies(t *testing.T) {
	for _, caType := range KeyTypes {
		ca := NewCA(t, caType)
		if !ca.Cert.IsCA || !bytes.Equal(ca.Cert.Raw, ca.DER) {
			t.Fatalf("%s: CA certificate malformed", caType)
		}
		for _, leafType := range KeyTypes {
			l := ca.Issue(t, LeafOpts{KeyType: leafType})
			for _, host := range []string{"localhost", "server.test", "127.0.0.1", "::1"} {
				if err := verify(t, ca, l, host, x509.ExtKeyUsageServerAuth); err != nil {
					t.Errorf("CA %s leaf %s host %s: %v", caType, leafType, host, err)
				}
			}
			if err := verify(t, ca, l, "other.test", x509.ExtKeyUsageServerAuth); err == nil {
				t.Errorf("CA %s leaf %s: verified for a name it does not carry", caType, leafType)
			}
			if !samePublic(l.Cert.PublicKey, l.Key.Public()) {
				t.Errorf("leaf %s: key does not match certificate", leafType)
			}
		}
	}
}

func TestRSAKeysAreCachedButDistinctPerRole(t *testing.T) {
	ca := NewCA(t, "rsa2048")
	l := ca.Issue(t, LeafOpts{KeyType: "rsa2048"})
	l2 := ca.Issue(t, LeafOpts{KeyType: "rsa2048"})
	if samePublic(ca.Cert.PublicKey, l.Cert.PublicKey) {
		t.Fatal("CA and leaf share an RSA key")
	}
	if !samePublic(l.Cert.PublicKey, l2.Cert.PublicKey) {
		t.Fatal("leaf RSA key was not cached")
	}
}

func TestIntermediateClientAndValidity(t *testing.T) {
	ca := NewCA(t, "ecdsa-p384")
	l := ca.Issue(t, LeafOpts{Intermediate: true, Client: true, DNSNames: []string{"client.test"}})
	if len(l.Chain) != 2 {
		t.Fatalf("chain has %d certificates, want 2", len(l.Chain))
	}
	if err := verify(t, ca, l, "client.test", x509.ExtKeyUsageClientAuth); err != nil {
		t.Fatal(err)
	}
	if l.Cert.Subject.CommonName != "client.test" || len(l.Cert.IPAddresses) != 0 {
		t.Fatalf("subject %q IPs %v", l.Cert.Subject.CommonName, l.Cert.IPAddresses)
	}
	// Without the intermediate the leaf does not chain.
	if _, err := l.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "client.test"}); err == nil {
		t.Fatal("leaf verified without its intermediate")
	}
	server := ca.Issue(t, LeafOpts{})
	if err := verify(t, ca, server, "localhost", x509.ExtKeyUsageClientAuth); err == nil {
		t.Fatal("server-only leaf verified for clientAuth")
	}

	past := clock.Now().Add(-48 * time.Hour)
	expired := ca.Issue(t, LeafOpts{NotBefore: past, NotAfter: past.Add(time.Hour), IPs: []net.IP{net.IPv4(127, 0, 0, 2)}})
	if err := verify(t, ca, expired, "127.0.0.2", x509.ExtKeyUsageServerAuth); err == nil {
		t.Fatal("expired leaf verified")
	}
	d := server.Cert.NotAfter.Sub(server.Cert.NotBefore)
	if d != 25*time.Hour {
		t.Fatalf("default validity %v, want 25h (now-1h .. now+24h)", d)
	}
}

func TestWritePEMWithOpenSSL(t *testing.T) {
	dir := t.TempDir()
	ca := NewCA(t, "ed25519")
	l := ca.Issue(t, LeafOpts{Intermediate: true})
	certFile, keyFile := l.WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)

	data, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	for rest := data; ; n++ {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if !bytes.Equal(b.Bytes, l.Chain[n]) {
			t.Fatalf("certificate %d differs from Chain", n)
		}
	}
	if n != 2 {
		t.Fatalf("%d certificates written, want 2", n)
	}
	st, err := os.Stat(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		t.Fatalf("key file mode %v is readable by others", st.Mode())
	}
	keyData, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := pem.Decode(keyData)
	if b == nil || b.Type != "PRIVATE KEY" {
		t.Fatal("key is not PKCS#8 PEM")
	}
	k, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !l.Key.(interface{ Equal(crypto.PrivateKey) bool }).Equal(k) {
		t.Fatal("written key differs")
	}

	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl not installed")
	}
	// openssl verifies the chain file against the CA file: leaf first, intermediate as untrusted.
	out, err := exec.Command("openssl", "verify", "-CAfile", caFile, "-untrusted", certFile, certFile).CombinedOutput()
	if err != nil || !strings.Contains(string(out), ": OK") {
		t.Fatalf("openssl verify: %v\n%s", err, out)
	}
}

func TestIssuePSS(t *testing.T) {
	dir := t.TempDir()
	for _, caType := range []string{"ecdsa-p256", "rsa2048", "ed25519"} {
		ca := NewCA(t, caType)
		certFile, keyFile := ca.IssuePSS(t, dir)
		data, err := os.ReadFile(certFile)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := pem.Decode(data)
		if b == nil {
			t.Fatal("no PEM certificate")
		}
		cert, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatalf("Go cannot parse the PSS certificate: %v", err)
		}
		if cert.PublicKey != nil {
			t.Fatalf("expected an id-RSASSA-PSS key Go does not understand, got %T", cert.PublicKey)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "server.test"}); err != nil {
			t.Fatalf("CA %s: PSS leaf does not verify: %v", caType, err)
		}
		kd, err := os.ReadFile(keyFile)
		if err != nil {
			t.Fatal(err)
		}
		if kb, _ := pem.Decode(kd); kb == nil || kb.Type != "PRIVATE KEY" {
			t.Fatal("PSS key is not PKCS#8 PEM")
		}
		out, err := exec.Command("openssl", "x509", "-in", certFile, "-noout", "-text").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "rsassaPss") {
			t.Fatalf("openssl does not see an RSASSA-PSS key: %v\n%s", err, out)
		}
	}
}

func BenchmarkIssue(b *testing.B) {
	ca := NewCA(b, "ecdsa-p256")
	for b.Loop() {
		ca.Issue(b, LeafOpts{})
	}
}

// TestDeeperChains: up to three intermediates of either key type, nearest
// the leaf first in Chain, each signed by the one above, and the chain
// verifies under the root's path length constraint.
func TestDeeperChains(t *testing.T) {
	for _, kt := range []string{"ecdsa-p256", "rsa2048"} {
		ca := NewCA(t, kt)
		for n := 1; n <= 3; n++ {
			l := ca.Issue(t, LeafOpts{KeyType: kt, Intermediates: n, IntermediateKeyType: kt})
			if len(l.Chain) != n+1 {
				t.Fatalf("%s, %d intermediates: chain of %d", kt, n, len(l.Chain))
			}
			for i, der := range l.Chain[1:] {
				c, err := x509.ParseCertificate(der)
				if err != nil {
					t.Fatal(err)
				}
				if !c.IsCA || c.PublicKeyAlgorithm.String() != l.Cert.PublicKeyAlgorithm.String() {
					t.Fatalf("%s: intermediate %d: CA %v, key %v", kt, i, c.IsCA, c.PublicKeyAlgorithm)
				}
				if i == 0 {
					if err := l.Cert.CheckSignatureFrom(c); err != nil {
						t.Fatalf("%s: the leaf is not signed by the first intermediate: %v", kt, err)
					}
				}
			}
			if err := verify(t, ca, l, "localhost", x509.ExtKeyUsageServerAuth); err != nil {
				t.Fatalf("%s, %d intermediates: %v", kt, n, err)
			}
		}
	}
}
