package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// check-zone agrees with BIND 9's named-checkzone on good and bad zones,
// but for out-of-zone data, which BIND ignores with a warning and ztls
// refuses (a record that would never be served is a mistake to fix).
func TestCLICheckZoneAgreesWithNamedCheckzone(t *testing.T) {
	bindCheck, _ := exec.LookPath("named-checkzone")
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		ok, bindOK bool
	}{
		{"good", testZone, true, true},
		{"no SOA", "$ORIGIN ztls.test.\n$TTL 300\n@ IN NS ns1\nns1 IN A 127.0.0.1\n", false, false},
		{"CNAME and other data", testZone + "www IN CNAME other.ztls.test.\n", false, false},
		{"out of zone", testZone + "www.example.org. IN A 127.0.0.1\n", false, true},
		{"syntax", testZone + "www IN A 300.1.2.3\n", false, false},
		{"two SOAs", testZone + "@ IN SOA ns1 hostmaster 2 3600 600 86400 60\n", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".zone")
			writeFile(t, file, c.text)
			out, err := exec.Command(ztlsBinary(t), "dns", "check-zone", "ztls.test.="+file).CombinedOutput()
			if (err == nil) != c.ok {
				t.Fatalf("ztls dns check-zone: ok=%v, want %v:\n%s", err == nil, c.ok, out)
			}
			if c.ok && !strings.Contains(string(out), "loaded serial 1\nOK") {
				t.Fatalf("output:\n%s", out)
			}
			if bindCheck == "" {
				t.Log("named-checkzone not installed (bind9-utils): compared with nothing")
				return
			}
			bout, berr := exec.Command(bindCheck, "ztls.test", file).CombinedOutput()
			if (berr == nil) != c.bindOK {
				t.Fatalf("named-checkzone disagrees: ok=%v:\n%s", berr == nil, bout)
			}
		})
	}
}

// check-zone checks the Z-data an HTTPS record carries: the lines 'zdata
// new' prints pass (and BIND 9's named-checkzone reads them too); the
// record moved to another port of the host, a mandatory Z-data key, a
// value that does not parse and records all expired are refused, each
// with what to do.
func TestCLICheckZoneHTTPSZData(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, dir)
	lines := run(t, "zdata", "new", "--host", "www.ztls.test", "--port", "8443", "--cert", cert, "--key", key,
		"--out", filepath.Join(dir, "zd"), "--bfe-connections", "16", "--turbo-port", "8443", "--https-alpn", "h2")
	var https, tlsa string
	for _, l := range strings.Split(lines, "\n") {
		switch {
		case strings.Contains(l, "\tHTTPS\t"):
			https = l
		case strings.Contains(l, "\tTLSA\t"):
			tlsa = l
		}
	}
	if !strings.HasPrefix(https, "_8443._https.www.ztls.test.\t") || !strings.Contains(https, "key65280=") || !strings.Contains(https, "key65370=") {
		t.Fatalf("zdata new printed no HTTPS record with the Z-data and TurboTLS keys:\n%s", lines)
	}
	moved := strings.Replace(https, "_8443._https.www.ztls.test.", "www.ztls.test.", 1) + "\n" +
		strings.Replace(tlsa, "_8443._tcp.", "_443._tcp.", 1)
	bindCheck, _ := exec.LookPath("named-checkzone")
	for _, c := range []struct {
		name, text, want string
		env              []string
		ok               bool
	}{
		{"printed lines", testZone + lines, "4 Z-data record(s) under key65370 for www.ztls.test port 8443, 4 valid now or later, signatures verified with the leaf in TLSA _8443._tcp.www.ztls.test.", nil, true},
		{"no TLSA", testZone + https, "signatures not checked: no TLSA 3 0 0 record at _8443._tcp.www.ztls.test.", nil, true},
		{"another port", testZone + lines + moved, "is not signed for www.ztls.test port 443", nil, false},
		{"mandatory", testZone + strings.Replace(https, "alpn=", "mandatory=key65370 alpn=", 1), "listed in mandatory", nil, false},
		{"malformed", testZone + "www IN HTTPS 1 . key65370=\"\\000\\009abc\"\n", "does not parse", nil, false},
		{"expired", testZone + lines, "Z-data records under key65370 expired", []string{clockEnv(t, 3*time.Hour)}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "_")+".zone")
			writeFile(t, file, c.text)
			cmd := exec.Command(ztlsBinary(t), "dns", "check-zone", "ztls.test.="+file)
			cmd.Env = append(os.Environ(), c.env...)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.ok || !strings.Contains(string(out), c.want) {
				t.Fatalf("ok=%v, want %v and %q:\n%s", err == nil, c.ok, c.want, out)
			}
			if c.name == "printed lines" && bindCheck != "" {
				if bout, err := exec.Command(bindCheck, "ztls.test", file).CombinedOutput(); err != nil {
					t.Fatalf("named-checkzone refuses the printed lines: %v\n%s", err, bout)
				}
			}
		})
	}
}

// clockEnv is ZTLS_CLOCK_OFFSET for a process whose clock is d ahead of
// this one's.
func clockEnv(t *testing.T, d time.Duration) string {
	t.Helper()
	self, err := clock.Offset()
	if err != nil {
		t.Fatal(err)
	}
	return clock.EnvOffset + "=" + (self + d).String()
}

// svcService reads any owner name without panicking, and gives a port
// in range and the name it was given for a name that is no
// _PORT._https. owner.
func FuzzSvcService(f *testing.F) {
	for _, s := range []string{"www.ztls.test.", "_8443._https.www.ztls.test.", "_0._https.x.", "_https.", "_99999._https.a.", "."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, owner string) {
		host, port := svcService(owner)
		if port < 1 || port > 65535 {
			t.Fatalf("%q: port %d", owner, port)
		}
		if port == 443 && host != strings.TrimSuffix(owner, ".") && !strings.Contains(owner, "._https.") {
			t.Fatalf("%q: host %q", owner, host)
		}
	})
}
