package zdata

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13"
)

// forceSign signs r as it stands, bypassing Sign's checks, so tests can
// make records a correct signer never would (long windows, bad shares).
func forceSign(t *testing.T, r *Record, l *testpki.Leaf, host string, port int) {
	t.Helper()
	r.LeafHash = sha256.Sum256(l.Chain[0])
	h, d := digest(r.Scheme, r.SignatureInput(host, port))
	sig, err := l.Key.Sign(rand.Reader, d, h)
	if err != nil {
		t.Fatal(err)
	}
	r.Signature = sig
	r.pub = nil
}

func TestSignEachScheme(t *testing.T) {
	for keyType, scheme := range map[string]tls13.SignatureScheme{"ecdsa-p256": 1027, "ecdsa-p384": 1283, "ed25519": 2055, "rsa2048": 2052} {
		t.Run(keyType, func(t *testing.T) {
			f := newFixture(t, keyType, Options{}, nil)
			k := f.issue(t, t0)
			if k.Record.Scheme != scheme {
				t.Fatalf("scheme %d, want %d", k.Record.Scheme, scheme)
			}
			r, err := ParseTXT(k.Record.TXT())
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Verify(f.leaf.Cert, testHost, testPort); err != nil {
				t.Fatal(err)
			}
			if r.LeafHash != sha256.Sum256(f.leaf.Chain[0]) || r.Host != testHost || r.Port != testPort {
				t.Fatal("Verify did not bind host, port and leaf hash")
			}
			// Another leaf of the same key type does not verify it.
			other := f.ca.Issue(t, testpki.LeafOpts{KeyType: keyType, DNSNames: []string{testHost}})
			if keyType != "rsa2048" { // testpki reuses one RSA leaf key
				if err := r.Verify(other.Cert, testHost, testPort); ReasonOf(err) != ReasonBadSignature {
					t.Fatalf("verified with another leaf: %v", err)
				}
			}
		})
	}
}

func TestSignRejects(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	k := f.issue(t, t0)
	other := testpki.NewKey(t, "ecdsa-p256")
	r := k.Record.Clone()
	if err := r.Sign(other, f.leaf.Chain[0]); err == nil {
		t.Fatal("signed with a key that does not match the leaf")
	}
	r = k.Record.Clone()
	r.NotAfter = r.NotBefore.Add(time.Hour + time.Second)
	if err := r.Sign(f.leaf.Key, f.leaf.Chain[0]); !errors.Is(err, ErrWindowTooLong) {
		t.Fatalf("signed a window over 1h: %v", err)
	}
	r = k.Record.Clone()
	r.Host = ""
	if err := r.Sign(f.leaf.Key, f.leaf.Chain[0]); err == nil {
		t.Fatal("signed without a host")
	}
	r = k.Record.Clone()
	r.ALPN = "a,b"
	if err := r.Sign(f.leaf.Key, f.leaf.Chain[0]); err == nil {
		t.Fatal("signed a bad alpn")
	}
	if err := k.Record.Clone().Sign(f.leaf.Key, []byte("not DER")); err == nil {
		t.Fatal("signed with a garbage leaf")
	}
	p521 := f.ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p521", DNSNames: []string{testHost}})
	if err := k.Record.Clone().Sign(p521.Key, p521.Chain[0]); err == nil {
		t.Fatal("signed with P-521 (no ztls v1 scheme)")
	}
}

