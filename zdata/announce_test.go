package zdata

import (
	"bytes"
	"crypto/rand"
	"strconv"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
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
