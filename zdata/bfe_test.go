package zdata

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/bfe"
)

// bfeOpts is a small filter for tests: 32 connections at p = 2^-4
// (m = 185, k = 3), generated in a fraction of a second.
var bfeOpts = Options{BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 16}

// newBFEFixture is a service with BFE, its key files in a temporary
// directory, rotated at now with its key states open (a server).
func newBFEFixture(t *testing.T, seed []byte, now time.Time) *fixture {
	t.Helper()
	fx := newFixture(t, "ecdsa-p256", bfeOpts, seed)
	fx.svc.BFEDir = t.TempDir()
	fx.svc.BFEServe = true
	t.Cleanup(fx.svc.CloseBFE)
	if _, err := fx.svc.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	return fx
}

func TestV2RecordRoundTripAndSignature(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, nil, now)
	keys := fx.svc.Keyring.Live(now)
	if len(keys) == 0 || keys[0].BFE == nil {
		t.Fatal("no BFE twin after GenerateBFE and Rotate")
	}
	twin := keys[0].BFE.Record
	txt := twin.TXT()
	if txt[0] != Version2 || !strings.HasPrefix(txt[7], "bfe=") {
		t.Fatalf("twin TXT %q", txt)
	}
	p, err := ParseTXT(txt)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Verify(fx.leaf.Cert, testHost, testPort); err != nil {
		t.Fatalf("v2 twin does not verify: %v", err)
	}
	if p.ZDataHash() == keys[0].Record.ZDataHash() || p.ID != keys[0].Record.ID {
		t.Fatal("the twin must share the Zdata_id and differ in zdata_hash")
	}
	// Records publishes both, the v1 record first.
	recs := fx.svc.Records(now)
	if len(recs) < 2 || recs[0].V2 || !recs[1].V2 {
		t.Fatalf("published %d records", len(recs))
	}
}

// The attacks: a v2 record turned into a v1 one (bfe= dropped, version
// changed) and a v1 record relabelled v2, each keeping its signature; and
// a bfe= key swapped for another one. None verifies.
func TestV2RecordDowngradeAndKeySwapRejected(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, nil, now)
	k := fx.svc.Keyring.Live(now)[0]
	v2 := k.BFE.Record.TXT()
	v1 := k.Record.TXT()

	stripped := append([]string{Version}, v2[1:7]...)
	stripped = append(stripped, v2[8:]...)
	relabelled := append([]string{Version2}, v1[1:]...)

	params, _ := bfe.NewParams(32, 1.0/16)
	other, err := bfe.GenerateKey(context.Background(), filepath.Join(t.TempDir(), "x.bfe"), bfe.KeyGenConfig{Params: params})
	if err != nil {
		t.Fatal(err)
	}
	swapped := append([]string(nil), v2...)
	swapped[7] = "bfe=" + mustB64(other.Bytes())

	for name, txt := range map[string][]string{"v2 stripped to v1": stripped, "v1 relabelled v2": relabelled, "bfe key swapped": swapped} {
		r, err := ParseTXT(txt)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := r.Verify(fx.leaf.Cert, testHost, testPort); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("%s: verify = %v, want a bad signature", name, err)
		}
	}
}

func TestParseTXTBFEField(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, nil, now)
	v2 := fx.svc.Keyring.Live(now)[0].BFE.Record.TXT()
	v1 := fx.svc.Keyring.Live(now)[0].Record.TXT()
	bad := map[string][]string{
		"bfe= in a v1 record":  append(append(append([]string(nil), v1[:7]...), v2[7]), v1[7:]...),
		"bfe= not base64":      with(v2, 7, "bfe=***"),
		"bfe= truncated key":   with(v2, 7, v2[7][:len(v2[7])-8]),
		"bfe= not a G2 point":  with(v2, 7, "bfe="+mustB64(make([]byte, bfe.PublicKeySize))),
		"bfe= after Y/N field": append(append(append([]string(nil), v2[:7]...), v2[8], v2[7]), v2[9:]...),
	}
	for name, txt := range bad {
		if _, err := ParseTXT(txt); err == nil || ReasonOf(err) != ReasonMalformed {
			t.Errorf("%s: err %v, want malformed", name, err)
		}
	}
	// A v2 record without bfe= parses and round-trips.
	noBFE := append(append([]string(nil), v2[:7]...), v2[8:]...)
	r, err := ParseTXT(noBFE)
	if err != nil || !r.V2 || r.BFE != nil {
		t.Fatalf("v2 without bfe=: %v %+v", err, r)
	}
}

