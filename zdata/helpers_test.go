package zdata

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// selectOne is a Selector used once: the TLSA and CERT records, then
// the TXT records, with roots at now.
func selectOne(txt [][]string, tlsa []*dns.TLSA, cert []*dns.CERT, host string, port int, roots *x509.CertPool, now time.Time) (*Record, *x509.Certificate, error) {
	sel := NewSelector(host, port, SelectOptions{Roots: roots, Now: now})
	sel.StartChains(tlsa, cert)
	return sel.Select(txt)
}

const (
	testHost = "server.test"
	testPort = 443
)

// fixture is a CA, a leaf for server.test and a Service signing with it.
type fixture struct {
	ca   *testpki.CA
	leaf *testpki.Leaf
	svc  *Service
}

func newFixture(t testing.TB, keyType string, opts Options, seed []byte) *fixture {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, DNSNames: []string{testHost, "other.test"},
		NotBefore: clock.Now().Add(-48 * time.Hour), NotAfter: clock.Now().Add(48 * time.Hour)})
	return newFixtureWith(t, ca, leaf, opts, seed)
}

func newFixtureWith(t testing.TB, ca *testpki.CA, leaf *testpki.Leaf, opts Options, seed []byte) *fixture {
	t.Helper()
	svc, err := NewService(testHost, testPort, tls13.Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}, opts, seed)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{ca: ca, leaf: leaf, svc: svc}
}

// issue makes a key valid from nb.
func (f *fixture) issue(t testing.TB, nb time.Time) *Key {
	t.Helper()
	k, err := f.svc.Issue(nb, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func (f *fixture) tlsa() []*dns.TLSA {
	return []*dns.TLSA{TLSA(testHost, testPort, f.leaf.Chain[0], time.Minute)}
}

func (f *fixture) certs() []*dns.CERT {
	cs := CERTRecords(f.leaf.Chain[1:])
	for _, c := range cs {
		c.Hdr.Name = TXTName(testHost, testPort)
	}
	return cs
}

func (f *fixture) roots() *x509.CertPool { return f.ca.Pool() }

// txtOf returns the TXT strings of keys' records.
func txtOf(keys ...*Key) [][]string {
	var out [][]string
	for _, k := range keys {
		out = append(out, k.Record.TXT())
	}
	return out
}

// clientSecret is the client's side of ZS for a record's share.
func clientSecret(t testing.TB, group tls13.CurveID, share []byte) (ours []byte, secret []byte) {
	t.Helper()
	curve, err := Curve(group)
	if err != nil {
		t.Fatal(err)
	}
	priv, err := curve.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := curve.NewPublicKey(share)
	if err != nil {
		t.Fatal(err)
	}
	s, err := priv.ECDH(pub)
	if err != nil {
		t.Fatal(err)
	}
	return priv.PublicKey().Bytes(), s
}

var _ = ecdh.X25519

func f2cert(l *testpki.Leaf) tls13.Certificate {
	return tls13.Certificate{Chain: l.Chain, PrivateKey: l.Key, Leaf: l.Cert}
}

func mustB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
