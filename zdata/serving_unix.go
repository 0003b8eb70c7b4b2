//go:build unix

package zdata

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// ClaimServing marks this process as the one server using the
// directory's keys with a private strike register: it takes an exclusive
// advisory lock on DIR/serving.lock (released when the process exits or
// release is called) and writes its pid there. Two servers holding the
// same Z-data keys, each with a register of its own, both accept one
// captured first flight (docs/ztls-spec.md, Section 5); a server that finds the lock held
// (by another private server, or by servers sharing a register, which
// hold it shared: ShareServing) gets ErrDirServed, and should either share
// one strike register with the others or not take early data.
func (d *Dir) ClaimServing() (release func(), err error) {
	path := filepath.Join(d.Path, ServingLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			// Servers sharing a register hold the lock shared and
			// write no pid; a private server writes its own.
			if who := strings.TrimSpace(string(pid)); who != "" {
				return nil, fmt.Errorf("%w with a private strike register (pid %s, lock %s)", ErrDirServed, who, path)
			}
			return nil, fmt.Errorf("%w with a shared strike register (lock %s held shared)", ErrDirServed, path)
		}
		return nil, fmt.Errorf("zdata: locking %s: %v", path, err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return func() {
		f.Truncate(0)
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// Serving is the claim of the one server using a Z-data directory's keys
// with a private strike register (ServeAlone).
type Serving struct {
	// Register is the server's strike register (tls13.Config.StrikeRegister).
	Register *tls13.MemoryStrikeRegister
	release  func()
	path     string
}

// ServeAlone claims the directory (ClaimServing) and opens a strike
// register of at most max entries whose memory is as long as the
// directory's history allows, so a restart costs no early data when it
// need not:
//   - the previous server stopped cleanly (Serving.Close saved its
//     register): the memory continues, entries and start;
//   - it did not (a crash, a kill): what it accepted is unknown, so the
//     register starts at now and refuses early data that may predate it
//     (up to two freshness windows);
//   - no server ever claimed the directory: nothing was accepted under
//     its keys, so the register has seen everything (the zero start).
//
// now is the clock of tls13.Config.Time.
func (d *Dir) ServeAlone(max int, now time.Time) (*Serving, error) {
	lockPath := filepath.Join(d.Path, ServingLockFile)
	_, err := os.Stat(lockPath)
	served := err == nil
	release, err := d.ClaimServing()
	if err != nil {
		return nil, err
	}
	s := &Serving{release: release, path: filepath.Join(d.Path, StrikeStateFile)}
	switch data, err := os.ReadFile(s.path); {
	case err == nil:
		s.Register, err = tls13.ReadMemoryStrikeRegister(data, max, now)
		if err != nil {
			s.Register = tls13.NewMemoryStrikeRegister(max, now)
		}
		// Until the next clean stop the file is stale: a crash must
		// not leave it looking like a continuation.
		if err := os.Remove(s.path); err != nil {
			release()
			return nil, fmt.Errorf("zdata: %v", err)
		}
	case !served:
		s.Register = tls13.NewMemoryStrikeRegister(max, time.Time{})
	default:
		s.Register = tls13.NewMemoryStrikeRegister(max, now)
	}
	return s, nil
}

// Close saves the register for the next server on the directory and
// releases the claim. Call it once the server accepts no more early data
// (its listener closed, its connections done), with the same clock.
func (s *Serving) Close(now time.Time) error {
	defer s.release()
	var buf bytes.Buffer
	if _, err := s.Register.WriteTo(&buf, now); err != nil {
		return err
	}
	return writeFileAtomic(s.path, buf.Bytes(), 0o600)
}

// RotationLockFile is the file ClaimRotation locks in a Z-data directory.
const RotationLockFile = "rotate.lock"

// ClaimRotation makes this process the one that rotates the directory's
// keys (adds the next period's key, drops expired ones) while it lives:
// servers sharing a directory (a fleet with a shared register) would
// otherwise each write a different next key. ok is false when another
// process holds the claim; it then only reloads what that one writes, and
// tries again to take the rotation over when that one stops
// (RotationClaim, which also marks the directory rotating).
func (d *Dir) ClaimRotation() (release func(), ok bool, err error) {
	path := filepath.Join(d.Path, RotationLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("zdata: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("zdata: locking %s: %v", path, err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, true, nil
}

// ShareServing marks this process as one of the servers using the
// directory's keys with a shared strike register, for as long as it
// lives (or until release is called): it holds a shared advisory lock on
// DIR/serving.lock, so any number of servers sharing a register run
// together, while ClaimServing (a server with a private register) fails
// until the last of them stops; and it fails with ErrDirServed, holding
// nothing, while a server with a private register holds the claim: that
// server would accept a flight the shared register has seen, and this
// one a flight only that server has seen.
//
// What a shared server accepts is in its register, not in
// DIR/strike.state, so the directory counts as served and any saved
// private register is dropped: a server that later serves the directory
// alone (ServeAlone) starts its memory at its own start instead of
// trusting a state that misses what the fleet accepted.
func (d *Dir) ShareServing() (release func(), err error) {
	path := filepath.Join(d.Path, ServingLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("zdata: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		pid, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			who := strings.TrimSpace(string(pid))
			if who == "" {
				who = "unknown"
			}
			return nil, fmt.Errorf("%w with a private strike register (pid %s, lock %s)", ErrDirServed, who, path)
		}
		return nil, fmt.Errorf("zdata: locking %s: %v", path, err)
	}
	// No private server holds the claim: a pid left by one that crashed
	// is stale, and would name the wrong holder in ClaimServing's error.
	f.Truncate(0)
	if err := os.Remove(filepath.Join(d.Path, StrikeStateFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		return nil, fmt.Errorf("zdata: %v", err)
	}
	return func() {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// lockBFEGeneration takes the lock a BFE key generation holds on dir
// (dir/generate.lock) for as long as it writes its temporary files, so
// that a temporary file found while holding it belongs to no running
// generation (a killed one left it). wait blocks until it is free;
// otherwise ok is false when another generation holds it.
func lockBFEGeneration(dir string, wait bool) (release func(), ok bool, err error) {
	path := filepath.Join(dir, bfeGenerationLock)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("zdata: %v", err)
	}
	how := syscall.LOCK_EX
	if !wait {
		how |= syscall.LOCK_NB
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("zdata: locking %s: %v", path, err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, true, nil
}
