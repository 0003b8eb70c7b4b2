//go:build !unix

package zdata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// ClaimServing cannot lock a directory on this system: a server here
// must share a strike register (see the unix version).
func (d *Dir) ClaimServing() (release func(), err error) {
	return nil, errors.New("zdata: cannot claim a Z-data directory on this system; share a strike register instead")
}

// Serving is the claim of the one server using a Z-data directory's keys
// with a private strike register (see the unix version).
type Serving struct {
	Register *tls13.MemoryStrikeRegister
}

// ServeAlone cannot claim a directory on this system.
func (d *Dir) ServeAlone(max int, now time.Time) (*Serving, error) {
	_, err := d.ClaimServing()
	return nil, err
}

// Close does nothing here.
func (s *Serving) Close(now time.Time) error { return nil }

// ClaimRotation cannot lock here: the caller only reloads.
func (d *Dir) ClaimRotation() (release func(), ok bool, err error) { return nil, false, nil }

// ShareServing has nothing to lock here (ClaimServing refuses, so every
// server shares a register); it drops a saved private register.
func (d *Dir) ShareServing() (release func(), err error) {
	if err := os.Remove(filepath.Join(d.Path, StrikeStateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	return func() {}, nil
}

// lockBFEGeneration cannot lock on this system: ok is false, so leftover
// temporary key files are not removed here (see the unix version).
func lockBFEGeneration(dir string, wait bool) (release func(), ok bool, err error) {
	return func() {}, false, nil
}
