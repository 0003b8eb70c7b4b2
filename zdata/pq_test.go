package zdata

// Post-quantum Z-data (docs/ztls-spec.md, Section 9): v3 records for
// X25519MLKEM768, their TXT form, keys, key files, the Selector's
// preference, what a path that strips or edits them achieves, and a
// handshake through tls13 with the Service's own keyring.

import (
	"bytes"
	"crypto/mlkem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

func pqFixture(t testing.TB, seed []byte) *fixture {
	t.Helper()
	return newFixture(t, "ecdsa-p256", Options{Group: GroupX25519MLKEM768}, seed)
}

// A v3 record's TXT form: v=ztls3, group 4588, the 1216-byte share
// (ML-KEM-768 encapsulation key first) over six strings of 255
// characters and one of 94, parsed back to the same record and hash.
func TestPQRecordTXT(t *testing.T) {
	f := pqFixture(t, nil)
	k := f.issue(t, clock.Now().Add(-time.Minute))
	r := k.Record
	txt := r.TXT()
	if txt[0] != Version3 || txt[5] != "4588" || !r.V3 || r.V2 {
		t.Fatalf("record starts %q", txt[:6])
	}
	for i, want := range []int{255, 255, 255, 255, 255, 255, 94} {
		if len(txt[6+i]) != want {
			t.Fatalf("share string %d is %d characters, want %d", i, len(txt[6+i]), want)
		}
	}
	if len(r.KeyShare) != 1216 || !bytes.Equal(r.KeyShare[:mlkem.EncapsulationKeySize768], k.KEM.Public()[:1184]) {
		t.Fatal("share is not the KEM key's ek || x25519")
	}
	got, err := ParseTXT(txt)
	if err != nil {
		t.Fatal(err)
	}
	got.Host, got.Port, got.LeafHash = r.Host, r.Port, r.LeafHash
	if !got.V3 || !bytes.Equal(got.KeyShare, r.KeyShare) || got.ZDataHash() != r.ZDataHash() {
		t.Fatal("v3 record did not round-trip")
	}
	if err := got.Verify(f.leaf.Cert, testHost, testPort); err != nil {
		t.Fatal(err)
	}
	// Pieces of other lengths, spaces around them: the same record.
	joined := strings.Join(txt[6:13], "")
	other := append([]string(nil), txt[:6]...)
	for _, cut := range [][2]int{{0, 100}, {100, 350}, {350, 600}, {600, 850}, {850, 1100}, {1100, 1350}, {1350, 1600}, {1600, 1624}} {
		other = append(other, " "+joined[cut[0]:cut[1]]+" ")
	}
	other = append(other, txt[13:]...)
	again, err := ParseTXT(other)
	if err != nil {
		t.Fatal(err)
	}
	again.Host, again.Port, again.LeafHash = r.Host, r.Port, r.LeafHash
	if again.ZDataHash() != r.ZDataHash() {
		t.Fatal("re-split share changed the zdata_hash")
	}
}

// What a path can make of a v3 record's strings (docs/ztls-spec.md,
// Section 9.6): each edit gives a malformed record or a bad signature,
// never a valid v1 or v2 record.
func TestPQRecordEditsNeverDowngrade(t *testing.T) {
	f := pqFixture(t, nil)
	k := f.issue(t, clock.Now().Add(-time.Minute))
	txt := k.Record.TXT()
	edit := func(fn func([]string) []string) [][]string {
		return [][]string{fn(append([]string(nil), txt...))}
	}
	cases := map[string][][]string{
		"a share string dropped": edit(func(s []string) []string { return append(s[:8], s[9:]...) }),
		"share strings swapped":  edit(func(s []string) []string { s[7], s[8] = s[8], s[7]; return s }),
		"the share cut":          edit(func(s []string) []string { s[12] = s[12][:90]; return s }),
		"as v=ztls1":             edit(func(s []string) []string { s[0] = Version; return s }),
		"as v=ztls2":             edit(func(s []string) []string { s[0] = Version2; return s }),
		"another group":          edit(func(s []string) []string { s[5] = "29"; return s }),
		"a share byte changed": edit(func(s []string) []string {
			b := []byte(s[9])
			b[3] ^= 1
			s[9] = string(b)
			return s
		}),
	}
	for name, rrs := range cases {
		t.Run(name, func(t *testing.T) {
			rec, _, err := selectOne(rrs, f.tlsa(), nil, testHost, testPort, f.roots(), clock.Now())
			if rec != nil || err == nil {
				t.Fatalf("selected %+v", rec)
			}
			switch ReasonOf(err) {
			case ReasonMalformed, ReasonBadSignature, ReasonUnknownGroup, ReasonInvalidShare:
			default:
				t.Fatalf("reason %v (%v)", ReasonOf(err), err)
			}
		})
	}
}

// The Selector (docs/ztls-spec.md, Section 9.6): a valid v3 record is
// chosen before a v1 record with a later not-after; a v3 record that
// fails its signature falls back to v1 unless PostQuantumOnly, which
// refuses v1 records altogether (the stripped-record case).
func TestPQSelectorPrefersAndRequires(t *testing.T) {
	now := clock.Now()
	f := pqFixture(t, nil)
	pq := f.issue(t, now.Add(-10*time.Minute))
	classical := newFixtureWith(t, f.ca, f.leaf, Options{}, nil)
	v1 := classical.issue(t, now.Add(-time.Minute)) // later not-after than pq
	sel := func(o SelectOptions, txt [][]string) (*Record, error) {
		o.Roots, o.Now = f.roots(), now
		s := NewSelector(testHost, testPort, o)
		s.StartChains(f.tlsa(), nil)
		r, _, err := s.Select(txt)
		return r, err
	}
	r, err := sel(SelectOptions{}, txtOf(v1, pq))
	if err != nil || !r.V3 {
		t.Fatalf("selected %v, %v; want the v3 record", r, err)
	}
	forged := pq.Record.TXT()
	forged[len(forged)-1] = mustB64(bytes.Repeat([]byte{7}, 70))
	if r, err = sel(SelectOptions{}, [][]string{txtOf(v1)[0], forged}); err != nil || r.V3 {
		t.Fatalf("with a forged v3 record: %v, %v; want the v1 record", r, err)
	}
	// Stripped: the answer has only the v1 record.
	if r, err = sel(SelectOptions{PostQuantumOnly: true}, txtOf(v1)); r != nil || ReasonOf(err) != ReasonNoZData || !strings.Contains(err.Error(), "v=ztls3") {
		t.Fatalf("post-quantum-only client took %v, %v", r, err)
	}
	if r, err = sel(SelectOptions{PostQuantumOnly: true}, txtOf(v1, pq)); err != nil || !r.V3 {
		t.Fatalf("post-quantum-only client: %v, %v", r, err)
	}
}

// The ML-KEM key of one service used for another: a v3 record copied to
// another host or port fails (the signature binds host and port).
func TestPQRecordOfAnotherServiceRefused(t *testing.T) {
	f := pqFixture(t, nil)
	k := f.issue(t, clock.Now().Add(-time.Minute))
	for _, svc := range []struct {
		host string
		port int
	}{{"other.test", testPort}, {testHost, 8443}} {
		tlsa := []*dns.TLSA{TLSA(svc.host, svc.port, f.leaf.Chain[0], time.Minute)}
		rec, _, err := selectOne(txtOf(k), tlsa, nil, svc.host, svc.port, f.roots(), clock.Now())
		if rec != nil || ReasonOf(err) != ReasonWrongService {
			t.Fatalf("%s:%d: selected %v, %v", svc.host, svc.port, rec, err)
		}
	}
}

// Keys: a fleet derives the same post-quantum key on every member, one
// per host, port and epoch, with the top bit in its Zdata_id; a key file
// keeps the 96 private bytes; and v1/v2 records cannot name the group.
func TestPQKeys(t *testing.T) {
	seed := bytes.Repeat([]byte{3}, 32)
	a, b := pqFixture(t, seed), pqFixture(t, seed)
	ka, err := a.svc.Epoch(500000)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := b.svc.Epoch(500000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ka.KEM.Bytes(), kb.KEM.Bytes()) || ka.Record.ID != 500000|PQEpochIDBit {
		t.Fatalf("fleet keys differ, or id %#x", ka.Record.ID)
	}
	for name, other := range map[string]func() (*tls13.ZDataKEMKey, error){
		"host":  func() (*tls13.ZDataKEMKey, error) { return DeriveKEMKey(seed, "other.test", testPort, 500000) },
		"port":  func() (*tls13.ZDataKEMKey, error) { return DeriveKEMKey(seed, testHost, 8443, 500000) },
		"epoch": func() (*tls13.ZDataKEMKey, error) { return DeriveKEMKey(seed, testHost, testPort, 500001) },
	} {
		k, err := other()
		if err != nil || bytes.Equal(k.Bytes(), ka.KEM.Bytes()) {
			t.Fatalf("another %s gives the same key (%v)", name, err)
		}
	}
	file, err := MarshalKey(ka)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKey(file)
	if err != nil || back.KEM == nil || !bytes.Equal(back.KEM.Bytes(), ka.KEM.Bytes()) || back.Private != nil {
		t.Fatalf("key file: %v", err)
	}
	v1 := ka.Record.Clone()
	v1.V3 = false
	if err := v1.Sign(a.leaf.Key, a.leaf.Chain[0]); err == nil {
		t.Fatal("a v1 record with group 4588 was signed")
	}
}

// End to end through tls13: a Service of each group shares one keyring
// (a server with classical and post-quantum keys); a client with the v3
// record sends its request as early data under ML-KEM-768 and x25519, and
// a client with the v1 record (an older client) still gets ZTLS.
func TestPQHandshakeWithKeyring(t *testing.T) {
	now := clock.Now()
	f := pqFixture(t, nil)
	classical := newFixtureWith(t, f.ca, f.leaf, Options{}, nil)
	classical.svc.Keyring = f.svc.Keyring
	if _, err := f.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	if _, err := classical.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	var pq, v1 *Record
	for _, r := range f.svc.Records(now) {
		if r.ValidAt(now) && r.V3 {
			pq = r
		} else if r.ValidAt(now) {
			v1 = r
		}
	}
	if pq == nil || v1 == nil {
		t.Fatal("the shared keyring does not publish a current v3 and v1 record")
	}
	for _, rec := range []*Record{pq, v1} {
		cst, sst, early := pqHandshake(t, f, rec)
		if !cst.ZTLS || !sst.ZTLS || cst.ZTLSKEM != rec.V3 || sst.ZTLSKEM != rec.V3 || early != "GET /pq" {
			t.Fatalf("v3=%v: client %+v\nserver %+v\nearly %q", rec.V3, cst, sst, early)
		}
	}
}

// pqHandshake runs one ZTLS handshake over a pipe with rec's offer and
// returns both sides' states and the early data the server read.
func pqHandshake(t *testing.T, f *fixture, rec *Record) (cst, sst tls13.ConnectionState, early string) {
	t.Helper()
	ccfg := &tls13.Config{RootCAs: f.roots(), ServerName: testHost}
	scfg := &tls13.Config{Certificates: []tls13.Certificate{f2cert(f.leaf)}, ZData: f.svc.Keyring,
		StrikeRegister: tls13.NewMemoryStrikeRegister(100, time.Time{})}
	_, cst, sst, early = recordedHandshake(t, ccfg, scfg, rec.Offer(f.leaf.Cert), "GET /pq")
	return cst, sst, early
}

// TestPQTXTAnswerSizes computes the sizes docs/ztls-spec.md, Section 9.7
// states: a v3 record's TXT RDATA and the TXT answers of two periods.
func TestPQTXTAnswerSizes(t *testing.T) {
	start := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	host := "www.example.org"
	leaf := newFixture(t, "ecdsa-p256", Options{}, nil).leaf
	mk := func(opts Options, nb time.Time) *Record {
		svc, err := NewService(host, 443, f2cert(leaf), opts, nil)
		if err != nil {
			t.Fatal(err)
		}
		k, err := svc.Issue(nb, nil)
		if err != nil {
			t.Fatal(err)
		}
		k.Record.Signature = bytes.Repeat([]byte{1}, 72) // the longest DER ECDSA P-256 signature
		k.Record.ID = 1<<32 - 1                          // the longest Zdata_id
		return k.Record
	}
	pq := []*Record{mk(Options{Group: GroupX25519MLKEM768}, start), mk(Options{Group: GroupX25519MLKEM768}, start.Add(time.Hour))}
	v1 := []*Record{mk(Options{}, start), mk(Options{}, start.Add(time.Hour))}
	rdata := func(r *Record) int {
		n := 0
		for _, s := range r.TXT() {
			n += 1 + len(s)
		}
		return n
	}
	answer := func(recs ...*Record) int {
		var rrs []dns.RR
		for _, r := range recs {
			rrs = append(rrs, r.TXTRR(time.Minute))
		}
		n, err := AnswerSize(rrs...)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	got := []int{rdata(pq[0]), len(pq[0].TXT()), answer(pq...), answer(append(pq, v1...)...)}
	want := []int{pqRDATA, 16, pqAnswer, pqAnswerWithV1}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("sizes %v, want %v (docs/ztls-spec.md, Section 9.7)", got, want)
			break
		}
	}
	if got[2] <= 1232 {
		t.Fatal("a post-quantum TXT answer fits UDP: Section 9.7 is wrong")
	}
}

// The sizes docs/ztls-spec.md, Section 9.7 states.
const (
	pqRDATA        = 1797
	pqAnswer       = 3678
	pqAnswerWithV1 = 4120
)

var _ = errors.New

// ValidateShare on a post-quantum share (docs/ztls-spec.md, Section 9.1):
// the length, FIPS 203's modulus check, a small-order x25519 half.
func TestPQValidateShare(t *testing.T) {
	kem, err := tls13.GenerateZDataKEMKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := kem.Public()
	if err := ValidateShare(GroupX25519MLKEM768, good); err != nil {
		t.Fatal(err)
	}
	modulus := bytes.Clone(good)
	modulus[0], modulus[1] = 0xff, 0xff // a 12-bit coefficient of 4095 >= q
	lowOrder := append(bytes.Clone(good[:1184]), make([]byte, 32)...)
	for name, share := range map[string][]byte{"short": good[:1215], "long": append(bytes.Clone(good), 0),
		"modulus": modulus, "small-order x25519": lowOrder} {
		if err := ValidateShare(GroupX25519MLKEM768, share); ReasonOf(err) != ReasonInvalidShare {
			t.Errorf("%s: %v", name, err)
		}
	}
}