func TestSelectPrefersBFEUnlessNoBFE(t *testing.T) {
	now := clock.Now()
	fx := newBFEFixture(t, nil, now)
	var txt [][]string
	for _, r := range fx.svc.Records(now) {
		txt = append(txt, r.TXT())
	}
	for _, noBFE := range []bool{false, true} {
		sel := NewSelector(testHost, testPort, SelectOptions{Roots: fx.roots(), Now: now, NoBFE: noBFE})
		sel.StartChains(fx.tlsa(), fx.certs())
		r, leaf, err := sel.Select(txt)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.BFE) > 0; got == noBFE {
			t.Fatalf("NoBFE=%v: picked a record with bfe=%v", noBFE, got)
		}
		offer := r.Offer(leaf)
		if (offer.BFE != nil) == noBFE {
			t.Fatalf("NoBFE=%v: offer.BFE=%v", noBFE, offer.BFE)
		}
	}
}

// The keyring serves the twin's hash with a decapsulating key, the v1
// hash without; a ciphertext decapsulates once (a replay is refused).
func TestKeyringBFELookupAndReplay(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, nil, now)
	k := fx.svc.Keyring.Live(now)[0]
	v1 := fx.svc.Keyring.LookupZData(k.Record.ID, k.Record.ZDataHash(), now)
	v2 := fx.svc.Keyring.LookupZData(k.Record.ID, k.BFE.Record.ZDataHash(), now)
	if v1 == nil || v2 == nil || v1.Decapsulate != nil || v2.Decapsulate == nil {
		t.Fatalf("lookups %+v %+v", v1, v2)
	}
	ct, key, err := k.BFE.Record.BFEPublicKey().Encapsulate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var events []BFEEvent
	fx.svc.Keyring.OnBFE(func(e BFEEvent) { events = append(events, e) })
	got, err := v2.Decapsulate(ct)
	if err != nil || string(got) != string(key) {
		t.Fatalf("decapsulate: %v", err)
	}
	if _, err := v2.Decapsulate(ct); !errors.Is(err, bfe.ErrPunctured) {
		t.Fatalf("replay: %v, want ErrPunctured", err)
	}
	if len(events) != 2 || events[0].Err != nil || events[1].Err == nil || events[0].Punctured == 0 {
		t.Fatalf("events %+v", events)
	}
}

// A filter at capacity refuses early data before it is weakened: every
// decapsulation runs while a fresh ciphertext's false-positive rate is
// below the service's p, and every refusal comes once it has reached p.
func TestBFEFullFilterRefuses(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, nil, now)
	k := fx.svc.Keyring.Live(now)[0]
	zk := fx.svc.Keyring.LookupZData(k.Record.ID, k.BFE.Record.ZDataHash(), now)
	pk := k.BFE.Record.BFEPublicKey()
	ks := k.BFE.State()
	p := bfeOpts.BFEFalsePositiveRate
	full := false
	for i := 0; i < 400 && !full; i++ {
		ct, _, err := pk.Encapsulate(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		before := ks.FalsePositiveRate()
		_, err = zk.Decapsulate(ct)
		full = errors.Is(err, ErrBFEFull)
		if full != (before >= p*(1-1e-9)) {
			t.Fatalf("decapsulation %d at false-positive rate %.4f (p = %g, %v): %v", i, before, p, pk.Params(), err)
		}
	}
	if !full {
		t.Fatal("the filter never reported full")
	}
	params := ks.PublicKey().Params()
	if fill := float64(ks.Punctured()) / float64(params.M); fill < BFEFullFill(params, p) {
		t.Fatalf("refused at fill %.3f, below %.3f", fill, BFEFullFill(params, p))
	}
}

// Fleet members derive the same BFE key from the seed, without talking.
func TestFleetBFEKeysIdentical(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	seed := []byte("0123456789abcdef0123456789abcdef")
	a := newBFEFixture(t, seed, now)
	b := newFixtureWith(t, a.ca, a.leaf, bfeOpts, seed)
	b.svc.BFEDir = t.TempDir()
	if _, err := b.svc.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := b.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	ka, kb := a.svc.Keyring.Live(now)[0], b.svc.Keyring.Live(now)[0]
	if ka.BFE == nil || kb.BFE == nil || string(ka.BFE.Record.BFE) != string(kb.BFE.Record.BFE) {
		t.Fatal("fleet members' BFE keys differ")
	}
}

