package zdata

import (
	"bytes"
	"crypto/rand"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// Key issuance sets bit 30 of a classical Zdata_id exactly when the
// service announces v3 records (docs/ztls-spec.md, Section 9.6): random
// ids whose draw has the bit set or clear, and fleet ids; an announcing
// fleet's classical and v3 ids of one epoch differ; a v3 service cannot
// "announce".
func TestAnnouncePQBitIssued(t *testing.T) {
	now := clock.Now()
	for _, announce := range []bool{false, true} {
		f := newFixture(t, "ecdsa-p256", Options{AnnouncePQ: announce}, nil)
		for _, fill := range []byte{0x00, 0xff} { // the id's random bytes: bit 30 clear, then set
			// Whatever the key generation takes from it, the id's 4 bytes are fill.
			rnd := bytes.NewReader(bytes.Repeat([]byte{fill}, 4096))
			k, err := f.svc.Issue(now, rnd)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.Record.AnnouncesPQ(); got != announce {
				t.Errorf("AnnouncePQ %v, id bytes %#x: id %#x announces %v", announce, fill, k.Record.ID, got)
			}
		}
		fleet := newFixture(t, "ecdsa-p256", Options{AnnouncePQ: announce}, bytes.Repeat([]byte{9}, 32))
		k, err := fleet.svc.Epoch(EpochOf(now))
		if err != nil {
			t.Fatal(err)
		}
		if want := classicalID(EpochID(EpochOf(now)), announce); k.Record.ID != want || k.Record.AnnouncesPQ() != announce {
			t.Errorf("fleet id %#x, want %#x (announce %v)", k.Record.ID, want, announce)
		}
	}
	pqFleet := newFixture(t, "ecdsa-p256", Options{Group: GroupX25519MLKEM768}, bytes.Repeat([]byte{9}, 32))
	pk, err := pqFleet.svc.Epoch(EpochOf(now))
	if err != nil {
		t.Fatal(err)
	}
	if pk.Record.AnnouncesPQ() || pk.Record.ID == classicalID(EpochID(EpochOf(now)), true) {
		t.Errorf("v3 fleet id %#x collides with the announcing classical id or announces", pk.Record.ID)
	}
	if _, err := NewService(testHost, testPort, f2cert(pqFleet.leaf), Options{Group: GroupX25519MLKEM768, AnnouncePQ: true}, nil); err == nil {
		t.Error("a v3 service accepted AnnouncePQ")
	}
}

// The bit is signed: a path that sets it in a non-announcing record, or
// clears it in an announcing one, makes the signature fail.
func TestAnnouncePQBitForgedFails(t *testing.T) {
	now := clock.Now()
	for _, announce := range []bool{false, true} {
		f := newFixture(t, "ecdsa-p256", Options{AnnouncePQ: announce}, nil)
		k, err := f.svc.Issue(now.Add(-time.Minute), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := selectOne(txtOf(k), f.tlsa(), nil, testHost, testPort, f.roots(), now); err != nil {
			t.Fatalf("the record as issued: %v", err)
		}
		txt := k.Record.TXT()
		txt[4] = strconv.FormatUint(uint64(k.Record.ID^AnnouncePQBit), 10) // field 5, the Zdata_id
		r, _, err := selectOne([][]string{txt}, f.tlsa(), nil, testHost, testPort, f.roots(), now)
		if r != nil || ReasonOf(err) != ReasonBadSignature {
			t.Errorf("announce %v, bit flipped: selected %v, %v; want bad signature", announce, r, err)
		}
	}
}

// Options.PostQuantum: a classical Service issues each period's v3 key
// beside its classical one, in one keyring, the classical ids
// announcing; in fleet mode the ids of an epoch are uint32(epoch) with
// bit 30 (classical) and bit 31 (v3). A directory with post_quantum
// keeps and reloads both (the v3 key's 96 private bytes).
func TestServicePostQuantum(t *testing.T) {
	now := clock.Now()
	for _, seed := range [][]byte{nil, bytes.Repeat([]byte{3}, 32)} {
		f := newFixture(t, "ecdsa-p256", Options{PostQuantum: true}, seed)
		if _, err := f.svc.Rotate(now); err != nil {
			t.Fatal(err)
		}
		var v3, classical int
		for _, k := range f.svc.Keyring.All() {
			r := k.Record
			switch {
			case r.V3 && k.KEM != nil && len(r.BFE) == 0:
				v3++
				if seed != nil && r.ID != EpochID(EpochOf(r.NotBefore))|PQEpochIDBit {
					t.Errorf("fleet v3 id %#x", r.ID)
				}
			case !r.V3 && r.AnnouncesPQ():
				classical++
				if seed != nil && r.ID != EpochID(EpochOf(r.NotBefore))|AnnouncePQBit {
					t.Errorf("fleet classical id %#x", r.ID)
				}
			default:
				t.Errorf("record %d: v3 %v, announces %v", r.ID, r.V3, r.AnnouncesPQ())
			}
		}
		if v3 != 2 || classical != 2 {
			t.Fatalf("seed %v: %d v3 and %d classical keys, want 2 and 2 (this period and the next)", seed != nil, v3, classical)
		}
		rec, _, err := selectOne(txtOf(f.svc.Keyring.All()...), f.tlsa(), nil, testHost, testPort, f.roots(), now)
		if err != nil || !rec.V3 {
			t.Fatalf("selected %v, %v; want a v3 record", rec, err)
		}
	}
	if _, err := NewService(testHost, testPort, f2cert(newFixture(t, "ecdsa-p256", Options{}, nil).leaf), Options{Group: GroupX25519MLKEM768, PostQuantum: true}, nil); err == nil {
		t.Error("a v3 service accepted PostQuantum")
	}

	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	certFile, keyFile := leaf.WritePEM(t, t.TempDir())
	path := filepath.Join(t.TempDir(), "zd")
	d, err := NewDir(path, ServiceConfig{Host: testHost, Port: testPort, Cert: certFile, Key: keyFile, PostQuantum: true}, nil, now)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(loaded.Records(now)), len(d.Records(now)); got != want || want != 4 {
		t.Fatalf("reloaded %d records, made %d, want 4", got, want)
	}
	for _, r := range loaded.Records(now) {
		if k := loaded.Keyring.Get(r.ID); k == nil || (r.V3 && k.KEM == nil) {
			t.Fatalf("record %d (v3 %v) without its private key after the reload", r.ID, r.V3)
		}
	}
	if _, err := loaded.Rotate(now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
}
