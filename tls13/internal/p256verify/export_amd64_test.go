//go:build amd64 && gc && !purego

package p256verify

import "testing"

// forEachPath runs f on the assembly (when the CPU has it) and on the Go code.
func forEachPath(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	if useADX {
		t.Run("asm", f)
		useADX = false
		defer func() { useADX = true }()
	}
	t.Run("go", f)
}

// withGoPath runs f on the Go code.
func withGoPath(f func()) {
	saved := useADX
	useADX = false
	defer func() { useADX = saved }()
	f()
}
