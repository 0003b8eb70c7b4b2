package main

import (
	"bufio"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const dnsServeTestZone = `$ORIGIN example.test.
$TTL 300
@ IN SOA ns hostmaster 1 3600 600 86400 60
@ IN NS ns
ns IN A 127.0.0.1
www IN A 192.0.2.7
`

// The command serves a zone file over UDP and TCP until its context ends.
func TestDNSServeCommand(t *testing.T) {
	dir := t.TempDir()
	zoneFile := filepath.Join(dir, "example.test.zone")
	if err := os.WriteFile(zoneFile, []byte(dnsServeTestZone), 0o644); err != nil {
		t.Fatal(err)
	}
	relFile := filepath.Join(dir, "rel.zone")
	if err := os.WriteFile(relFile, []byte("@ 60 IN SOA ns hm 1 2 3 4 5\nwww 60 IN A 192.0.2.8\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- runDNSServe(ctx, pw, &dnsServeFlags{
			zones:  []string{zoneFile, "other.test.=" + relFile},
			listen: "127.0.0.1:0",
		})
		pw.Close()
	}()
	addrs := map[string]string{}
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text() // the log: msg="serving udp on" addr=..., msg=zones origins=...
		if what, ok := strings.CutPrefix(logAttr(line, "msg"), "serving "); ok && strings.HasSuffix(what, " on") {
			addrs[strings.TrimSuffix(what, " on")] = logAttr(line, "addr")
		}
		if logAttr(line, "msg") == "zones" {
			if got := logAttr(line, "origins"); got != "example.test. other.test." {
				t.Errorf("zones line %q", line)
			}
			break
		}
	}
	go io.Copy(io.Discard, pr)
	for _, tc := range []struct{ net, name, want string }{
		{"udp", "www.example.test.", "192.0.2.7"},
		{"tcp", "www.other.test.", "192.0.2.8"},
	} {
		q := new(dns.Msg)
		q.SetQuestion(tc.name, dns.TypeA)
		r, _, err := (&dns.Client{Net: tc.net, Timeout: 5 * time.Second}).Exchange(q, addrs[tc.net])
		if err != nil {
			t.Fatalf("%s: %v (addresses %v)", tc.net, err, addrs)
		}
		if !r.Authoritative || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), tc.want) {
			t.Fatalf("%s: %v", tc.net, r)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDNSServeCommandErrors(t *testing.T) {
	dir := t.TempDir()
	rel := filepath.Join(dir, "rel.zone")
	os.WriteFile(rel, []byte("@ 60 IN SOA ns hm 1 2 3 4 5\n"), 0o644)
	tests := []struct {
		name string
		f    dnsServeFlags
		want string
	}{
		{"no zone", dnsServeFlags{listen: "127.0.0.1:0"}, "at least one --zone"},
		{"missing file", dnsServeFlags{zones: []string{filepath.Join(dir, "nope")}, listen: "127.0.0.1:0"}, "no such file"},
		{"no origin", dnsServeFlags{zones: []string{rel}, listen: "127.0.0.1:0"}, "ORIGIN="},
		{"tls without cert", dnsServeFlags{zones: []string{"x.=" + rel}, tlsListen: "127.0.0.1:0"}, "--cert"},
		{"zdata not a dir", dnsServeFlags{zones: []string{"x.=" + rel}, listen: "127.0.0.1:0", zdata: []string{rel}}, "not a directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := runDNSServe(context.Background(), io.Discard, &tc.f)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if c, _, err := rootCmd.Find([]string{"dns", "serve"}); err != nil || c.Flags().Lookup("zdata") == nil || c.Example == "" {
		t.Fatalf("dns serve not registered: %v", err)
	}
}
