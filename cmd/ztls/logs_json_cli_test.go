package main

// The long-running commands log in one format: with --log-format json
// every line they print is a JSON object with time, level and msg, from
// the first (what they listen on) to the last (that they stopped), with
// addresses as attributes; and no secret reaches the log.

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// jsonLogRecords checks that every line is a JSON log record with time,
// level and msg, and returns them.
func jsonLogRecords(t *testing.T, lines []string) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for _, l := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Errorf("not a JSON log line: %q", l)
			continue
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("log line without %q: %s", k, l)
			}
		}
		recs = append(recs, rec)
	}
	return recs
}

// findRecord returns the first record whose msg is msg.
func findRecord(t *testing.T, recs []map[string]any, msg string) map[string]any {
	t.Helper()
	for _, r := range recs {
		if r["msg"] == msg {
			return r
		}
	}
	t.Fatalf("no log record %q", msg)
	return nil
}

// stopAndCollect stops a daemon with SIGTERM, waits for it to exit and
// returns every line it printed.
func stopAndCollect(t *testing.T, cmd *exec.Cmd, log *procLog) []string {
	t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	log.waitFor(t, `"msg":"stopped"`)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("did not exit after saying it stopped")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	return append([]string(nil), log.all...)
}

// noSecrets fails when a line holds one of the secrets.
func noSecrets(t *testing.T, lines []string, secrets map[string]string) {
	t.Helper()
	for what, s := range secrets {
		if s == "" {
			t.Fatalf("empty secret %s", what)
		}
		for _, l := range lines {
			if strings.Contains(l, s) {
				t.Errorf("the %s is in the log: %s", what, l)
			}
		}
	}
}

// zdataPrivateKeys returns the private keys of a Z-data directory's key
// files, base64 as stored.
func zdataPrivateKeys(t *testing.T, zd string) map[string]string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(zd, "keys", "*.json"))
	out := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var kf struct {
			PrivateKey string `json:"private_key"`
		}
		if err := json.Unmarshal(b, &kf); err != nil {
			t.Fatal(err)
		}
		out["Z-data private key "+filepath.Base(f)] = kf.PrivateKey
	}
	if len(out) == 0 {
		t.Fatalf("no key files in %s", zd)
	}
	return out
}

// pemBody is the first line of base64 inside a PEM file (a piece of the
// key that would show if the file were logged).
func pemBody(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			return l
		}
	}
	t.Fatalf("%s: no PEM body", file)
	return ""
}

func TestCLIDNSServeJSONLogs(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	dotLeaf := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"ns1.ztls.test"}})
	dotCert, dotKey := dotLeaf.WritePEM(t, s.dir)
	cmd := exec.Command(ztlsBinary(t), "--log-format", "json", "dns", "serve", "--zone", zone, "--zdata", s.zd,
		"--listen", "127.0.0.1:0", "--tls", "127.0.0.1:0", "--cert", dotCert, "--key", dotKey, "--metrics", "127.0.0.1:0", "-v")
	log := startCmdLog(t, cmd, `"msg":"zones"`)
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, `"msg":"SIGHUP: reloaded the zones and Z-data"`)
	lines := stopAndCollect(t, cmd, log)

	recs := jsonLogRecords(t, lines)
	for _, msg := range []string{"serving udp on", "serving tcp on", "serving tls on"} {
		r := findRecord(t, recs, msg)
		if a, _ := r["addr"].(string); !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("%s: addr %v", msg, r["addr"])
		}
	}
	if r := findRecord(t, recs, "serving Z-data"); r["host"] != s.host || r["port"] != float64(s.port) || r["dir"] != s.zd {
		t.Errorf("serving Z-data: %v", r)
	}
	if r := findRecord(t, recs, "zones"); r["origins"] != "ztls.test." {
		t.Errorf("zones: %v", r)
	}
	if r := findRecord(t, recs, "metrics on"); !strings.HasPrefix(r["url"].(string), "http://127.0.0.1:") {
		t.Errorf("metrics on: %v", r)
	}
	if r := findRecord(t, recs, "stopped"); r["command"] != "ztls dns serve" {
		t.Errorf("stopped: %v", r)
	}
	findRecord(t, recs, "stopping: finishing the work in flight")
	secrets := zdataPrivateKeys(t, s.zd)
	secrets["DNS-over-TLS key"] = pemBody(t, dotKey)
	noSecrets(t, lines, secrets)
}

