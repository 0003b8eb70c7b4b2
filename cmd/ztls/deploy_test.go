package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
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

// unitFile is the [Service] section of a systemd unit: each key's values
// in order (a key may repeat).
type unitFile map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "["):
			section = line
		case section == "[Service]":
			if k, v, ok := strings.Cut(line, "="); ok {
				u[k] = append(u[k], v)
			}
		}
	}
	return u
}

// paths is the space-separated paths of every value of key; systemd's
// "-" (ignore if missing) and "+" prefixes are dropped.
func (u unitFile) paths(key string) []string {
	var out []string
	for _, v := range u[key] {
		for _, p := range strings.Fields(v) {
			out = append(out, strings.TrimLeft(p, "-+"))
		}
	}
	return out
}

// ztlsCommand is the subcommand a ztls command line runs ("serve", "dns
// serve"): its words before the first flag.
func ztlsCommand(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// reloadingCommands are the commands the README's Operations section says
// SIGHUP reloads (its "Reload and stop" point names them as `CMD`'s).
func reloadingCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "**Reload and stop.**")
	if i < 0 {
		t.Fatal("README: no **Reload and stop.** point in Operations")
	}
	text = text[i:]
	if j := strings.Index(text[1:], "\n- **"); j >= 0 {
		text = text[:j+1]
	}
	var cmds []string
	for _, m := range regexp.MustCompile("`((?:ztls )?[a-z][a-z -]*)`'s").FindAllStringSubmatch(text, -1) {
		cmds = append(cmds, strings.TrimPrefix(m[1], "ztls "))
	}
	if len(cmds) == 0 {
		t.Fatalf("README's Reload and stop point names no command: %s", text)
	}
	return cmds
}

// Each unit in deploy/ runs under its own sandbox: its ExecStartPre and
// ExecStart command lines run in a private mount namespace (unshare -m)
// where the file system is read-only as ProtectSystem=strict makes it, the
// ReadOnlyPaths read-only and the ReadWritePaths and StateDirectory
// writable, with the unit's /etc/ztls and /var/lib/ztls in a temporary
// directory and its listeners on loopback. The server must start, reload
// by its ExecReload (which every unit of a command the README says
// reloads has), and stop cleanly, logging no error: so every path it
// writes is writable under the unit's declarations.
func TestDeployUnitsSandbox(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount namespaces")
	}
	if err := exec.Command("unshare", "-m", "true").Run(); err != nil {
		t.Skipf("unshare -m: %v", err)
	}
	reloading := reloadingCommands(t)
	units, _ := filepath.Glob("../../deploy/*.service")
	if len(units) == 0 {
		t.Fatal("no units in deploy/")
	}
	for _, path := range units {
		t.Run(filepath.Base(path), func(t *testing.T) {
			u := readUnit(t, path)
			if len(u["ExecStart"]) != 1 {
				t.Fatalf("ExecStart: %q", u["ExecStart"])
			}
			args := strings.Fields(strings.TrimPrefix(u["ExecStart"][0], "/usr/local/bin/ztls "))
			command := ztlsCommand(args)
			for _, c := range reloading {
				if c == command && (len(u["ExecReload"]) != 1 || u["ExecReload"][0] != "/bin/kill -HUP $MAINPID") {
					t.Errorf("the README says %q reloads on SIGHUP, but the unit's ExecReload is %q", command, u["ExecReload"])
				}
			}
			runUnitSandboxed(t, u, command)
		})
	}
}

