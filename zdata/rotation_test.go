//go:build unix

package zdata

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// The process holding a directory's rotation claim stops; one that only
// read the directory takes the claim at its next Try, continues from the
// keys on disk (the holder's last writes included, though it had not read
// them yet), issues the next period's key once inside the lead time, and
// from then on is the rotating process in every respect: a reloaded
// certificate gets keys at once, saved for the others.
func TestRotationClaimTakeOver(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	old := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	_, path := newDir(t, ca, old, nil)
	setLeadTime(t, path, "10m")
	start := clock.Now().UTC().Truncate(time.Hour)
	before, inLead := start.Add(45*time.Minute), start.Add(55*time.Minute) // the lead time starts at :50

	holder, reader := loadDir(t, path), loadDir(t, path)
	hc, rc := NewRotationClaim(holder), NewRotationClaim(reader)
	if took, err := hc.Try(before); err != nil || !took || !hc.Held() || !holder.rotating {
		t.Fatalf("first claim: took %v, %v; held %v, rotating %v", took, err, hc.Held(), holder.rotating)
	}
	if took, err := rc.Try(before); err != nil || took || rc.Held() || reader.rotating {
		t.Fatalf("second claim while the first is held: took %v, %v; held %v", took, err, rc.Held())
	}
	if added, err := holder.Rotate(before); err != nil || len(added) != 1 {
		t.Fatalf("rotation before the lead time: %d keys, %v", len(added), err)
	}
	current := holder.Keyring.All()[0]

	hc.Release()
	if hc.Held() || holder.rotating {
		t.Fatal("a released claim still rotates")
	}
	if _, err := os.Stat(filepath.Join(path, RotationLockFile)); err != nil {
		t.Fatalf("the lock file, as a stopped process leaves it: %v", err)
	}
	took, err := rc.Try(inLead)
	if err != nil || !took || !rc.Held() || !reader.rotating {
		t.Fatalf("take-over: took %v, %v; held %v, rotating %v", took, err, rc.Held(), reader.rotating)
	}
	if took, err := rc.Try(inLead); err != nil || took {
		t.Fatalf("a claim already held is taken again: %v, %v", took, err)
	}
	if took, err := hc.Try(inLead); err != nil || took {
		t.Fatalf("the old holder takes the claim back from the new one: %v, %v", took, err)
	}
	added, err := reader.Rotate(inLead)
	if err != nil || len(added) != 1 || !added[0].Record.NotBefore.Equal(start.Add(time.Hour)) {
		t.Fatalf("rotation after the take-over: %v, added %v", err, added)
	}
	onDisk := loadDir(t, path).Keyring.All()
	if len(onDisk) != 2 || onDisk[0].Record.ID != current.Record.ID {
		t.Fatalf("on disk: %d keys; want the holder's key %d kept and the next period's", len(onDisk), current.Record.ID)
	}

	next := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	replaceCert(t, reader, next)
	if changed, err := reader.Reload(); err != nil || !changed || !signedBy(reader, next.Chain[0]) {
		t.Fatalf("reload after the take-over: %v, %v; keys of the new certificate: %v", changed, err, signedBy(reader, next.Chain[0]))
	}
	if again := loadDir(t, path); !signedBy(again, next.Chain[0]) {
		t.Fatal("the new rotating process did not save the keys of the reloaded certificate")
	}
}

// A fleet has nothing to claim: every member derives its keys, so Try
// takes no lock and leaves the directory as it is.
func TestRotationClaimFleet(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	d, path := newDir(t, ca, leaf, []byte("0123456789abcdef0123456789abcdef"))
	c := NewRotationClaim(d)
	if took, err := c.Try(clock.Now()); err != nil || took || c.Held() || d.rotating {
		t.Fatalf("fleet claim: took %v, %v", took, err)
	}
	if _, err := os.Stat(filepath.Join(path, RotationLockFile)); !os.IsNotExist(err) {
		t.Fatalf("a fleet member took the rotation lock: %v", err)
	}
	if _, err := d.Refresh(clock.Now()); err != nil || len(d.Keyring.Live(clock.Now())) == 0 {
		t.Fatalf("a fleet member derives no keys: %v", err)
	}
	var none *RotationClaim
	if none.Held() {
		t.Fatal("a nil claim is held")
	}
	none.Release()
}

// setLeadTime writes lead_time into the directory's service.json.
func setLeadTime(t *testing.T, path, lead string) {
	t.Helper()
	d := loadDir(t, path)
	d.Config.LeadTime = lead
	if err := d.Save(); err != nil {
		t.Fatal(err)
	}
}

func loadDir(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