// turbo-proxy's per-connection lines (-v) carry the client's address as
// an attribute, in JSON as every other line.
func TestCLITurboProxyJSONLogs(t *testing.T) {
	ztlsBinary(t)
	noAbortMemory(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}}).WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	backend := "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, _, backendCmd := startProc(t, "serving TLS 1.3 on", "serve", "--listen", backend, "--cert", cert, "--key", key, "--respond", "hello")
	defer stopCmd(backendCmd)

	server := exec.Command(ztlsBinary(t), "--log-format", "json", "turbo-proxy", "--server", "--listen", "127.0.0.1:0",
		"--backend", backend, "-v")
	serverLog := startCmdLog(t, server, `"msg":"TurboTLS server proxy on"`)
	var ready map[string]any
	json.Unmarshal([]byte(serverLog.waitFor(t, `"msg":"TurboTLS server proxy on"`)), &ready)
	client := exec.Command(ztlsBinary(t), "--log-format", "json", "turbo-proxy", "--client", "--listen", "127.0.0.1:0",
		"--to", ready["addr"].(string), "--wait", "5s", "-v")
	clientLog := startCmdLog(t, client, `"msg":"TurboTLS client proxy on"`)
	json.Unmarshal([]byte(clientLog.waitFor(t, `"msg":"TurboTLS client proxy on"`)), &ready)
	out, stderr, code := runCode(t, "connect", ready["addr"].(string), "--mode", "tls", "--ca", caFile,
		"--servername", "www.ztls.test", "--data", "GET /", "--resolver", "127.0.0.1:1")
	if code != 0 || !strings.Contains(out, "hello") {
		t.Fatalf("connect through the proxies: exit %d, %q, %s", code, out, stderr)
	}
	clientLog.waitFor(t, `"msg":"connection: `)
	serverLog.waitFor(t, `"msg":"connection: `)
	for _, side := range []struct {
		cmd *exec.Cmd
		log *procLog
	}{{client, clientLog}, {server, serverLog}} {
		recs := jsonLogRecords(t, stopAndCollect(t, side.cmd, side.log))
		for _, r := range recs {
			msg := r["msg"].(string)
			if !strings.HasPrefix(msg, "connection: ") {
				continue
			}
			if remote, _ := r["remote"].(string); !strings.HasPrefix(remote, "127.0.0.1:") || strings.Contains(msg, "127.0.0.1") {
				t.Errorf("a connection line without the address as an attribute: %v", r)
			}
		}
		findRecord(t, recs, "stopped")
	}
}

// --tsig-secret-file takes the TSIG secret out of the command line (ps);
// the file must be for its owner only; the secret never reaches the log.
func TestCLITSIGSecretFile(t *testing.T) {
	s := newSite(t)
	secret := base64.StdEncoding.EncodeToString([]byte("a-tsig-secret-from-a-file-only"))
	file := filepath.Join(s.dir, "tsig.key")
	if err := os.WriteFile(file, []byte(secret+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	publish := []string{"zdata", "publish", s.zd, "--server", "127.0.0.1:1", "--zone", "ztls.test", "--tsig-name", "k", "--tsig-secret-file", file}
	if _, stderr, code := runCode(t, publish...); code != 1 || !strings.Contains(stderr, "chmod 600 "+file) {
		t.Fatalf("a secret file readable by others: exit %d, %s", code, stderr)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runCode(t, append(publish, "--tsig-secret", secret)...); code != 1 || !strings.Contains(stderr, "not both") {
		t.Fatalf("both --tsig-secret and --tsig-secret-file: exit %d, %s", code, stderr)
	}
	// Read from the file: the UPDATE goes out (and finds no primary).
	if _, stderr, code := runCode(t, publish...); code != 1 || strings.Contains(stderr, "required") || strings.Contains(stderr, secret) {
		t.Fatalf("publish with the secret file: exit %d, %s", code, stderr)
	}

	cmd := exec.Command(ztlsBinary(t), "--log-format", "json", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port),
		"--zdata", s.zd, "--respond", "hello", "-v",
		"--publish", "127.0.0.1:1", "--publish-zone", "ztls.test", "--tsig-name", "k", "--tsig-secret-file", file)
	log := startCmdLog(t, cmd, `"msg":"Z-data: publishing failed`)
	if strings.Contains(strings.Join(cmd.Args, " "), secret) {
		t.Fatal("the secret is on the command line")
	}
	lines := stopAndCollect(t, cmd, log)
	jsonLogRecords(t, lines)
	secrets := zdataPrivateKeys(t, s.zd)
	secrets["TSIG secret"] = secret
	noSecrets(t, lines, secrets)
}