func TestVerifyAttacks(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	k := f.issue(t, t0)
	parse := func(s []string) *Record {
		r, err := ParseTXT(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	txt := k.Record.TXT()
	cases := map[string]struct {
		strs []string
		host string
		port int
	}{
		"copied to another host": {txt, "other.test", testPort},
		"copied to another port": {txt, testHost, 8443},
		"id changed":             {with(txt, 4, "12345"), testHost, testPort},
		"share swapped":          {with(txt, 6, otherShare(t)), testHost, testPort},
		"not-after extended":     {with(txt, 2, formatTime(k.Record.NotAfter.Add(time.Minute))), testHost, testPort},
		"flag flipped":           {with(txt, 7, "Y"), testHost, testPort},
		"signature bit flipped":  {flipSig(t, txt), testHost, testPort},
		"signature truncated":    {with(txt, len(txt)-1, txt[len(txt)-1][:len(txt[len(txt)-1])-4]), testHost, testPort},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := parse(c.strs)
			if err := r.Verify(f.leaf.Cert, c.host, c.port); ReasonOf(err) != ReasonBadSignature || !errors.Is(err, ErrBadSignature) {
				t.Fatalf("err %v, want bad signature", err)
			}
		})
	}
	// An attacker's own key and certificate (not chained to the roots).
	evilCA := testpki.NewCA(t, "ecdsa-p256")
	evil := evilCA.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	ef := newFixtureWith(t, evilCA, evil, Options{}, nil)
	ek := ef.issue(t, t0)
	// Forged with the attacker's key, served with the genuine TLSA: bad signature.
	_, _, err := selectOne(txtOf(ek), f.tlsa(), nil, testHost, testPort, f.roots(), t0)
	if ReasonOf(err) != ReasonBadSignature {
		t.Fatalf("forged record: %v", err)
	}
	// Forged with the attacker's TLSA too: untrusted chain.
	_, _, err = selectOne(txtOf(ek), ef.tlsa(), nil, testHost, testPort, f.roots(), t0)
	if ReasonOf(err) != ReasonUntrustedChain {
		t.Fatalf("spoofed record and TLSA: %v", err)
	}
}

func otherShare(t *testing.T) string {
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(k.PublicKey().Bytes())
}

func flipSig(t *testing.T, txt []string) []string {
	r, err := ParseTXT(txt)
	if err != nil {
		t.Fatal(err)
	}
	r.Signature[len(r.Signature)/2] ^= 1
	return r.TXT()
}

func TestCheckValidity(t *testing.T) {
	nb := time.Date(2030, 5, 6, 7, 0, 0, 0, time.UTC)
	r := &Record{NotBefore: nb, NotAfter: nb.Add(time.Hour)}
	cases := []struct {
		now  time.Time
		want error
	}{
		{nb, nil},
		{nb.Add(-60 * time.Second), nil},
		{nb.Add(-61 * time.Second), ErrNotYetValid},
		{nb.Add(time.Hour), nil},
		{nb.Add(time.Hour + 999*time.Millisecond), nil},
		{nb.Add(time.Hour + time.Second), ErrExpired},
		{nb.Add(30 * time.Minute), nil},
	}
	for _, c := range cases {
		if err := r.CheckValidity(c.now); err != c.want {
			t.Errorf("at %v: %v, want %v", c.now, err, c.want)
		}
	}
	long := &Record{NotBefore: nb, NotAfter: nb.Add(time.Hour + time.Second)}
	if err := long.CheckValidity(nb); err != ErrWindowTooLong {
		t.Errorf("window over 1h: %v", err)
	}
	rev := &Record{NotBefore: nb, NotAfter: nb.Add(-time.Second)}
	if err := rev.CheckValidity(nb); err != ErrWindowTooLong {
		t.Errorf("reversed window: %v", err)
	}
}

