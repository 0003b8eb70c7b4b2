package zdata

// FromHTTPS and AliasChain (https_read.go): which RR of an HTTPS RRset
// Z-data is read from, and how far aliases are followed.

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// testSvcRecord is a record that parses (its signature is not checked
// here).
func testSvcRecord(t testing.TB) *Record {
	t.Helper()
	r, err := ParseTXT([]string{"v=ztls1", "20260101000000Z", "20260101010000Z", "16384", "7", "29",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "N", "1027", "MEUCIQ=="})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testHTTPS(t testing.TB, owner string, prio uint16, target string, recs []*Record, extra ...dns.SVCBKeyValue) *dns.HTTPS {
	t.Helper()
	h := &dns.HTTPS{SVCB: dns.SVCB{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: 60},
		Priority: prio, Target: target}}
	h.Value = append(h.Value, extra...)
	if len(recs) > 0 {
		kv, err := SvcParam(0, recs)
		if err != nil {
			t.Fatal(err)
		}
		h.Value = append(h.Value, kv)
	}
	return h
}

// TestReadHTTPS: which RR of an HTTPS RRset Z-data is read from
// (docs/ztls-spec.md, Section 8.6), and why none.
func TestReadHTTPS(t *testing.T) {
	const owner, host, port = "www.example.org.", "www.example.org", 443
	rec := testSvcRecord(t)
	recs := []*Record{rec}
	for _, tc := range []struct {
		name  string
		rrs   []dns.RR
		alias string
		recs  bool
		why   string
	}{
		{"none", nil, "", false, "no ServiceMode"},
		{"own endpoint", []dns.RR{testHTTPS(t, owner, 1, ".", recs)}, "", true, ""},
		{"origin named", []dns.RR{testHTTPS(t, "_8443._https."+owner, 1, owner, recs)}, "", true, ""},
		{"no key", []dns.RR{testHTTPS(t, owner, 1, ".", nil, &dns.SVCBAlpn{Alpn: []string{"h2"}})}, "", false, "carries no key65370"},
		{"alias", []dns.RR{testHTTPS(t, owner, 0, "CDN.example.net.", nil)}, "cdn.example.net.", false, ""},
		{"alias wins over ServiceMode", []dns.RR{testHTTPS(t, owner, 1, ".", recs), testHTTPS(t, owner, 0, "cdn.example.net.", nil)}, "cdn.example.net.", false, ""},
		{"alias to root", []dns.RR{testHTTPS(t, owner, 0, ".", nil)}, "", false, "no service"},
		{"other target", []dns.RR{testHTTPS(t, owner, 1, "svc.example.net.", recs)}, "", false, "endpoint svc.example.net."},
		{"other port", []dns.RR{testHTTPS(t, owner, 1, ".", recs, &dns.SVCBPort{Port: 8443})}, "", false, "port 8443"},
		{"same port", []dns.RR{testHTTPS(t, owner, 1, ".", recs, &dns.SVCBPort{Port: 443})}, "", true, ""},
		{"lowest priority of the own endpoint", []dns.RR{
			testHTTPS(t, owner, 3, ".", nil), testHTTPS(t, owner, 1, "svc.example.net.", recs), testHTTPS(t, owner, 2, ".", recs)}, "", true, ""},
		{"malformed", []dns.RR{func() dns.RR {
			h := testHTTPS(t, owner, 1, ".", recs)
			l := h.Value[0].(*dns.SVCBLocal)
			l.Data = l.Data[:len(l.Data)-2]
			return h
		}()}, "", false, "malformed"},
		{"malformed for another endpoint", []dns.RR{func() dns.RR {
			h := testHTTPS(t, owner, 1, "svc.example.net.", recs)
			l := h.Value[0].(*dns.SVCBLocal)
			l.Data = l.Data[:3]
			return h
		}()}, "", false, "endpoint svc.example.net."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, alias, why := FromHTTPS(tc.rrs, owner, host, port, DefaultSvcParamKey)
			if alias != tc.alias || (recs != nil) != tc.recs || (tc.why == "") != (why == nil) ||
				(why != nil && !strings.Contains(why.Error(), tc.why)) {
				t.Fatalf("alias %q, %d records, err %v; want alias %q, records %v, %q", alias, len(recs), why, tc.alias, tc.recs, tc.why)
			}
			if recs != nil && recs[0].ZDataHash() != rec.ZDataHash() {
				t.Fatal("the records read are not the ones carried")
			}
		})
	}
}

// TestAliasChain: eight aliases are followed, a ninth and a loop are not.
func TestAliasChain(t *testing.T) {
	c := NewAliasChain("WWW.example.org")
	for i := range MaxAliasHops {
		if err := c.Next(string(rune('a'+i)) + ".example.net."); err != nil {
			t.Fatalf("hop %d: %v", i+1, err)
		}
	}
	if err := c.Next("z.example.net."); err == nil || !strings.Contains(err.Error(), "longer than 8") {
		t.Fatalf("ninth hop: %v", err)
	}
	c = NewAliasChain("www.example.org")
	if err := c.Next("www.example.org."); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("alias to the origin: %v", err)
	}
	if err := c.Next("a.example.net."); err != nil {
		t.Fatal(err)
	}
	if err := c.Next("a.example.net."); ReasonOf(err) != ReasonNoZData || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("loop: %v", err)
	}
}

// FuzzReadHTTPS feeds FromHTTPS the HTTPS records of arbitrary DNS
// messages: it never panics, and says exactly one thing (records, an
// alias to follow, or why neither); records come only from a
// ServiceMode RR whose endpoint is the origin.
func FuzzReadHTTPS(f *testing.F) {
	rec := testSvcRecord(f)
	for _, rrs := range [][]dns.RR{
		{testHTTPS(f, "www.example.org.", 1, ".", []*Record{rec})},
		{testHTTPS(f, "www.example.org.", 0, "a.example.net.", nil)},
		{testHTTPS(f, "www.example.org.", 2, "svc.example.net.", []*Record{rec, rec}, &dns.SVCBPort{Port: 443})},
	} {
		m := new(dns.Msg)
		m.SetQuestion("www.example.org.", dns.TypeHTTPS)
		m.Answer = rrs
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := new(dns.Msg)
		if m.Unpack(b) != nil {
			return
		}
		recs, alias, why := FromHTTPS(m.Answer, "www.example.org.", "www.example.org", 443, DefaultSvcParamKey)
		said := 0
		for _, b := range []bool{recs != nil, alias != "", why != nil} {
			if b {
				said++
			}
		}
		if said != 1 {
			t.Fatalf("outcome: %d records, alias %q, %v", len(recs), alias, why)
		}
		if recs != nil {
			if len(recs) == 0 || len(recs) > MaxSvcRecords {
				t.Fatalf("%d records", len(recs))
			}
			ok := false
			for _, rr := range m.Answer {
				if h, isH := rr.(*dns.HTTPS); isH && h.Priority > 0 {
					if _, own := endpointOf(h, "www.example.org.", "www.example.org", 443); own {
						ok = true
					}
				}
			}
			if !ok {
				t.Fatal("records read from no RR of the origin's endpoint")
			}
		}
	})
}
