//go:build unix

package zdata

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Point 7 of the security review, mixed registers on one directory: a
// server with a shared register and one with a private register would
// each accept a flight the other has seen. Servers sharing a register
// run together; while any of them does, a private claim fails, and
// while a private server holds the claim, a shared server is refused
// (with the holder's pid) and holds nothing.
func TestShareServingExcludesPrivate(t *testing.T) {
	d := &Dir{Path: t.TempDir()}
	state := filepath.Join(d.Path, StrikeStateFile)
	writeState := func() {
		if err := os.WriteFile(state, []byte("saved"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeState()
	shareA, err := d.ShareServing()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(state); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a shared server kept the private register's saved state: %v", err)
	}
	shareB, err := d.ShareServing()
	if err != nil {
		t.Fatalf("a second server sharing the register: %v", err)
	}
	if _, err := d.ClaimServing(); !errors.Is(err, ErrDirServed) || !strings.Contains(err.Error(), "shared strike register") {
		t.Fatalf("private claim while two shared servers run: %v", err)
	}
	shareA()
	if _, err := d.ClaimServing(); !errors.Is(err, ErrDirServed) {
		t.Fatalf("private claim while one shared server runs: %v", err)
	}
	shareB()

	release, err := d.ClaimServing()
	if err != nil {
		t.Fatalf("private claim once the shared servers stopped: %v", err)
	}
	writeState()
	if _, err := d.ShareServing(); !errors.Is(err, ErrDirServed) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("shared server while a private one runs: %v", err)
	}
	if _, err := os.Stat(state); err != nil {
		t.Fatalf("a refused shared server touched the private server's state: %v", err)
	}
	// The refused shared server holds nothing: the private server's
	// claim is still exclusive.
	if _, err := d.ClaimServing(); !errors.Is(err, ErrDirServed) {
		t.Fatalf("second private claim: %v", err)
	}
	release()
	shareC, err := d.ShareServing()
	if err != nil {
		t.Fatalf("shared server once the private one stopped: %v", err)
	}
	shareC()
}
