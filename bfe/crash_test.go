package bfe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// memFile is a key file in memory that models a crash: writes are held
// until Sync makes them durable, and a crash loses the ones not synced
// (keepUnsynced=false) or keeps them all (true).
type memFile struct {
	mu      sync.Mutex
	durable []byte
	pending []memWrite
	syncErr error
	// syncGate, when set, holds every Sync until it receives (or is
	// closed), so a test can see what happens while an fsync is slow.
	syncGate chan struct{}
}

type memWrite struct {
	off  int64
	data []byte
}

func newMemFile(b []byte) *memFile { return &memFile{durable: bytes.Clone(b)} }

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if off >= int64(len(f.durable)) {
		return 0, fmt.Errorf("read at %d: end of file", off)
	}
	n := copy(p, f.durable[off:])
	for _, w := range f.pending { // what the OS would show: unsynced writes too
		lo, hi := max(off, w.off), min(off+int64(n), w.off+int64(len(w.data)))
		if lo < hi {
			copy(p[lo-off:hi-off], w.data[lo-w.off:hi-w.off])
		}
	}
	if n < len(p) {
		return n, fmt.Errorf("read at %d: short", off)
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending = append(f.pending, memWrite{off, bytes.Clone(p)})
	return len(p), nil
}

func (f *memFile) Sync() error {
	if f.syncGate != nil {
		<-f.syncGate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.syncErr != nil {
		return f.syncErr
	}
	f.applyPending()
	return nil
}

func (f *memFile) applyPending() {
	for _, w := range f.pending {
		copy(f.durable[w.off:], w.data)
	}
	f.pending = nil
}

func (f *memFile) Close() error { return nil }

// afterCrash is the file a restarted process finds.
func (f *memFile) afterCrash(keepUnsynced bool) *memFile {
	f.mu.Lock()
	defer f.mu.Unlock()
	g := &memFile{durable: bytes.Clone(f.durable)}
	if keepUnsynced {
		g.pending = slices.Clone(f.pending)
		g.applyPending()
	}
	return g
}

type crash struct{ step string }

// openMem opens a KeyState on an in-memory copy of a key file.
func openMem(t testing.TB, file []byte) (*KeyState, *memFile) {
	t.Helper()
	f := newMemFile(file)
	ks, err := openKeyState(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ks, f
}

func keyFile(t testing.TB, params Params) []byte {
	t.Helper()
	_, path := newTestKeyState(t, params, nil)
	return readFile(t, path)
}

// TestWriteAheadOrder: the slot is read and all positions erased before
// anything is computed with it, the fsync runs while the key is computed,
// and the key is returned only once the fsync has returned.
func TestWriteAheadOrder(t *testing.T) {
	ks, _ := openMem(t, keyFile(t, defaultTestParams))
	var steps []string
	ks.hook = func(s string) { steps = append(steps, s) }
	ct, _, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Decapsulate(context.Background(), ct); err != nil {
		t.Fatal(err)
	}
	at := func(s string) int { return slices.Index(steps, s) }
	if !(at("read") >= 0 && at("read") < at("erase") && at("erase") < at("sync") &&
		at("sync") < at("compute") && at("compute") < at("verified") &&
		at("verified") < at("synced") && at("synced") == len(steps)-1) {
		t.Fatalf("steps %v: want read, erase..., sync, compute, verified, synced", steps)
	}
}

// TestKeyWaitsForSync holds the fsync and checks that the key is computed
// meanwhile but not returned until the fsync is done.
func TestKeyWaitsForSync(t *testing.T) {
	ks, f := openMem(t, keyFile(t, defaultTestParams))
	f.syncGate = make(chan struct{})
	verified := make(chan struct{})
	ks.hook = func(s string) {
		if s == "verified" {
			close(verified)
		}
	}
	ct, want, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		key []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		key, err := ks.Decapsulate(context.Background(), ct)
		done <- result{key, err}
	}()
	<-verified // the pairings finished while the fsync is held
	// A Decapsulate that did not wait would return within microseconds of
	// "verified"; one that waits returns only after the gate opens, so
	// this bound can only catch the fault, never fail a correct one.
	select {
	case r := <-done:
		t.Fatalf("Decapsulate returned (%x, %v) before its fsync", r.key, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(f.syncGate)
	r := <-done
	if r.err != nil || !bytes.Equal(r.key, want) {
		t.Fatalf("Decapsulate = %x, %v; want %x", r.key, r.err, want)
	}
}

// TestCrashNeverUnpunctures simulates a crash at every step of
// Decapsulate, losing or keeping the writes not yet synced, and restarts
// from what is on disk. A crash once the erasure is durable (from the step
// after which the key could be returned) must leave the ciphertext
// unusable; a crash before that may leave it decapsulable once, which is
// safe because nothing computed from it left the process before the crash.
func TestCrashNeverUnpunctures(t *testing.T) {
	file := keyFile(t, defaultTestParams)
	steps := []string{"read", "erase", "sync", "compute", "verified", "synced"}
	for _, step := range steps {
		for _, keep := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/keepUnsynced=%v", step, keep), func(t *testing.T) {
				ks, f := openMem(t, file)
				ct, _, err := ks.PublicKey().Encapsulate(nil)
				if err != nil {
					t.Fatal(err)
				}
				durable := false
				ks.hook = func(s string) {
					if s == "synced" {
						durable = true
					}
					if s == step {
						panic(crash{s})
					}
				}
				key, crashed := decapsulateUntilCrash(ks, ct)
				if !crashed || key != nil {
					t.Fatalf("no crash at %s (key %x)", step, key)
				}

				restarted, err := openKeyState(f.afterCrash(keep), nil)
				if err != nil {
					t.Fatal(err)
				}
				_, err = restarted.Decapsulate(context.Background(), ct)
				switch {
				case durable && !errors.Is(err, ErrPunctured):
					t.Fatalf("crash after the erasure was durable: restarted Decapsulate = %v, want ErrPunctured", err)
				case err == nil:
					// Before durability: allowed once, never twice.
					if _, err := restarted.Decapsulate(context.Background(), ct); !errors.Is(err, ErrPunctured) {
						t.Fatalf("second decapsulation after restart: %v", err)
					}
				}
				if durable {
					assertErased(t, restarted, ct)
				}
			})
		}
	}
}

