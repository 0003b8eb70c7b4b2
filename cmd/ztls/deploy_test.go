package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The systemd units in deploy/ pass systemd-analyze verify, and every
// ztls command line in them (ExecStart, ExecStartPre) parses: its flags
// exist (cobra refuses an unknown flag before --help).
func TestDeployUnits(t *testing.T) {
	units, _ := filepath.Glob("../../deploy/*.service")
	if len(units) == 0 {
		t.Fatal("no units in deploy/")
	}
	bin := ztlsBinary(t)
	dir := t.TempDir()
	var copies []string
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for _, line := range strings.Split(text, "\n") {
			cmdline, ok := strings.CutPrefix(line, "ExecStart=")
			if !ok {
				cmdline, ok = strings.CutPrefix(line, "ExecStartPre=")
			}
			if !ok || !strings.HasPrefix(cmdline, "/usr/local/bin/ztls ") {
				continue
			}
			args := strings.Fields(strings.TrimPrefix(cmdline, "/usr/local/bin/ztls "))
			if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
				t.Errorf("%s: %s: %v\n%s", filepath.Base(u), cmdline, err, out)
			}
		}
		c := filepath.Join(dir, filepath.Base(u))
		if err := os.WriteFile(c, []byte(strings.ReplaceAll(text, "/usr/local/bin/ztls", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, c)
	}
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd): the command lines parsed, the units were not verified")
	}
	if out, err := exec.Command(sa, append([]string{"verify"}, copies...)...).CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
