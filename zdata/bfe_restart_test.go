package zdata

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBFERestartAttachesLiveKeyPastOldOne: a fleet member restarted after
// a rollover holds, as loaded from its directory, the previous period's
// key, whose BFE file is gone (removed once its life ended). Its first
// rotation must still give the live key its BFE state. It did not: the
// old key's missing file stopped AttachBFE before the live key, and every
// BFE flight was refused ("no live Z-data record") until the next tick
// (the soak's bug 2, docs/soak.md).
func TestBFERestartAttachesLiveKeyPastOldOne(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	nb := time.Unix(1_800_000_000, 0).Truncate(time.Hour)
	before := newBFEFixture(t, seed, nb.Add(-10*time.Minute))
	var old *Key
	for _, k := range before.svc.Keyring.All() {
		if k.Record.NotAfter.Equal(nb) {
			old = k
		}
	}
	if old == nil || old.BFE == nil {
		t.Fatal("no key with its twin for the period before nb")
	}
	// The member ran past the rollover (its old key's file went), then
	// was killed.
	now := nb.Add(time.Minute)
	if _, err := before.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(old.BFE.Path); !os.IsNotExist(err) {
		t.Fatalf("the old key's BFE file is still there: %v", err)
	}
	before.svc.CloseBFE()

	after := newFixtureWith(t, before.ca, before.leaf, bfeOpts, seed)
	after.svc.BFEDir, after.svc.BFEServe = before.svc.BFEDir, true
	t.Cleanup(after.svc.CloseBFE)
	after.svc.Keyring.Add(old) // as LoadDir finds it on disk
	if _, err := after.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	live := after.svc.Keyring.Live(now)
	if len(live) != 1 || live[0].BFE == nil {
		t.Fatalf("%d live keys after the restart, want the current one with its twin", len(live))
	}
	twin := live[0].BFE.Record
	zk := after.svc.Keyring.LookupZData(twin.ID, twin.ZDataHash(), now)
	if zk == nil || zk.Decapsulate == nil {
		t.Fatal("the live key's twin is not served after the restart")
	}
	ct, _, err := twin.BFEPublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zk.Decapsulate(ct); err != nil {
		t.Fatalf("a fresh BFE flight after the restart: %v", err)
	}
}

// TestBFEKilledGenerationLeavesNoSlots: a generation killed midway leaves
// its temporary key file, which in a fleet holds the slots of the very key
// the seed derives again; punctures never erase them, so they must go (the
// soak's bug 4). The next rotation removes them, and so does the next
// generation; a generation in progress keeps its own.
func TestBFEKilledGenerationLeavesNoSlots(t *testing.T) {
	seed := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1_800_000_000, 0)
	fx := newBFEFixture(t, seed, now)
	dir := fx.svc.BFEDir
	live := fx.svc.Keyring.Live(now)[0].BFE.Path
	secret, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	leftover := func() []string {
		t.Helper()
		var out []string
		for _, pattern := range []string{"*.tmp-*"} {
			m, _ := filepath.Glob(filepath.Join(dir, pattern))
			out = append(out, m...)
		}
		return out
	}
	kill := func() {
		t.Helper()
		base := filepath.Base(live)
		for _, n := range []string{base + ".tmp-123456", base + ".points.tmp-654321"} {
			if err := os.WriteFile(filepath.Join(dir, n), secret, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}

	// A generation runs (it holds the lock): its files stay.
	kill()
	release, ok, err := lockBFEGeneration(dir, false)
	if err != nil || !ok {
		t.Fatalf("lock: %v %v", ok, err)
	}
	if _, err := fx.svc.Rotate(now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := len(leftover()); n != 2 {
		t.Fatalf("a running generation's files were removed: %d left", n)
	}
	release()

	// Killed: the next rotation removes them.
	if _, err := fx.svc.Rotate(now.Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if l := leftover(); len(l) != 0 {
		t.Fatalf("a killed generation's files survived a rotation: %v", l)
	}

	// Killed again: the next generation removes them before it starts.
	kill()
	if _, err := fx.svc.GenerateBFE(context.Background(), now.Add(3*time.Second)); err != nil {
		t.Fatal(err)
	}
	if l := leftover(); len(l) != 0 {
		t.Fatalf("a killed generation's files survived the next generation: %v", l)
	}
}
