//go:build unix

package zdata

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ServingLockFile is the file ClaimServing locks in a Z-data directory.
const ServingLockFile = "serving.lock"

// ErrDirServed is ClaimServing's error when another live process serves
// the directory.
var ErrDirServed = errors.New("zdata: another server already serves this Z-data directory")

// Fleet reports whether other servers may hold this directory's keys by
// construction: a fleet seed derives the same keys on every member.
func (d *Dir) Fleet() bool { return d.Service.Seed != nil }

// ClaimServing marks this process as the one server using the
// directory's keys with a private strike register: it takes an exclusive
// advisory lock on DIR/serving.lock (released when the process exits or
// release is called) and writes its pid there. Two servers holding the
// same Z-data keys, each with a register of its own, both accept one
// captured first flight (ZTLS-SPEC §5); a server that finds the lock held
// gets ErrDirServed with the other's pid, and should either share one
// strike register with it or not take early data. Servers sharing a
// register need no claim.
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
			who := strings.TrimSpace(string(pid))
			if who == "" {
				who = "unknown"
			}
			return nil, fmt.Errorf("%w (pid %s, lock %s)", ErrDirServed, who, path)
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
