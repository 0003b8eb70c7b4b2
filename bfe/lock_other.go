//go:build !unix

package bfe

import "os"

// lockFile is a no-op where flock(2) does not exist: one process per key
// file is then the operator's duty.
func lockFile(*os.File) error { return nil }
