package dnstest

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestStartBindServesZone(t *testing.T) {
	b := StartBind(t, BindOptions{Zones: []BindZone{{
		Origin: "example.test.",
		Text:   "$TTL 60\n@ IN SOA ns hm 1 3600 600 86400 60\n@ IN NS ns\nns IN A 127.0.0.1\nwww IN A 192.0.2.1\n",
	}}})
	for _, network := range []string{"udp", "tcp"} {
		q := new(dns.Msg)
		q.SetQuestion("www.example.test.", dns.TypeA)
		r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second}).Exchange(q, b.Addr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", network, err, b.Logs())
		}
		if !r.Authoritative || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "192.0.2.1") {
			t.Fatalf("%s: %v", network, r)
		}
	}
}

func TestBindConfig(t *testing.T) {
	conf := BindConfig("/tmp/d", 5300, BindOptions{
		Zones: []BindZone{{Origin: "a.test", AllowUpdate: true}, {Origin: "b.test."}},
		Key:   &BindKey{Name: "k.", Secret: "c2VjcmV0"},
	})
	for _, want := range []string{
		"listen-on port 5300 { 127.0.0.1; };",
		"recursion no;",
		"key \"k\" {\n  algorithm hmac-sha256;",
		"zone \"a.test.\" {\n  type primary;\n  file \"zone0.db\";\n  allow-update { key \"k\"; };",
		"zone \"b.test.\" {\n  type primary;\n  file \"zone1.db\";\n  allow-update { none; };",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("named.conf lacks %q:\n%s", want, conf)
		}
	}
}