func TestSelectReasons(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	k := f.issue(t, t0)
	now := t0.Add(10 * time.Minute)
	resign := func(mut func(r *Record)) [][]string {
		r := k.Record.Clone()
		mut(r)
		forceSign(t, r, f.leaf, testHost, testPort)
		return [][]string{r.TXT()}
	}
	wrongName := f.ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"elsewhere.test"}})
	wn := newFixtureWith(t, f.ca, wrongName, Options{}, nil)
	wnk := wn.issue(t, t0)
	port8443 := newFixtureWith(t, f.ca, f.leaf, Options{}, nil)
	port8443.svc.Port = 8443
	pk := port8443.issue(t, t0)
	otherHost := newFixtureWith(t, f.ca, f.leaf, Options{}, nil)
	otherHost.svc.Host = "other.test"
	ok := otherHost.issue(t, t0)
	zero := make([]byte, 32)
	offCurve := append([]byte{4}, make([]byte, 64)...)
	offCurve[64] = 1

	cases := []struct {
		name  string
		txt   [][]string
		tlsa  []*dns.TLSA
		roots bool
		now   time.Time
		want  Reason
	}{
		{"no TXT", nil, f.tlsa(), true, now, ReasonNoZData},
		{"only other TXT", [][]string{{"v=spf1 -all"}, {"hello"}}, f.tlsa(), true, now, ReasonNoZData},
		{"malformed", [][]string{{"v=ztls1", "junk"}}, f.tlsa(), true, now, ReasonMalformed},
		{"expired", txtOf(k), f.tlsa(), true, k.Record.NotAfter.Add(time.Second), ReasonExpired},
		{"not yet valid", txtOf(k), f.tlsa(), true, k.Record.NotBefore.Add(-61 * time.Second), ReasonNotYetValid},
		{"window too long", resign(func(r *Record) { r.NotAfter = r.NotAfter.Add(time.Second) }), f.tlsa(), true, now, ReasonWindowTooLong},
		{"unknown group", resign(func(r *Record) { r.Group = 4588 }), f.tlsa(), true, now, ReasonUnknownGroup},
		{"unknown scheme", resign(func(r *Record) { r.Scheme = 0x0401 }), f.tlsa(), true, now, ReasonUnknownScheme},
		{"all-zero x25519 share", resign(func(r *Record) { r.KeyShare = zero }), f.tlsa(), true, now, ReasonInvalidShare},
		{"off-curve P-256 share", resign(func(r *Record) { r.Group, r.KeyShare = GroupSecp256r1, offCurve }), f.tlsa(), true, now, ReasonInvalidShare},
		{"no TLSA", txtOf(k), nil, true, now, ReasonNoLeaf},
		{"forged signature", [][]string{flipSig(t, k.Record.TXT())}, f.tlsa(), true, now, ReasonBadSignature},
		{"copied from port 8443", txtOf(pk), f.tlsa(), true, now, ReasonWrongService},
		{"copied from other.test", txtOf(ok), f.tlsa(), true, now, ReasonWrongService},
		{"untrusted chain", txtOf(k), f.tlsa(), false, now, ReasonUntrustedChain},
		{"wrong name", txtOf(wnk), wn.tlsa(), true, now, ReasonWrongName},
		{"valid", txtOf(k), f.tlsa(), true, now, ReasonNone},
		{"valid at skewed not-before", txtOf(k), f.tlsa(), true, k.Record.NotBefore.Add(-60 * time.Second), ReasonNone},
		{"valid at not-after", txtOf(k), f.tlsa(), true, k.Record.NotAfter, ReasonNone},
	}
	otherRoots := testpki.NewCA(t, "ecdsa-p256").Pool()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			roots := f.roots()
			if !c.roots {
				roots = otherRoots
			}
			r, leaf, err := selectOne(c.txt, c.tlsa, nil, testHost, testPort, roots, c.now)
			if got := ReasonOf(err); got != c.want {
				t.Fatalf("reason %q (%v), want %q", got, err, c.want)
			}
			if c.want != ReasonNone {
				if r != nil || leaf != nil || !strings.HasPrefix(err.Error(), "zdata: ") {
					t.Fatalf("failure returned a record or an unprefixed error: %v", err)
				}
				return
			}
			if r.ID != k.Record.ID || leaf == nil || !leaf.Equal(f.leaf.Cert) || r.ZDataHash() != k.Record.ZDataHash() {
				t.Fatal("selected the wrong record or leaf")
			}
		})
	}
}

