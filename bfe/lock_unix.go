//go:build unix

package bfe

import (
	"fmt"
	"os"
	"syscall"
)

// lockFile takes an exclusive advisory lock on the key file, so that two
// processes never hold one epoch key: each would have its own idea of what
// is punctured, and both could decapsulate one ciphertext.
func lockFile(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return fmt.Errorf("bfe: %s is in use by another process: %w", f.Name(), err)
	}
	return nil
}
