package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
)

// TestConnectZDataFromCLI: `ztls connect` takes the Z-data from the
// HTTPS record by default (no TXT query reaches the authority), from the
// TXT record with --zdata-from txt, and says which, in JSON and in text;
// connect and get refuse an unknown --zdata-from, saying what works.
func TestConnectZDataFromCLI(t *testing.T) {
	w, err := lab.Start(lab.Options{HTTPSZData: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, w.RootsPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"connect", w.HostPort(), "--resolver", w.DNSAddr, "--ca", caFile, "--zdata-budget", "2s", "--data", "GET /"}, extra...)
	}
	txt := func() int64 { return w.Queries(zdata.TXTName(w.Host, w.Port), dns.TypeTXT) }
	for _, tc := range []struct {
		flags    []string
		from     string
		txtAsked bool
	}{{nil, "https", false}, {[]string{"--zdata-from", "txt"}, "txt", true}} {
		before := txt()
		var rep dial.Report
		if err := json.Unmarshal([]byte(run(t, args(append(tc.flags, "--json")...)...)), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Mode != "ztls" || rep.ZDataFrom != tc.from || (txt() > before) != tc.txtAsked {
			t.Fatalf("%v: mode %s (%s), zdata_from %q, TXT queries %d -> %d", tc.flags, rep.Mode, rep.FallbackReason, rep.ZDataFrom, before, txt())
		}
	}
	out := runBoth(t, args()...)
	if !strings.Contains(out, "Z-data from the HTTPS record") {
		t.Fatalf("the text report does not say where the Z-data came from:\n%s", out)
	}
	for _, cmd := range []string{"connect", "get"} {
		target := w.HostPort()
		if cmd == "get" {
			target = "https://" + target + "/"
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		b, err := exec.CommandContext(ctx, ztlsBinary(t), cmd, target, "--zdata-from", "dns").CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(b), "--zdata-from") || !strings.Contains(string(b), "want https, both or txt") {
			t.Fatalf("%s --zdata-from dns: %v\n%s", cmd, err, b)
		}
	}
}

// runBoth runs the binary and returns its stdout and stderr together.
func runBoth(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, ztlsBinary(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ztls %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return string(b)
}
