package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
