//go:build linux

package bfe

import (
	"os"
	"syscall"
)

// dataSyncFile is a key file whose Sync is fdatasync(2): puncturing
// overwrites slots in place and never changes the file's size, so the
// data written is all that must reach the disk before a key is used, not
// the inode's timestamps that fsync(2) writes too.
type dataSyncFile struct{ *os.File }

func (f dataSyncFile) Sync() error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func slotFileOf(f *os.File) slotFile { return dataSyncFile{f} }