// A Dir saves the twin with its key and finds its key file on load.
func TestDirKeepsBFETwin(t *testing.T) {
	// Mid-period: within TwinLead of the next period the next key's twin
	// is published too (checked at the end).
	now := clock.Now().Truncate(time.Hour).Add(30 * time.Minute)
	dir := filepath.Join(t.TempDir(), "z")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	certFile, keyFile := fx.leaf.WritePEM(t, dir)
	cfg := ServiceConfig{Host: testHost, Port: testPort, Cert: filepath.Base(certFile), Key: filepath.Base(keyFile),
		BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 16}
	newBFEDir(t, dir, cfg, now)
	d2, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := d2.Keyring.Live(now)[0]
	if k.BFE == nil || k.BFE.Path == "" {
		t.Fatal("the twin did not survive a save and load")
	}
	if _, err := os.Stat(k.BFE.Path); err != nil {
		t.Fatal(err)
	}
	// The live key's twin is published; the next key's only from
	// TwinLead before its period, in place of its v1 record.
	live := d2.Keyring.Live(now)
	pub := d2.Records(now)
	if len(pub) != len(d2.Keyring.Published(now))+len(live) {
		t.Fatalf("%d records published", len(pub))
	}
	next := d2.Keyring.Published(now)[len(d2.Keyring.Published(now))-1]
	if next.BFE != nil && next.Record.NotBefore.After(now) {
		at := next.Record.NotBefore.Add(-TwinLead)
		before, after := d2.Records(at.Add(-time.Second)), d2.Records(at)
		if len(after) != len(before) || before[len(before)-1] != next.Record || after[len(after)-1] != next.BFE.Record {
			t.Fatalf("at TwinLead before the next period: %d records, %d a second before", len(after), len(before))
		}
	}
}

// TestTwinWindowAnswersFit: at every instant of a period, its last
// minutes and the rollover included, the TXT answer of a BFE service
// holds at most three records and fits a 1232-byte UDP answer
// (docs/ztls-spec.md, Section 7.1), and a client takes a twin with bfe=
// from it: the current one until the next period's not-before, the next
// one from then on, also from an answer fetched just before (a cache
// that kept it). With four records (the next v1 record and its twin,
// 1370 bytes) the answer was truncated from 5 minutes before each
// rollover and a UDP-only client got no Z-data.
func TestTwinWindowAnswersFit(t *testing.T) {
	// Certificates in these tests are valid around the ztls clock's now.
	nb := clock.Now().Truncate(time.Hour)
	instants := []time.Duration{0, 30 * time.Minute, 54*time.Minute + 59*time.Second, 55 * time.Minute,
		57*time.Minute + 30*time.Second, 59*time.Minute + 30*time.Second, time.Hour - time.Millisecond,
		time.Hour, time.Hour + 10*time.Second, time.Hour + 30*time.Minute}
	for _, seed := range [][]byte{nil, []byte("0123456789abcdef0123456789abcdef")} {
		fx := newBFEFixture(t, seed, nb)
		var last [][]string // the answer fetched last before the rollover
		for _, at := range instants {
			now := nb.Add(at)
			// The publisher's tick: keys ahead, then the records.
			if _, err := fx.svc.GenerateBFE(context.Background(), now); err != nil {
				t.Fatal(err)
			}
			if _, err := fx.svc.Rotate(now); err != nil {
				t.Fatal(err)
			}
			recs := fx.svc.Records(now)
			if size := txtAnswerSize(t, recs); len(recs) > 3 || size > 1232 {
				t.Errorf("fleet %v, at +%v: %d records, %d bytes", seed != nil, at, len(recs), size)
			}
			txt := make([][]string, len(recs))
			for i, r := range recs {
				txt[i] = r.TXT()
			}
			rec, _, err := selectOne(txt, fx.tlsa(), fx.certs(), testHost, testPort, fx.roots(), now)
			if err != nil || !rec.V2 || len(rec.BFE) == 0 || !rec.ValidAt(now) || rec.NotBefore.After(now) {
				t.Errorf("fleet %v, at +%v: the client took %+v (%v), want a twin valid now", seed != nil, at, rec, err)
			}
			if at < time.Hour {
				last = txt
			}
		}
		after := nb.Add(time.Hour + 5*time.Second)
		rec, _, err := selectOne(last, fx.tlsa(), fx.certs(), testHost, testPort, fx.roots(), after)
		if err != nil || !rec.V2 || !rec.NotBefore.Equal(nb.Add(time.Hour)) {
			t.Errorf("fleet %v: after the rollover, from the answer fetched just before: %+v (%v), want the next twin", seed != nil, rec, err)
		}
	}
}