func TestSelectPrefersLatestValid(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	older := f.issue(t, t0)
	newer := f.issue(t, t0.Add(30*time.Minute))
	future := f.issue(t, t0.Add(2*time.Hour))
	expired := f.issue(t, t0.Add(-2*time.Hour))
	decoy := f.ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	tlsa := append([]*dns.TLSA{TLSA(testHost, testPort, decoy.Chain[0], 0)}, f.tlsa()...)
	tlsa = append(tlsa, &dns.TLSA{Usage: 2, Selector: 0, MatchingType: 0, Certificate: "00"}, nil)
	txt := append([][]string{{"v=spf1 -all"}, {"v=ztls1", "garbage"}}, txtOf(expired, older, future, newer)...)
	for _, c := range []struct {
		now  time.Time
		want *Key
	}{
		{t0.Add(10 * time.Minute), older},
		{t0.Add(40 * time.Minute), newer},
		// Within 60 s of newer's not-before, older is still valid: it is
		// the one a server takes (no key is taken before its not-before).
		{t0.Add(29 * time.Minute), older},
		{t0.Add(30*time.Minute - time.Millisecond), older},
		{t0.Add(30 * time.Minute), newer},
		{t0.Add(80 * time.Minute), newer},
	} {
		r, _, err := selectOne(txt, tlsa, nil, "SERVER.test.", testPort, f.roots(), c.now)
		if err != nil {
			t.Fatalf("at %v: %v", c.now, err)
		}
		if r.ID != c.want.Record.ID {
			t.Fatalf("at %v: picked id %d, want %d", c.now, r.ID, c.want.Record.ID)
		}
	}
	// A client whose clock is behind, offered only the next record, uses it
	// within 60 s of its not-before (the server's clock has reached it).
	for _, c := range []struct {
		now time.Time
		ok  bool
	}{{t0.Add(29 * time.Minute), true}, {t0.Add(29*time.Minute - time.Second), false}} {
		r, _, err := selectOne(txtOf(newer), tlsa, nil, testHost, testPort, f.roots(), c.now)
		if (err == nil) != c.ok || (c.ok && r.ID != newer.Record.ID) {
			t.Fatalf("only the next record, at %v: %v, want usable %v", c.now, err, c.ok)
		}
	}
	// The older record verifies with the decoy TLSA listed first too.
	if _, leaf, err := selectOne(txtOf(older), tlsa, nil, testHost, testPort, f.roots(), t0); err != nil || !leaf.Equal(f.leaf.Cert) {
		t.Fatalf("leaf among several TLSA: %v", err)
	}
	// A TLSA record owned by another name is ignored.
	misplaced := TLSA("other.test", testPort, f.leaf.Chain[0], 0)
	if _, _, err := selectOne(txtOf(older), []*dns.TLSA{misplaced}, nil, testHost, testPort, f.roots(), t0); ReasonOf(err) != ReasonNoLeaf {
		t.Fatalf("TLSA at another name: %v", err)
	}
}

// TestLikelyIsWhatSelectPicks: before any check, Likely names the record
// and leaf Select then returns (same zdata_hash, so a first flight made
// with it is the one Select's offer would make); it is not a verdict: a
// forged record is just as likely, and Select refuses it.
func TestLikelyIsWhatSelectPicks(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	older := f.issue(t, t0)
	newer := f.issue(t, t0.Add(30*time.Minute))
	expired := f.issue(t, t0.Add(-2*time.Hour))
	txt := append([][]string{{"v=spf1 -all"}, {"v=ztls1", "garbage"}}, txtOf(expired, older, newer)...)
	o := SelectOptions{Roots: f.roots()}
	for _, now := range []time.Time{t0.Add(10 * time.Minute), t0.Add(40 * time.Minute)} {
		o.Now = now
		sel := NewSelector("SERVER.test.", testPort, o)
		// Before the TLSA answer: the record, no leaf yet.
		if early, leaf := sel.Likely(txt); early == nil || leaf != nil {
			t.Fatalf("at %v: likely before StartChains %v, leaf %v", now, early, leaf)
		}
		sel.StartChains(f.tlsa(), f.certs())
		likely, lleaf := sel.Likely(txt)
		got, leaf, err := sel.Select(txt)
		if err != nil || likely == nil {
			t.Fatalf("at %v: likely %v, select %v", now, likely, err)
		}
		if likely.ZDataHash() != got.ZDataHash() || !lleaf.Equal(leaf) {
			t.Fatalf("at %v: likely id %d, Select picked id %d", now, likely.ID, got.ID)
		}
	}
	o.Now = t0
	if r, _ := NewSelector(testHost, testPort, o).Likely(txtOf(expired)); r != nil {
		t.Fatalf("an expired record is likely: id %d", r.ID)
	}
	sel := NewSelector(testHost, testPort, o)
	sel.StartChains(nil, nil)
	if _, leaf := sel.Likely(txtOf(older)); leaf != nil {
		t.Fatal("a likely leaf without a TLSA record")
	}
	forged := older.Record.Clone()
	forged.Signature[len(forged.Signature)/2] ^= 1
	sel = NewSelector(testHost, testPort, o)
	sel.StartChains(f.tlsa(), f.certs())
	if r, _ := sel.Likely([][]string{forged.TXT()}); r == nil {
		t.Fatal("Likely checks signatures: it must not, it is only a guess")
	}
	if _, _, err := sel.Select([][]string{forged.TXT()}); ReasonOf(err) != ReasonBadSignature {
		t.Fatalf("Select of the forged record: %v", err)
	}
}

