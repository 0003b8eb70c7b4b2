package field25519

import (
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/asmgen"
)

// TestGeneratedFilesAreCurrent runs the avo generator in _asm (with
// ZTLS_REGENERATE=1) and compares its output with the committed
// field_amd64.s and field_amd64_stubs.go.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	asmgen.CheckCurrent(t, ".", "field25519")
}
