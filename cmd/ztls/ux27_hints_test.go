package main

// Issue 27, item 6: waits and hints a new user met, through the built
// binary: each failure says what is wrong and what to do next.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// zdata new into a directory that already holds Z-data says whose Z-data
// it is and the ways forward, and leaves the directory as it was.
func TestUX27ZDataNewIntoExistingDirSaysWhatIsThere(t *testing.T) {
	ztlsBinary(t)
	pems := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"www.ztls.test"}}).WritePEM(t, pems)
	out := filepath.Join(t.TempDir(), "zd")
	args := []string{"zdata", "new", "--host", "www.ztls.test", "--port", "8443", "--cert", cert, "--key", key, "--out", out}
	run(t, args...)
	before, err := os.ReadFile(filepath.Join(out, "service.json"))
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := runCode(t, args...)
	for _, want := range []string{
		"--out " + out + " already holds the Z-data of www.ztls.test port 8443",
		"'ztls zdata rotate " + out + "'",
		"'ztls zdata show " + out + "'",
		"give another --out",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if code != 1 || stdout != "" {
		t.Errorf("exit %d, stdout %q; want 1 and nothing", code, stdout)
	}
	after, err := os.ReadFile(filepath.Join(out, "service.json"))
	if err != nil || string(after) != string(before) {
		t.Errorf("service.json changed or went: %v", err)
	}
}
