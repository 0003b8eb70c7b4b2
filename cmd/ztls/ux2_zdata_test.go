package main

// What a first-time user tripped over in 'ztls zdata', through the built
// binary: new refusing certificates clients would refuse and leaving
// nothing behind, check's exit status with --json and over DNS over TLS
// with a private CA, publish's help example with the default port 53.

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// runCode runs the binary to completion, stdin the null device, and
// returns stdout, stderr and the exit status.
func runCode(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	r := uxRun(t, nil, args...)
	return r.stdout, r.stderr, r.code
}

// dirNames lists a directory's entries.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// zdata new refuses a certificate that does not name --host, has expired
// or whose key does not match, exits 1, and leaves no directory.
func TestUX2ZDataNewRefusesAndLeavesNothing(t *testing.T) {
	ztlsBinary(t)
	pems := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	now := clock.Now()
	other := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"other.ztls.test"}})
	expired := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"www.ztls.test"}, NotBefore: now.Add(-72 * time.Hour), NotAfter: now.Add(-time.Hour)})
	good := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"www.ztls.test"}})
	otherCert, otherKey := other.WritePEM(t, pems)
	expiredCert, expiredKey := expired.WritePEM(t, pems)
	goodCert, goodKey := good.WritePEM(t, pems)

	for _, tc := range []struct {
		name, cert, key, want string
	}{
		{"another name", otherCert, otherKey, "does not cover www.ztls.test (it names other.ztls.test)"},
		{"expired", expiredCert, expiredKey, "the certificate expired at"},
		{"key of another certificate", goodCert, otherKey, "load certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			out := filepath.Join(parent, "zd")
			stdout, stderr, code := runCode(t, "zdata", "new", "--host", "www.ztls.test", "--port", "8443",
				"--cert", tc.cert, "--key", tc.key, "--out", out)
			if code != 1 || !strings.Contains(stderr, tc.want) || stdout != "" {
				t.Fatalf("exit %d, stderr %q, stdout %q; want exit 1 saying %q", code, stderr, stdout, tc.want)
			}
			if names := dirNames(t, parent); len(names) != 0 {
				t.Fatalf("left behind: %v", names)
			}
			// The same command with a good certificate then works: nothing
			// half-made is in its way.
			run(t, "zdata", "new", "--host", "www.ztls.test", "--port", "8443", "--cert", goodCert, "--key", goodKey, "--out", out)
			if _, err := os.Stat(filepath.Join(out, "service.json")); err != nil {
				t.Fatal(err)
			}
		})
	}
	// Numbers out of range say the range.
	_, stderr, code := runCode(t, "zdata", "new", "--host", "www.ztls.test", "--port", "70000",
		"--cert", goodCert, "--key", goodKey, "--out", filepath.Join(t.TempDir(), "zd"))
	if code != 1 || !strings.Contains(stderr, "1 to 65535") {
		t.Fatalf("--port 70000: exit %d, %s", code, stderr)
	}
}

// zdata check exits 1 on unusable Z-data with --json as without, and 0
// on usable Z-data with both.
func TestUX2ZDataCheckJSONExitStatus(t *testing.T) {
	ztlsBinary(t)
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	port := strconv.Itoa(s.port)
	// One authority without the Z-data, one with it.
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--listen", "127.0.0.1:0")
	bare := logAttr(line, "addr")
	line = start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	full := logAttr(line, "addr")

	for _, tc := range []struct {
		resolver string
		valid    bool
	}{{bare, false}, {full, true}} {
		base := []string{"zdata", "check", s.host, "--port", port, "--resolver", tc.resolver, "--ca", s.ca}
		text, _, textCode := runCode(t, base...)
		js, jsErr, jsCode := runCode(t, append(base, "--json")...)
		var rep checkReport
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("--json printed %q (%s): %v", js, jsErr, err)
		}
		want := 1
		if tc.valid {
			want = 0
		}
		if textCode != want || jsCode != want || rep.Valid != tc.valid {
			t.Fatalf("valid %v: exit %d without --json, %d with (report valid %v); want %d\n%s", tc.valid, textCode, jsCode, rep.Valid, want, text)
		}
		if !tc.valid && (!strings.Contains(text, "NOT usable") || !strings.Contains(jsErr, "not usable")) {
			t.Fatalf("text %q, --json stderr %q", text, jsErr)
		}
	}
}

