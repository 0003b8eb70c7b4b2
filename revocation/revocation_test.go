package revocation

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// makeCRL signs a CRL for ca revoking serials, valid until next.
func makeCRL(t testing.TB, ca *testpki.CA, next time.Time, serials ...*big.Int) []byte {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: clock.Now().Add(-time.Hour), NextUpdate: next}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: clock.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func parse(t testing.TB, der []byte) *x509.RevocationList {
	t.Helper()
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	return crl
}

func TestCheck(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	good, bad := ca.Issue(t, testpki.LeafOpts{}), ca.Issue(t, testpki.LeafOpts{})
	now := clock.Now()
	c := New(parse(t, makeCRL(t, ca, now.Add(time.Hour), bad.Cert.SerialNumber)))
	if err := c.Check([]*x509.Certificate{good.Cert, ca.Cert}, now); err != nil {
		t.Fatalf("good leaf: %v", err)
	}
	err := c.Check([]*x509.Certificate{bad.Cert, ca.Cert}, now)
	if !errors.Is(err, ErrRevoked) || !strings.Contains(err.Error(), "revoked") {
		t.Fatalf("revoked leaf: %v", err)
	}
	// Several chains: one clean chain is enough; all revoked is not.
	if err := c.CheckAny([][]*x509.Certificate{{bad.Cert, ca.Cert}, {good.Cert, ca.Cert}}, now); err != nil {
		t.Fatalf("CheckAny with a clean chain: %v", err)
	}
	if err := c.CheckAny([][]*x509.Certificate{{bad.Cert, ca.Cert}}, now); !errors.Is(err, ErrRevoked) {
		t.Fatalf("CheckAny: %v", err)
	}
	// Stale CRL: fails closed with a hint.
	stale := New(parse(t, makeCRL(t, ca, now.Add(-time.Minute))))
	if err := stale.Check([]*x509.Certificate{good.Cert, ca.Cert}, now); !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "fresh") {
		t.Fatalf("stale CRL: %v", err)
	}
	// Another CA's CRL does not apply to this chain.
	other := testpki.NewCA(t, "ecdsa-p256")
	if err := New(parse(t, makeCRL(t, other, now.Add(time.Hour), bad.Cert.SerialNumber))).Check([]*x509.Certificate{bad.Cert, ca.Cert}, now); err != nil {
		t.Fatalf("another issuer's CRL applied: %v", err)
	}
	// A CRL claiming this CA as issuer but signed by another key: refused.
	forged := &x509.Certificate{Raw: ca.Cert.Raw, RawSubject: ca.Cert.RawSubject, Subject: ca.Cert.Subject,
		SubjectKeyId: ca.Cert.SubjectKeyId, PublicKey: other.Cert.PublicKey, KeyUsage: x509.KeyUsageCRLSign | x509.KeyUsageCertSign,
		BasicConstraintsValid: true, IsCA: true}
	tmpl := &x509.RevocationList{Number: big.NewInt(2), ThisUpdate: now.Add(-time.Hour), NextUpdate: now.Add(time.Hour)}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, forged, other.Key)
	if err != nil {
		t.Fatal(err)
	}
	if err := New(parse(t, der)).Check([]*x509.Certificate{good.Cert, ca.Cert}, now); err == nil || !strings.Contains(err.Error(), "not signed by it") {
		t.Fatalf("forged CRL: %v", err)
	}
	var nilChecker *Checker
	if nilChecker.Check([]*x509.Certificate{bad.Cert, ca.Cert}, now) != nil || nilChecker.Len() != 0 {
		t.Fatal("a nil Checker must check nothing")
	}
}

func TestLoad(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{})
	der := makeCRL(t, ca, clock.Now().Add(time.Hour), leaf.Cert.SerialNumber)
	dir := t.TempDir()
	derFile, pemFile, junk := filepath.Join(dir, "a.crl"), filepath.Join(dir, "b.pem"), filepath.Join(dir, "c.pem")
	os.WriteFile(derFile, der, 0o600)
	os.WriteFile(pemFile, pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}), 0o600)
	os.WriteFile(junk, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	c, err := Load(derFile, pemFile)
	if err != nil || c.Len() != 2 {
		t.Fatalf("Load: %v, %d CRLs", err, c.Len())
	}
	if err := c.Check([]*x509.Certificate{leaf.Cert, ca.Cert}, clock.Now()); !errors.Is(err, ErrRevoked) {
		t.Fatalf("loaded CRL: %v", err)
	}
	for _, bad := range []string{junk, filepath.Join(dir, "missing"), leafFile(t, dir, leaf)} {
		if _, err := Load(bad); err == nil {
			t.Errorf("Load(%s) accepted", bad)
		}
	}
}

func leafFile(t *testing.T, dir string, l *testpki.Leaf) string {
	p := filepath.Join(dir, "leaf.der")
	os.WriteFile(p, l.Chain[0], 0o600)
	return p
}

// FuzzLoad: any file content gives a Checker or an error, never a panic.
func FuzzLoad(f *testing.F) {
	ca := testpki.NewCA(f, "ecdsa-p256")
	der := makeCRL(f, ca, clock.Now().Add(time.Hour), big.NewInt(7))
	f.Add(der)
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "X509 CRL", Bytes: der}))
	f.Add([]byte("-----BEGIN X509 CRL-----\n-----END X509 CRL-----\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "crl")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err == nil {
			c.Check([]*x509.Certificate{ca.Cert, ca.Cert}, clock.Now())
		}
	})
}
