package tls13

import (
	"crypto/rand"
	"crypto/x509"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/revocation"
)

// revoking returns a Checker whose CRL, signed by p's CA, revokes serials.
func revoking(t *testing.T, p *testPKI, serials ...*big.Int) *revocation.Checker {
	t.Helper()
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: clock.Now().Add(-time.Hour), NextUpdate: clock.Now().Add(time.Hour)}
	for _, s := range serials {
		tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
			x509.RevocationListEntry{SerialNumber: s, RevocationTime: clock.Now().Add(-time.Minute)})
	}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, p.ca.Cert, p.ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	crl, err := x509.ParseRevocationList(der)
	if err != nil {
		t.Fatal(err)
	}
	return revocation.New(crl)
}

// TestRevokedPeerCertificate: a client holding a CRL that revokes the
// server's certificate refuses the handshake with certificate_revoked, as
// does a server requiring client certificates whose CRL revokes the
// client's; a CRL revoking other serials changes nothing.
func TestRevokedPeerCertificate(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	revokedAlert := func(err error) bool {
		var le *LocalError
		return errors.As(err, &le) && le.Alert == AlertCertificateRevoked && errors.Is(err, revocation.ErrRevoked)
	}

	ccfg, scfg := clientConfig(p), serverConfig(p)
	ccfg.Revocation = revoking(t, p, p.server.Leaf.SerialNumber)
	if _, _, _, _, err := enginePair(ccfg, scfg, nil); !revokedAlert(err) {
		t.Fatalf("client with the server's certificate revoked: %v", err)
	}

	ccfg.Revocation = revoking(t, p, big.NewInt(424242))
	if _, _, _, _, err := enginePair(ccfg, scfg, nil); err != nil {
		t.Fatalf("unrelated CRL: %v", err)
	}

	ccfg, scfg = clientConfig(p), serverConfig(p)
	ccfg.Certificates = []Certificate{p.client}
	scfg.ClientAuth, scfg.ClientCAs = RequireAndVerifyClientCert, p.pool()
	scfg.Revocation = revoking(t, p, p.client.Leaf.SerialNumber)
	if _, _, _, _, err := enginePair(ccfg, scfg, nil); !revokedAlert(err) {
		t.Fatalf("server with the client's certificate revoked: %v", err)
	}
	scfg.Revocation = nil
	if _, _, _, _, err := enginePair(ccfg, scfg, nil); err != nil {
		t.Fatalf("client certificate without CRL: %v", err)
	}
}