// zdata check reaches a DNS-over-TLS resolver with a private CA through
// --dns-ca (and --dns-servername), while --ca stays the service's roots.
func TestUX2ZDataCheckDNSOverTLSPrivateCA(t *testing.T) {
	ztlsBinary(t)
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	dnsCA := testpki.NewCA(t, "ecdsa-p256")
	dl := dnsCA.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"dns.ztls.test"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	dnsCert, dnsKey := dl.WritePEM(t, s.dir)
	dnsCAFile := dnsCA.WritePEM(t, s.dir)
	_, log := startLog(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0",
		"--tls", "127.0.0.1:0", "--cert", dnsCert, "--key", dnsKey)
	dot := logAttr(log.waitFor(t, "serving tls on"), "addr")
	port := strconv.Itoa(s.port)

	base := []string{"zdata", "check", s.host, "--port", port, "--resolver", dot, "--dns-transport", "tls", "--ca", s.ca, "--json"}
	for _, extra := range [][]string{
		{"--dns-ca", dnsCAFile},
		{"--dns-ca", dnsCAFile, "--dns-servername", "dns.ztls.test"},
	} {
		out, stderr, code := runCode(t, append(base, extra...)...)
		var rep checkReport
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || !rep.Valid {
			t.Fatalf("%v: exit %d, %s%s", extra, code, out, stderr)
		}
	}
	// Without --dns-ca the resolver's certificate is not trusted: exit 1.
	if _, stderr, code := runCode(t, append(base, "--timeout", "1s")...); code != 1 || !strings.Contains(stderr, "certificate") {
		t.Fatalf("without --dns-ca: exit %d, %s", code, stderr)
	}
	// --dns-ca without DNS over TLS says what is missing.
	if _, stderr, code := runCode(t, "zdata", "check", s.host, "--resolver", dot, "--dns-ca", dnsCAFile); code != 1 || !strings.Contains(stderr, "add --dns-transport tls") {
		t.Fatalf("--dns-ca over udp: exit %d, %s", code, stderr)
	}
}

// startBindOn53 runs BIND 9 on addr:53 (named listens only on addresses
// an interface has, so 127.0.0.1), for commands whose default port is 53.
// It skips when named is missing or port 53 cannot be bound there (not
// root, or another DNS server on it).
func startBindOn53(t *testing.T, addr string, opts dnstest.BindOptions) {
	t.Helper()
	bin := dnstest.BindPath()
	if bin == "" {
		t.Skip("BIND 9 (named) not installed: make deps installs it")
	}
	for _, network := range []string{"udp", "tcp"} {
		var err error
		if network == "udp" {
			var pc net.PacketConn
			if pc, err = net.ListenPacket("udp", addr+":53"); err == nil {
				pc.Close()
			}
		} else {
			var ln net.Listener
			if ln, err = net.Listen("tcp", addr+":53"); err == nil {
				ln.Close()
			}
		}
		if err != nil {
			t.Skipf("cannot bind %s:53 (%v): the default-port test needs root", addr, err)
		}
	}
	dir := t.TempDir()
	for i, z := range opts.Zones {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("zone%d.db", i)), z.Text)
	}
	conf := dnstest.BindConfig(dir, 53, opts)
	if !strings.Contains(conf, "listen-on port 53 { "+addr+"; };") {
		t.Fatalf("named.conf does not listen on %s:53:\n%s", addr, conf)
	}
	writeFile(t, filepath.Join(dir, "named.conf"), conf)
	cmd := exec.Command(bin, "-g", "-4", "-n", "1", "-c", filepath.Join(dir, "named.conf"))
	cmd.Dir = dir
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		testproc.WaitOrKill(cmd, 10*time.Second)
	})
	c := &dns.Client{Timeout: 200 * time.Millisecond}
	m := new(dns.Msg)
	m.SetQuestion(opts.Zones[0].Origin, dns.TypeSOA)
	for deadline := clock.Now().Add(20 * time.Second); clock.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, _, err := c.Exchange(m, addr+":53"); err == nil && r.Authoritative {
			return
		}
	}
	t.Fatalf("named on %s:53 never answered:\n%s", addr, logs.String())
}

