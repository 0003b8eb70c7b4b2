package zdata

import (
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// TestSelectHeldLeaf: records carried in the HTTPS record (parsed from
// their SvcParamValue, given to the Selector as their TXT strings) verify
// with a leaf the client holds, without any TLSA answer
// (docs/ztls-spec.md, Section 8.3); the held leaf is checked by the
// policy like a TLSA leaf; a held leaf that did not sign the records is
// a bad signature that names it; a held leaf is tried before TLSA's.
func TestSelectHeldLeaf(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	now := clock.Now()
	k := f.issue(t, now.Add(-time.Minute))
	value, err := MarshalSvcParam([]*Record{k.Record})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := ParseSvcParam(value)
	if err != nil {
		t.Fatal(err)
	}
	txt := [][]string{recs[0].TXT()}
	pick := func(l Leaves) (*Record, *x509.Certificate, error) {
		sel := NewSelector(testHost, testPort, SelectOptions{Roots: f.roots(), Now: now})
		sel.StartLeaves(l)
		return sel.Select(txt)
	}
	inter := parseAll(t, f.leaf.Chain[1:])
	rec, leaf, err := pick(Leaves{Held: []*x509.Certificate{f.leaf.Cert}, Intermediates: inter})
	if err != nil || leaf != f.leaf.Cert || rec.ID != k.Record.ID || rec.ZDataHash() != k.Record.ZDataHash() {
		t.Fatalf("held leaf: %v %v", rec, err)
	}

	other := f.ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	_, _, err = pick(Leaves{Held: []*x509.Certificate{other.Cert}})
	if ReasonOf(err) != ReasonBadSignature || !strings.Contains(err.Error(), "leaf held") {
		t.Fatalf("another held leaf: %v", err)
	}
	// The held leaf that does not verify, then the TLSA leaf that does.
	if _, leaf, err = pick(Leaves{Held: []*x509.Certificate{other.Cert}, TLSA: f.tlsa(), CERT: f.certs()}); err != nil || leaf.Equal(other.Cert) {
		t.Fatalf("held then TLSA: %v", err)
	}

	stranger := testpki.NewCA(t, "ecdsa-p256")
	untrusted := newFixtureWith(t, stranger, stranger.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}}), Options{}, nil)
	uk := untrusted.issue(t, now.Add(-time.Minute))
	sel := NewSelector(testHost, testPort, SelectOptions{Roots: f.roots(), Now: now})
	sel.StartLeaves(Leaves{Held: []*x509.Certificate{untrusted.leaf.Cert}})
	if _, _, err := sel.Select([][]string{uk.Record.TXT()}); ReasonOf(err) != ReasonUntrustedChain {
		t.Fatalf("untrusted held leaf: %v", err)
	}

	sel = NewSelector(testHost, testPort, SelectOptions{Roots: f.roots(), Now: now})
	sel.StartLeaves(Leaves{})
	if _, _, err := sel.Select(txt); ReasonOf(err) != ReasonNoLeaf {
		t.Fatalf("no leaf: %v", err)
	}
}

func parseAll(t *testing.T, ders [][]byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for _, d := range ders {
		c, err := x509.ParseCertificate(d)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}