// runUnitSandboxed runs a unit's command lines as the sandbox allows.
func runUnitSandboxed(t *testing.T, u unitFile, command string) {
	root := t.TempDir()
	// Paths as the unit names them and where they are in this test.
	rewrite := strings.NewReplacer("/usr/local/bin/ztls", ztlsBinary(t), "/etc/ztls", root+"/etc/ztls", "/var/lib/ztls", root+"/var/lib/ztls")
	etc := filepath.Join(root, "etc/ztls")
	if err := os.MkdirAll(etc, 0o755); err != nil {
		t.Fatal(err)
	}
	prepareUnitFiles(t, root, u)

	// The sandbox: writable and read-only paths, most specific last.
	type mount struct {
		path string
		rw   bool
	}
	var mounts []mount
	if v := u["ProtectSystem"]; len(v) > 0 && v[len(v)-1] == "strict" {
		mounts = append(mounts, mount{root, false})
	}
	for _, p := range u.paths("ReadOnlyPaths") {
		mounts = append(mounts, mount{rewrite.Replace(p), false})
	}
	for _, p := range u.paths("ReadWritePaths") {
		mounts = append(mounts, mount{rewrite.Replace(p), true})
	}
	for _, p := range u.paths("StateDirectory") {
		mounts = append(mounts, mount{filepath.Join(root, "var/lib", p), true})
	}
	sort.SliceStable(mounts, func(i, j int) bool { return len(mounts[i].path) < len(mounts[j].path) })
	script := "set -e\nmount --make-rprivate /\n"
	for _, m := range mounts {
		if err := os.MkdirAll(m.path, 0o755); err != nil {
			t.Fatal(err)
		}
		mode := "ro"
		if m.rw {
			mode = "rw"
		}
		script += fmt.Sprintf("mount --bind %[1]q %[1]q\nmount -o remount,bind,%[2]s %[1]q\n", m.path, mode)
	}
	script += "exec \"$@\"\n"
	sandboxed := func(cmdline string) *exec.Cmd {
		args := strings.Fields(rewrite.Replace(cmdline))
		return exec.Command("unshare", append([]string{"-m", "sh", "-c", script, "sh"}, loopbackFlags(args)...)...)
	}

	for _, pre := range u["ExecStartPre"] {
		if out, err := sandboxed(pre).CombinedOutput(); err != nil {
			t.Fatalf("ExecStartPre=%s: %v\n%s", pre, err, out)
		}
	}
	cmd := sandboxed(u["ExecStart"][0])
	ready := map[string]string{"serve": "ZTLS on", "dns serve": "zones"}[command]
	if ready == "" {
		t.Fatalf("no readiness line known for %q", command)
	}
	log := startCmdLog(t, cmd, ready)
	if len(u["ExecReload"]) > 0 {
		// What systemctl reload runs, with $MAINPID: unshare and sh exec
		// the server in the process systemd started.
		// The ready line may come before the server's SIGHUP handler is
		// set (an earlier SIGHUP is dropped, not fatal): repeat it.
		reload := strings.ReplaceAll(u["ExecReload"][0], "$MAINPID", strconv.Itoa(cmd.Process.Pid))
		args := strings.Fields(reload)
		for deadline := clock.Now().Add(15 * time.Second); !log.has("SIGHUP: reloaded"); time.Sleep(100 * time.Millisecond) {
			if clock.Now().After(deadline) {
				log.waitFor(t, "SIGHUP: reloaded")
			}
			if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("ExecReload=%s: %v\n%s", reload, err, out)
			}
		}
	}
	cmd.Process.Signal(syscall.SIGTERM) // KillSignal
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("did not stop on SIGTERM")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	t.Logf("%s in its sandbox:\n%s", command, strings.Join(log.all, "\n"))
	for _, l := range log.all {
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "read-only file system") {
			t.Errorf("under the unit's sandbox: %s", l)
		}
	}
}

// loopbackFlags moves a command line's listeners to loopback ports the
// system picks.
func loopbackFlags(args []string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		switch out[i] {
		case "--listen", "--tls", "--metrics":
			out[i+1] = "127.0.0.1:0"
		}
	}
	return out
}

// prepareUnitFiles makes what a unit's command line reads: a certificate
// and key for every --cert/--key, the zone files and the Z-data
// directories.
func prepareUnitFiles(t *testing.T, root string, u unitFile) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.example.org", "ns1.example.org"}})
	tmp := t.TempDir()
	certFile, keyFile := leaf.WritePEM(t, tmp)
	copyTo := func(src, dst string) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	local := func(p string) string { return filepath.Join(root, p) }
	zdCert, zdKey := local("etc/ztls/cert.pem"), local("etc/ztls/key.pem")
	copyTo(certFile, zdCert)
	copyTo(keyFile, zdKey)
	var lines []string
	lines = append(lines, u["ExecStartPre"]...)
	lines = append(lines, u["ExecStart"]...)
	for _, line := range lines {
		args := strings.Fields(line)
		for i := 0; i+1 < len(args); i++ {
			v := args[i+1]
			switch args[i] {
			case "--cert":
				copyTo(certFile, local(v))
			case "--key":
				copyTo(keyFile, local(v))
			case "check-zone", "--zone":
				_, file, ok := strings.Cut(v, "=")
				if !ok {
					file = v
				}
				if _, err := os.Stat(local(file)); err == nil {
					continue
				}
				writeFile(t, local(file), `$ORIGIN example.org.
$TTL 300
@   IN SOA ns1 hostmaster 1 3600 600 86400 60
@   IN NS  ns1
ns1 IN A   127.0.0.1
www IN A   127.0.0.1
`)
			case "--zdata":
				if _, err := os.Stat(local(v)); err == nil {
					continue
				}
				run(t, "zdata", "new", "--host", "www.example.org", "--port", "443", "--cert", zdCert, "--key", zdKey, "--out", local(v))
			}
		}
	}
}

// procLog is every output line of a process.
type procLog struct {
	mu  sync.Mutex
	all []string
}

// has reports whether some line contains s.
func (l *procLog) has(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.all {
		if strings.Contains(line, s) {
			return true
		}
	}
	return false
}

// waitFor waits until some line contains s.
func (l *procLog) waitFor(t *testing.T, s string) string {
	t.Helper()
	for deadline := clock.Now().Add(15 * time.Second); clock.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		for _, line := range l.all {
			if strings.Contains(line, s) {
				l.mu.Unlock()
				return line
			}
		}
		l.mu.Unlock()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Fatalf("no line with %q in:\n%s", s, strings.Join(l.all, "\n"))
	return ""
}

// startCmdLog starts cmd, collects its output lines until it exits and
// waits for one containing ready.
func startCmdLog(t *testing.T, cmd *exec.Cmd, ready string) *procLog {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); pr.Close() })
	log := &procLog{}
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			log.mu.Lock()
			log.all = append(log.all, sc.Text())
			log.mu.Unlock()
		}
	}()
	log.waitFor(t, ready)
	return log
}
