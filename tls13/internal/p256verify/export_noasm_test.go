//go:build !amd64 || !gc || purego

package p256verify

import "testing"

// forEachPath runs f: without assembly every routine is already Go.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	t.Run("go", f)
}

// withGoPath runs f: it is on the Go code already.
func withGoPath(f func()) { f() }
