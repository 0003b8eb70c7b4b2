package dnstest

import (
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const testZoneText = "$TTL 60\n@ IN SOA ns hm 1 3600 600 86400 60\n@ IN NS ns\nns IN A 127.0.0.1\nwww IN A 192.0.2.1\n"

func TestStartKnotServesZone(t *testing.T) {
	k := StartKnot(t, KnotOptions{Zones: []BindZone{{Origin: "example.test.", Text: testZoneText}}})
	for _, network := range []string{"udp", "tcp"} {
		q := new(dns.Msg)
		q.SetQuestion("www.example.test.", dns.TypeA)
		r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second}).Exchange(q, k.Addr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", network, err, k.Logs())
		}
		if !r.Authoritative || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "192.0.2.1") {
			t.Fatalf("%s: %v", network, r)
		}
	}
}

func TestKnotConfig(t *testing.T) {
	conf := KnotConfig("/tmp/d", 5300, KnotOptions{
		Zones: []BindZone{{Origin: "a.test", AllowUpdate: true}, {Origin: "b.test."}},
		Key:   &BindKey{Name: "k", Secret: "c2VjcmV0"},
	})
	for _, want := range []string{
		"listen: 127.0.0.1@5300",
		"key:\n  - id: k.\n    algorithm: hmac-sha256\n    secret: c2VjcmV0",
		"acl:\n  - id: update\n    key: k.\n    action: update",
		"  - domain: a.test.\n    file: \"zone0.db\"\n    acl: update",
		"  - domain: b.test.\n    file: \"zone1.db\"\n",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("knot.conf lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "zone1.db\"\n    acl") {
		t.Errorf("b.test takes updates:\n%s", conf)
	}
}

// A BIND 9 resolver forwarding a zone to a BIND 9 primary answers for it,
// the second time from its cache (the TTL has not been reset to 60).
func TestStartBindForwards(t *testing.T) {
	primary := StartBind(t, BindOptions{Zones: []BindZone{{Origin: "example.test.", Text: testZoneText}}})
	res := StartBind(t, BindOptions{Forward: map[string]string{"example.test.": primary.Addr}})
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	r, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(q, res.Addr)
	if err != nil {
		t.Fatalf("%v\n%s", err, res.Logs())
	}
	if r.Authoritative || !r.RecursionAvailable || len(r.Answer) != 1 || !strings.HasSuffix(r.Answer[0].String(), "192.0.2.1") {
		t.Fatalf("resolver answered %v", r)
	}
}
