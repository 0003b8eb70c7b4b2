package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dns/authority"
)

const lookupTestZone = `$TTL 300
@ IN SOA ns.svc.test. hostmaster.svc.test. 1 3600 600 86400 60
@ IN NS ns
ns IN A 127.0.0.1
www IN A 127.0.0.10
www IN AAAA 2001:db8::10
_ztls._443._tcp.www IN TXT "v=ztls1"
_443._tcp.www IN TLSA 3 1 1 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20
`

// startLookupTestServer serves lookupTestZone on loopback UDP and TCP. The
// authority answers recursion-desired queries for its zone, which is all
// the stub resolver needs.
func startLookupTestServer(t *testing.T) string {
	t.Helper()
	zone, err := authority.LoadZone(strings.NewReader(lookupTestZone), "svc.test.", "test")
	if err != nil {
		t.Fatal(err)
	}
	zones, err := authority.NewZones(zone)
	if err != nil {
		t.Fatal(err)
	}
	srv := &authority.Server{Handler: authority.Chain(zones, authority.CheckQuery)}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", pc.LocalAddr().String())
	if err != nil {
		t.Skipf("TCP port taken: %v", err)
	}
	go srv.ServeUDP(pc)
	go srv.ServeTCP(ln)
	t.Cleanup(func() { srv.Close() })
	return pc.LocalAddr().String()
}

// runLookupCLI runs "ztls lookup ARGS..." through cobra, then resets the
// command's flags so that the next run starts from the defaults.
func runLookupCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	rootCmd.SetOut(&out)
	rootCmd.SetArgs(append([]string{"lookup"}, args...))
	err := rootCmd.Execute()
	rootCmd.SetOut(nil)
	cmd, _, _ := rootCmd.Find([]string{"lookup"})
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			sv.Replace(nil)
		} else {
			f.Value.Set(f.DefValue)
		}
		f.Changed = false
	})
	return out.String(), err
}

func TestLookupCommandPlain(t *testing.T) {
	addr := startLookupTestServer(t)
	for _, tr := range []string{"udp", "tcp"} {
		out, err := runLookupCLI(t, "www.svc.test", "--type", "aaaa", "--resolver", addr, "--dns-transport", tr)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, ";; www.svc.test. AAAA  NOERROR") || !strings.Contains(out, "2001:db8::10") || !strings.Contains(out, " ms  "+tr+" ") {
			t.Fatalf("%s output:\n%s", tr, out)
		}
	}
	out, err := runLookupCLI(t, "nope.svc.test", "--resolver", addr)
	if err != nil || !strings.Contains(out, "NXDOMAIN") || !strings.Contains(out, "; authority:") {
		t.Fatalf("NXDOMAIN output (%v):\n%s", err, out)
	}
	if _, err := runLookupCLI(t, "www.svc.test", "--type", "BOGUS", "--resolver", addr); err == nil {
		t.Fatal("unknown type accepted")
	}
	if _, err := runLookupCLI(t, "www.svc.test", "--resolver", addr, "--dns-transport", "quic"); err == nil {
		t.Fatal("unknown transport accepted")
	}
}

func TestLookupCommandZtlsJSON(t *testing.T) {
	addr := startLookupTestServer(t)
	out, err := runLookupCLI(t, "www.svc.test", "--type", "ztls", "--resolver", addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	types := map[string]int{}
	var summary struct {
		Kind      string   `json:"kind"`
		Addresses []string `json:"addresses"`
	}
	lines := 0
	for sc.Scan() {
		lines++
		var a lookupJSON
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			t.Fatalf("line %d not JSON: %v\n%s", lines, err, out)
		}
		if a.Kind == "service" {
			json.Unmarshal(sc.Bytes(), &summary)
			continue
		}
		types[a.Type] = len(a.Records)
	}
	want := map[string]int{"A": 1, "AAAA": 1, "TXT": 1, "CERT": 0, "TLSA": 1, "HTTPS": 0}
	if len(types) != len(want) || lines != 7 {
		t.Fatalf("got %v in %d lines\n%s", types, lines, out)
	}
	for k, v := range want {
		if types[k] != v {
			t.Errorf("%s: %d records, want %d", k, types[k], v)
		}
	}
	if summary.Kind != "service" || len(summary.Addresses) != 2 {
		t.Fatalf("summary %+v", summary)
	}
}

func TestLookupCommandRegistered(t *testing.T) {
	cmd, _, err := rootCmd.Find([]string{"lookup"})
	if err != nil || cmd.Name() != "lookup" {
		t.Fatalf("lookup not registered: %v", err)
	}
	for _, fl := range []string{"type", "port", "resolver", "dns-transport", "ca", "servername", "json"} {
		if cmd.Flags().Lookup(fl) == nil {
			t.Errorf("flag --%s missing", fl)
		}
	}
}