func decapsulateUntilCrash(ks *KeyState, ct []byte) (key []byte, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(crash); !ok {
				panic(r)
			}
			crashed = true
		}
	}()
	key, _ = ks.Decapsulate(context.Background(), ct)
	return key, false
}

// assertErased checks on disk that every position of ct is zeros.
func assertErased(t *testing.T, ks *KeyState, ct []byte) {
	t.Helper()
	for _, i := range positions(&ks.pk.digest, ks.pk.params, ct[:g2Compressed], nil) {
		var slot [SlotSize]byte
		if _, err := ks.file.ReadAt(slot[:], slotOffset(i)); err != nil {
			t.Fatal(err)
		}
		if !allZero(slot[:]) {
			t.Fatalf("slot %d of the ciphertext is still on disk", i)
		}
	}
}

// TestSyncFailureRefuses: when the erasure cannot be made durable no key
// is returned, and the positions are not used again by this process.
func TestSyncFailureRefuses(t *testing.T) {
	ks, f := openMem(t, keyFile(t, defaultTestParams))
	f.syncErr = errors.New("EIO")
	ct, _, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if key, err := ks.Decapsulate(context.Background(), ct); err == nil || key != nil {
		t.Fatalf("Decapsulate with a failing fsync = %x, %v", key, err)
	}
	f.syncErr = nil
	if _, err := ks.Decapsulate(context.Background(), ct); !errors.Is(err, ErrPunctured) {
		t.Fatalf("retry after a failed fsync: %v, want ErrPunctured", err)
	}
}
