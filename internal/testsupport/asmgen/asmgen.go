// Package asmgen checks that a package's committed assembly is what its
// avo generator writes today.
package asmgen

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// CheckCurrent runs the generator in dir/_asm (`go run . -out ASM -stubs
// STUBS -pkg pkg`, which needs avo from the module proxy or cache, so only
// with ZTLS_REGENERATE=1) into a temporary directory and compares its
// output with the committed field_amd64.s and field_amd64_stubs.go in dir
// (the test's working directory when dir is "."), so that the code the tests
// review is the code the generator writes.
func CheckCurrent(t *testing.T, dir, pkg string) {
	t.Helper()
	if os.Getenv("ZTLS_REGENERATE") != "1" {
		t.Skip("set ZTLS_REGENERATE=1 to run the avo generator (it downloads avo) and compare its output")
	}
	tmp := t.TempDir()
	asm, stubs := filepath.Join(tmp, "field_amd64.s"), filepath.Join(tmp, "field_amd64_stubs.go")
	cmd := exec.Command("go", "run", ".", "-out", asm, "-stubs", stubs, "-pkg", pkg)
	cmd.Dir = filepath.Join(dir, "_asm")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generator: %v\n%s", err, out)
	}
	for _, f := range [][2]string{{asm, "field_amd64.s"}, {stubs, "field_amd64_stubs.go"}} {
		got, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, f[1]))
		if err != nil {
			t.Fatal(err)
		}
		// The first line names the command's paths, which differ here.
		_, got, _ = bytes.Cut(got, []byte("\n"))
		_, want, _ = bytes.Cut(want, []byte("\n"))
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the generator's output: run go generate in the package %s", f[1], pkg)
		}
	}
}
