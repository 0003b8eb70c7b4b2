package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
)

// readmeBlock returns the shell block that follows heading in README.md.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, heading)
	if i < 0 {
		t.Fatalf("README.md has no %q", heading)
	}
	s = s[i:]
	start := strings.Index(s, "```sh\n")
	end := strings.Index(s[start+6:], "\n```")
	if start < 0 || end < 0 {
		t.Fatalf("no sh block under %q", heading)
	}
	return s[start+6 : start+6+end+1]
}

// The README's walkthrough, pasted as written into bash in an empty
// directory (with `make build` already done), shows ZTLS: the first
// connection's answer rides in the server's first flight.
func TestREADMEWalkthrough(t *testing.T) {
	script := readmeBlock(t, "## Using it")
	if !strings.Contains(script, "make build") {
		t.Fatal("the walkthrough no longer starts with make build")
	}
	script = strings.Replace(script, "make build", ": make build", 1) // done: bin/ztls is the test's build
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	if err := os.Symlink(ztlsBinary(t), filepath.Join(dir, "bin", "ztls")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir) // the abort memory stays in the test's directory
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// A file, not a pipe: the background servers keep their output open
	// after the script ends, and Wait would wait for them.
	outFile, err := os.Create(filepath.Join(dir, "output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer outFile.Close()
	cmd.Stdout, cmd.Stderr = outFile, outFile
	var out bytes.Buffer
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The servers it starts in the background belong to its process
	// group: stop them all, whatever happens.
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		// They exit cleanly (saving their state in the directory), not at
		// once: wait until the group is empty, so the directory can go.
		for i := 0; i < 500 && syscall.Kill(-cmd.Process.Pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	})
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		b, _ := os.ReadFile(outFile.Name())
		out.Write(b)
		if err != nil {
			t.Fatalf("the walkthrough failed: %v\n%s", err, out.String())
		}
	case <-time.After(60 * time.Second):
		b, _ := os.ReadFile(outFile.Name())
		out.Write(b)
		t.Fatalf("the walkthrough did not finish:\n%s", out.String())
	}
	// Its files, private keys among them, stay in ./walkthrough/ (which
	// .gitignore names), not in the directory it was pasted in: the
	// repository's root.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); n != "bin" && n != "walkthrough" && n != "output.txt" && !strings.HasPrefix(n, ".") {
			t.Errorf("the walkthrough left %s in the directory it was pasted in", n)
		}
	}
	// The --json connection report: the JSON object in the output.
	var rep dial.Report
	text := out.String()
	i := strings.Index(text, "{\n")
	if i < 0 {
		t.Fatalf("no JSON report in:\n%s", text)
	}
	if err := json.NewDecoder(strings.NewReader(text[i:])).Decode(&rep); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, text)
	}
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || !rep.AnswerInFirstFlight {
		t.Fatalf("the walkthrough did not show ZTLS: mode %s (%s), early %+v\n%s", rep.Mode, rep.FallbackReason, rep.EarlyData, out.String())
	}
}
