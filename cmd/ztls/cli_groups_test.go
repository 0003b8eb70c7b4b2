package main

import (
	"strings"
	"testing"
)

// Mistakes under the command groups and the proxy exit 1 and say what to
// do; the groups alone print their help and exit 0.
func TestCLIGroupAndArgumentMistakes(t *testing.T) {
	ztlsBinary(t)
	for _, tc := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"zdata", "nwe"}, 1, []string{`unknown command "nwe" for "ztls zdata"`, "Did you mean this?", "\tnew", "see 'ztls zdata --help'"}},
		{[]string{"dns", "srve"}, 1, []string{`unknown command "srve" for "ztls dns"`, "\tserve", "see 'ztls dns --help'"}},
		{[]string{"dns", "check-zone"}, 1, []string{"give the zone files to check", "ztls dns check-zone example.org.zone"}},
		{[]string{"turbo-proxy", "--client", "--listen", "127.0.0.1:0", "--server", "127.0.0.1:9444"}, 1,
			[]string{"--server is a switch", "--to 127.0.0.1:9444"}},
		{[]string{"turbo-proxy", "--client", "--listen", "127.0.0.1:0", "127.0.0.1:9444"}, 1, []string{"--to 127.0.0.1:9444"}},
		{[]string{"turbo-proxy", "--server", "--listen", "127.0.0.1:0", "127.0.0.1:8443"}, 1, []string{"--backend 127.0.0.1:8443"}},
		{[]string{"zdata"}, 0, []string{"Typical life", "Available Commands"}},
		{[]string{"dns"}, 0, []string{"check-zone", "Available Commands"}},
	} {
		out, stderr, code := runCode(t, tc.args...)
		text := out + stderr
		if code != tc.code {
			t.Errorf("ztls %s: exit %d, want %d\n%s", strings.Join(tc.args, " "), code, tc.code, text)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(text, w) {
				t.Errorf("ztls %s: no %q in\n%s", strings.Join(tc.args, " "), w, text)
			}
		}
	}
}

// The help of zdata and dns serve tells of the built-in rotation, and of
// cron only for a directory no server rotates.
func TestCLIHelpTellsBuiltInRotation(t *testing.T) {
	ztlsBinary(t)
	zd, _, _ := runCode(t, "zdata", "--help")
	life := zd[strings.Index(zd, "Typical life"):]
	if strings.Contains(life, "ztls zdata rotate zd/     # from cron") || !strings.Contains(life, "rotate.lock") || !strings.Contains(life, "--rotate=false") {
		t.Errorf("zdata --help:\n%s", zd)
	}
	ds, _, _ := runCode(t, "dns", "serve", "--help")
	if strings.Contains(ds, "as 'ztls zdata\nrotate' changes the directory") || !strings.Contains(ds, "rotate.lock") || !strings.Contains(ds, "SIGHUP reloads") {
		t.Errorf("dns serve --help:\n%s", ds)
	}
	rot, _, _ := runCode(t, "zdata", "rotate", "--help")
	if !strings.Contains(rot, "only for a\ndirectory none of them rotates") {
		t.Errorf("zdata rotate --help:\n%s", rot)
	}
}