// TestFleetBFEAcrossTwinWindow: two fleet members (one seed, one shared
// puncture log) at instants of the last minutes of a period, its last
// millisecond, the rollover and the window W after it. At each, the twin
// a client takes from what the fleet publishes is live on both members
// with one filter: a fresh flight is accepted by the member it reaches and
// refused as punctured by the other, and a second fresh one is accepted by
// the other. (The test's client in cmd/ztls took the next period's twin
// in the last minute, a key no member takes before its not-before.)
func TestFleetBFEAcrossTwinWindow(t *testing.T) {
	nb := clock.Now().Truncate(time.Hour)
	seed := []byte("0123456789abcdef0123456789abcdef")
	log := &bfe.MemoryPunctureLog{}
	var members []*fixture
	// k = 5 hashes (at 2^-10): the test decapsulates a dozen fresh
	// ciphertexts under one key and needs none to be a false positive;
	// bfeOpts (k = 1 of 496 slots) would refuse one about one run in twelve.
	opts := Options{BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 1024}
	for i := range 2 {
		var fx *fixture
		if i == 0 {
			fx = newFixture(t, "ecdsa-p256", opts, seed)
		} else {
			fx = newFixtureWith(t, members[0].ca, members[0].leaf, opts, seed)
		}
		fx.svc.BFEDir, fx.svc.BFEServe, fx.svc.BFELog = t.TempDir(), true, log
		t.Cleanup(fx.svc.CloseBFE)
		members = append(members, fx)
	}
	for _, at := range []time.Duration{55 * time.Minute, 57*time.Minute + 30*time.Second, 59*time.Minute + 30*time.Second,
		time.Hour - time.Millisecond, time.Hour, time.Hour + 5*time.Second, time.Hour + DefaultWindow} {
		now := nb.Add(at)
		for _, m := range members {
			if _, err := m.svc.GenerateBFE(context.Background(), now); err != nil {
				t.Fatal(err)
			}
			if _, err := m.svc.Rotate(now); err != nil {
				t.Fatal(err)
			}
		}
		var txt [][]string
		for _, r := range members[0].svc.Records(now) {
			txt = append(txt, r.TXT())
		}
		rec, _, err := selectOne(txt, members[0].tlsa(), members[0].certs(), testHost, testPort, members[0].roots(), now)
		if err != nil || !rec.V2 || rec.NotBefore.After(now) {
			t.Fatalf("at +%v: the client took %+v (%v), want the twin valid now", at, rec, err)
		}
		flight := func() []byte {
			ct, _, err := rec.BFEPublicKey().Encapsulate(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			return ct
		}
		decap := func(m *fixture, ct []byte) error {
			zk := m.svc.Keyring.LookupZData(rec.ID, rec.ZDataHash(), now)
			if zk == nil || zk.Decapsulate == nil {
				return errors.New("no live key with that twin")
			}
			_, err := zk.Decapsulate(ct)
			return err
		}
		ct := flight()
		if err := decap(members[0], ct); err != nil {
			t.Fatalf("at +%v: member 0 refused a fresh flight: %v", at, err)
		}
		if err := decap(members[1], ct); !errors.Is(err, bfe.ErrPunctured) {
			t.Fatalf("at +%v: member 1 took the replay: %v", at, err)
		}
		if err := decap(members[1], flight()); err != nil {
			t.Fatalf("at +%v: member 1 refused a fresh flight: %v", at, err)
		}
	}
}

// txtAnswerSize is the size of the UDP answer to the TXT question of
// recs' service, packed as an authority does (names compressed, an OPT
// record for a 1232-byte EDNS0 buffer).
func txtAnswerSize(t *testing.T, recs []*Record) int {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(TXTName(testHost, testPort), dns.TypeTXT)
	m.Response, m.Authoritative, m.Compress = true, true, true
	for _, r := range recs {
		m.Answer = append(m.Answer, r.TXTRR(time.Minute))
	}
	m.SetEdns0(1232, false)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// A ClientHello naming a BFE record costs the server ten pairings, so
// decapsulations are bounded (BFEConcurrency): with every slot taken, a
// valid ciphertext is refused at once as busy, without a puncture (the
// handshake continues as TLS 1.3), and decapsulates once a slot is free.
func TestBFEDecapsulationsBounded(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, nil, now)
	k := fx.svc.Keyring.Live(now)[0]
	zk := fx.svc.Keyring.LookupZData(k.Record.ID, k.BFE.Record.ZDataHash(), now)
	ct, want, err := k.BFE.Record.BFEPublicKey().Encapsulate(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for range BFEConcurrency() {
		bfeSlots <- struct{}{} // decapsulations under way elsewhere
	}
	before := k.BFE.State().Punctured()
	_, err = zk.Decapsulate(ct)
	for range BFEConcurrency() {
		<-bfeSlots
	}
	if !errors.Is(err, ErrBFEBusy) {
		t.Fatalf("with every slot taken: %v, want ErrBFEBusy", err)
	}
	if got := k.BFE.State().Punctured(); got != before {
		t.Fatalf("a refused decapsulation punctured %d slots", got-before)
	}
	got, err := zk.Decapsulate(ct)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("with a free slot: %v", err)
	}
}

// newBFEDir makes a Dir of cfg in dir, generates its BFE key and rotates
// it at now, so that the directory holds a serving key with its BFE twin.
func newBFEDir(t *testing.T, dir string, cfg ServiceConfig, now time.Time) {
	t.Helper()
	d, err := NewDir(dir, cfg, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Service.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Rotate(now); err != nil {
		t.Fatal(err)
	}
}