// zdata publish --help's example, pasted into bash with only the address,
// zone and key file made real: --server without a port reaches port 53.
func TestUX2ZDataPublishHelpExampleDefaultPort(t *testing.T) {
	bin := ztlsBinary(t)
	const addr = "127.0.0.1"
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	startBindOn53(t, addr, dnstest.BindOptions{
		Zones: []dnstest.BindZone{{Origin: "ztls.test.", Text: testZone, AllowUpdate: true}},
		Key:   &dnstest.BindKey{Name: "ztls", Algorithm: "hmac-sha256", Secret: secret},
	})
	s := newSite(t)
	help, _, _ := runCode(t, "zdata", "publish", "--help")
	i := strings.Index(help, "ztls zdata publish zd/ --server 192.0.2.53 ")
	if i < 0 {
		t.Fatalf("the help's first example changed:\n%s", help)
	}
	example := help[i:]
	example = example[:strings.Index(example, "--tsig-secret-file ztls.key")+len("--tsig-secret-file ztls.key")]
	example = strings.NewReplacer("192.0.2.53", addr, "example.org", "ztls.test").Replace(example)

	// Run where zd/ and ztls.key are, with ztls on PATH.
	os.Rename(s.zd, filepath.Join(s.dir, "zd"))
	if err := os.WriteFile(filepath.Join(s.dir, "ztls.key"), []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-e", "-c", example)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "published") || !strings.Contains(string(out), addr+":53") {
		t.Fatalf("%s\n%v\n%s", example, err, out)
	}
	// The records are there.
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
	m := new(dns.Msg)
	m.SetQuestion("_ztls._"+strconv.Itoa(s.port)+"._tcp.www.ztls.test.", dns.TypeTXT)
	r, _, err := c.Exchange(m, addr+":53")
	if err != nil || len(r.Answer) == 0 {
		t.Fatalf("TXT after publish: %v %v", err, r)
	}
}

// --server forms: HOST, IPv4, IPv6 with and without brackets, HOST:PORT;
// nonsense says what to give.
func TestUX2PublishAddr(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.53":          "192.0.2.53:53",
		"ns1.example.org":     "ns1.example.org:53",
		"2001:db8::53":        "[2001:db8::53]:53",
		"[2001:db8::53]":      "[2001:db8::53]:53",
		"[2001:db8::53]:5300": "[2001:db8::53]:5300",
		"127.0.0.1:5300":      "127.0.0.1:5300",
	} {
		if got, err := publishAddr(in); err != nil || got != want {
			t.Errorf("%q: %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "127.0.0.1:0", "127.0.0.1:99999", "127.0.0.1:dns", ":53"} {
		if _, err := publishAddr(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// checkServePort is what 'serve --zdata' calls: the --listen port must be
// the Z-data's, else it says both and the cure.
func TestUX2CheckServePort(t *testing.T) {
	if err := checkServePort(8443, "127.0.0.1:8443"); err != nil {
		t.Fatal(err)
	}
	if err := checkServePort(443, ":https"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		listen, want string
	}{
		{"127.0.0.1:9443", "--listen port 9443 differs from the Z-data's port 8443"},
		{"127.0.0.1:0", "random port"},
		{"127.0.0.1", "want HOST:PORT"},
	} {
		if err := checkServePort(8443, tc.listen); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.listen, err, tc.want)
		}
	}
}

// serve --zdata on another port than the Z-data's says so (serve.go
// calls checkServePort and warns: a NAT may forward the Z-data's port).
func TestUX2ServeZDataPortMismatch(t *testing.T) {
	ztlsBinary(t)
	s := newSite(t)
	other := strconv.Itoa(freePort(t))
	// start fails the test if serve exits or never says it.
	line := start(t, "differs from the Z-data's port", "serve", "--listen", "127.0.0.1:"+other, "--zdata", s.zd, "--respond", "hello")
	if !strings.Contains(line, "port "+other+" differs from the Z-data's port "+strconv.Itoa(s.port)) {
		t.Fatalf("serve said %q", line)
	}
}