func TestSelectIntermediatesFromCERT(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}, Intermediate: true})
	f := newFixtureWith(t, ca, leaf, Options{}, nil)
	k := f.issue(t, t0)
	if _, _, err := selectOne(txtOf(k), f.tlsa(), nil, testHost, testPort, f.roots(), t0); ReasonOf(err) != ReasonUntrustedChain {
		t.Fatalf("without CERT intermediates: %v", err)
	}
	if len(f.certs()) != 1 {
		t.Fatal("want one CERT record")
	}
	if _, _, err := selectOne(txtOf(k), f.tlsa(), f.certs(), testHost, testPort, f.roots(), t0); err != nil {
		t.Fatalf("with CERT intermediates: %v", err)
	}
}

func TestOffer(t *testing.T) {
	f := newFixture(t, "ecdsa-p256", Options{ALPN: "h2", NSC: []uint16{0x1303}, MaxEarlyData: 4096}, nil)
	k := f.issue(t, t0)
	r, leaf, err := selectOne(txtOf(k), f.tlsa(), nil, testHost, testPort, f.roots(), t0)
	if err != nil {
		t.Fatal(err)
	}
	o := r.Offer(leaf)
	if o.ID != k.Record.ID || o.Hash != k.Record.ZDataHash() || o.Group != GroupX25519 || string(o.Share) != string(k.Record.KeyShare) ||
		o.MaxEarlyData != 4096 || o.ALPN != "h2" || len(o.NSC) != 1 || o.NSC[0] != 0x1303 || o.Leaf != leaf {
		t.Fatalf("offer %+v", o)
	}
	// The server finds the same record by id and hash.
	f.svc.Keyring.Add(k)
	zk := f.svc.Keyring.LookupZData(o.ID, o.Hash, t0)
	if zk == nil || zk.Host != testHost {
		t.Fatal("keyring does not find the offered record")
	}
	ours, want := clientSecret(t, o.Group, o.Share)
	got, err := zk.ECDH(ours)
	if err != nil || string(got) != string(want) {
		t.Fatalf("server ZS differs from client ZS: %v", err)
	}
}

// TestSelectRevoked: with CRLs, a record signed by a revoked leaf, or by a
// leaf under a revoked intermediate, is refused as ReasonRevoked; an
// unrelated CRL changes nothing.
func TestSelectRevoked(t *testing.T) {
	crl := func(ca *testpki.CA, serials ...*big.Int) *revocation.Checker {
		tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: t0.Add(-time.Hour), NextUpdate: t0.Add(time.Hour)}
		for _, s := range serials {
			tmpl.RevokedCertificateEntries = append(tmpl.RevokedCertificateEntries,
				x509.RevocationListEntry{SerialNumber: s, RevocationTime: t0.Add(-time.Minute)})
		}
		der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		l, err := x509.ParseRevocationList(der)
		if err != nil {
			t.Fatal(err)
		}
		return revocation.New(l)
	}
	f := newFixture(t, "ecdsa-p256", Options{}, nil)
	k := f.issue(t, t0)
	sel := func(f *fixture, rev *revocation.Checker) error {
		sel := NewSelector(testHost, testPort, SelectOptions{Roots: f.roots(), Now: t0, Revocation: rev})
		sel.StartChains(f.tlsa(), f.certs())
		_, _, err := sel.Select(txtOf(k))
		return err
	}
	if err := sel(f, crl(f.ca, f.leaf.Cert.SerialNumber)); ReasonOf(err) != ReasonRevoked || !errors.Is(err, revocation.ErrRevoked) {
		t.Fatalf("revoked leaf: %v", err)
	}
	if err := sel(f, crl(f.ca, big.NewInt(99))); err != nil {
		t.Fatalf("unrelated CRL: %v", err)
	}

	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}, Intermediate: true})
	inter, err := x509.ParseCertificate(leaf.Chain[1])
	if err != nil {
		t.Fatal(err)
	}
	f = newFixtureWith(t, ca, leaf, Options{}, nil)
	k = f.issue(t, t0)
	if err := sel(f, crl(ca, inter.SerialNumber)); ReasonOf(err) != ReasonRevoked {
		t.Fatalf("revoked intermediate: %v", err)
	}
}
