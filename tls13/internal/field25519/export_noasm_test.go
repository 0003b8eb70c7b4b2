//go:build !amd64 || !gc || purego

package field25519

import "testing"

// useGenericStep runs f: without assembly every routine is already Go.
func useGenericStep(t *testing.T, f func()) {
	t.Helper()
	f()
}
