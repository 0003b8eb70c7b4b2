//go:build amd64 && gc && !purego

package field25519

import "testing"

// useGenericStep runs f with the Go routines instead of the assembly.
func useGenericStep(t *testing.T, f func()) {
	t.Helper()
	useADX = false
	defer func() { useADX = true }()
	f()
}
