package main

// lookup with dig's habits, through the built binary against 'ztls dns
// serve' on loopback: @SERVER, -p (the server's port), a TYPE after the
// name, +short, +tcp, +tls; --dns-ca and its old spelling --ca.

import (
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

func TestUX2LookupDigHabits(t *testing.T) {
	ztlsBinary(t)
	dir := t.TempDir()
	zone := filepath.Join(dir, "ztls.test.zone")
	writeFile(t, zone, testZone+"www IN TXT \"hello\"\n")
	dnsCA := testpki.NewCA(t, "ecdsa-p256")
	dl := dnsCA.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"dns.ztls.test"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	cert, key := dl.WritePEM(t, dir)
	caFile := dnsCA.WritePEM(t, dir)
	line, log := startLog(t, "serving udp on", "dns", "serve", "--zone", zone, "--listen", "127.0.0.1:0",
		"--tls", "127.0.0.1:0", "--cert", cert, "--key", key)
	addr := logAttr(line, "addr")
	dot := logAttr(log.waitFor(t, "serving tls on"), "addr")
	host, port, _ := net.SplitHostPort(addr)
	_, dotPort, _ := net.SplitHostPort(dot)

	for _, tc := range []struct {
		args []string
		want string // the whole of stdout
	}{
		{[]string{"@" + host, "-p", port, "www.ztls.test", "+short"}, "127.0.0.1\n"},
		{[]string{"@" + addr, "www.ztls.test", "TXT", "+short"}, "\"hello\"\n"},
		{[]string{"@" + addr, "txt", "www.ztls.test", "+short"}, "\"hello\"\n"},
		{[]string{"ztls.test", "@" + addr, "NS", "+short", "+tcp"}, "ns1.ztls.test.\n"},
		{[]string{"-p", dotPort, "@" + host, "www.ztls.test", "A", "+tls", "+short", "--dns-ca", caFile}, "127.0.0.1\n"},
		{[]string{"-p", dotPort, "@" + host, "www.ztls.test", "+tls", "+short", "--dns-ca", caFile, "--dns-servername", "dns.ztls.test"}, "127.0.0.1\n"},
	} {
		out, stderr, code := runCode(t, append([]string{"lookup"}, tc.args...)...)
		if code != 0 || out != tc.want {
			t.Errorf("ztls lookup %s: exit %d, stdout %q (want %q), stderr %s", strings.Join(tc.args, " "), code, out, tc.want, stderr)
		}
	}

	// The long form still prints dig-like sections, naming the transport.
	out, _, code := runCode(t, "lookup", "@"+addr, "www.ztls.test", "AAAA", "+tcp")
	if code != 0 || !strings.Contains(out, ";; www.ztls.test. AAAA  NOERROR (no records)") || !strings.Contains(out, " tcp "+addr) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	// The positional ztls type: the service lookup for --port.
	out, _, code = runCode(t, "lookup", "@"+addr, "www.ztls.test", "ztls", "--port", "8443")
	if code != 0 || !strings.Contains(out, "_ztls._8443._tcp.www.ztls.test.") || !strings.Contains(out, ";; all 6 answers") {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	// --ca, lookup's old name for --dns-ca, still works and says the new one.
	out, stderr, code := runCode(t, "lookup", "@"+dot, "www.ztls.test", "+tls", "+short", "--ca", caFile)
	if code != 0 || out != "127.0.0.1\n" || !strings.Contains(stderr, "use --dns-ca") {
		t.Fatalf("--ca: exit %d, %q, %s", code, out, stderr)
	}

	// Mistakes say what works.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"@" + addr, "www.ztls.test", "+bogus"}, "+short, +tcp"},
		{[]string{"@" + addr, "www.ztls.test", "nosuchtype"}, "not a record type"},
		{[]string{"@" + addr, "www.ztls.test", "TXT", "--type", "AAAA"}, "disagree"},
		{[]string{"@", "www.ztls.test"}, "@ needs a server"},
		{[]string{"@" + host, "-p", "70000", "www.ztls.test"}, "1 to 65535"},
		{[]string{"@" + addr, "www.ztls.test", "--dns-ca", caFile}, "add --dns-transport tls"},
		{[]string{"@" + addr, "www.ztls.test", "ztls", "--port", "0"}, "1 to 65535"},
		{[]string{"@" + addr, "www.ztls.test", "--timeout", "-1s"}, "positive duration"},
	} {
		_, stderr, code := runCode(t, append([]string{"lookup"}, tc.args...)...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("ztls lookup %s: exit %d, %s; want %q", strings.Join(tc.args, " "), code, stderr, tc.want)
		}
	}

	// The help teaches dig's habits, and no longer shows the old names.
	help, _, _ := runCode(t, "lookup", "--help")
	for _, want := range []string{"@SERVER", "+short", "-p, --dns-port", "--dns-ca", "--dns-servername"} {
		if !strings.Contains(help, want) {
			t.Errorf("lookup --help lacks %q", want)
		}
	}
	if strings.Contains(help, "  --ca ") || strings.Contains(help, "  --servername ") {
		t.Errorf("lookup --help shows the deprecated names:\n%s", help)
	}
}
