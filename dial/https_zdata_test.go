package dial

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/zdata"
)

// testSvcRecord is a record that parses (its signature is not checked
// here).
func testSvcRecord(t testing.TB) *zdata.Record {
	t.Helper()
	r, err := zdata.ParseTXT([]string{"v=ztls1", "20260101000000Z", "20260101010000Z", "16384", "7", "29",
		"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", "N", "1027", "MEUCIQ=="})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func testHTTPS(t testing.TB, owner string, prio uint16, target string, recs []*zdata.Record, extra ...dns.SVCBKeyValue) *dns.HTTPS {
	t.Helper()
	h := &dns.HTTPS{SVCB: dns.SVCB{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: 60},
		Priority: prio, Target: target}}
	h.Value = append(h.Value, extra...)
	if len(recs) > 0 {
		kv, err := zdata.SvcParam(0, recs)
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
	recs := []*zdata.Record{rec}
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
			o := readHTTPS(tc.rrs, owner, host, port, zdata.DefaultSvcParamKey)
			if o.alias != tc.alias || (o.recs != nil) != tc.recs || (tc.why == "") != (o.err == nil) ||
				(o.err != nil && !strings.Contains(o.err.Error(), tc.why)) {
				t.Fatalf("alias %q, %d records, err %v; want alias %q, records %v, %q", o.alias, len(o.recs), o.err, tc.alias, tc.recs, tc.why)
			}
			if o.recs != nil && o.recs[0].ZDataHash() != rec.ZDataHash() {
				t.Fatal("the records read are not the ones carried")
			}
		})
	}
}

// TestAliasChain: eight aliases are followed, a ninth and a loop are not.
func TestAliasChain(t *testing.T) {
	c := newAliasChain("WWW.example.org")
	for i := range maxAliasHops {
		if err := c.next(string(rune('a'+i)) + ".example.net."); err != nil {
			t.Fatalf("hop %d: %v", i+1, err)
		}
	}
	if err := c.next("z.example.net."); err == nil || !strings.Contains(err.Error(), "longer than 8") {
		t.Fatalf("ninth hop: %v", err)
	}
	c = newAliasChain("www.example.org")
	if err := c.next("www.example.org."); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("alias to the origin: %v", err)
	}
	if err := c.next("a.example.net."); err != nil {
		t.Fatal(err)
	}
	if err := c.next("a.example.net."); zdata.ReasonOf(err) != zdata.ReasonNoZData || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("loop: %v", err)
	}
}

func TestParseZDataFrom(t *testing.T) {
	for _, s := range []string{"", "https", "both", "txt"} {
		if f, err := ParseZDataFrom(s); err != nil || string(f) != s {
			t.Fatalf("%q: %v", s, err)
		}
	}
	if _, err := ParseZDataFrom("HTTPS"); err == nil {
		t.Fatal("HTTPS accepted")
	}
	if ZDataFrom("").String() != "https" {
		t.Fatal("the zero value is not https")
	}
}

// FuzzReadHTTPS feeds readHTTPS the HTTPS records of arbitrary DNS
// messages: it never panics, and says exactly one thing (records, an
// alias to follow, or why neither); records come only from a
// ServiceMode RR whose endpoint is the origin.
func FuzzReadHTTPS(f *testing.F) {
	rec := testSvcRecord(f)
	for _, rrs := range [][]dns.RR{
		{testHTTPS(f, "www.example.org.", 1, ".", []*zdata.Record{rec})},
		{testHTTPS(f, "www.example.org.", 0, "a.example.net.", nil)},
		{testHTTPS(f, "www.example.org.", 2, "svc.example.net.", []*zdata.Record{rec, rec}, &dns.SVCBPort{Port: 443})},
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
		o := readHTTPS(m.Answer, "www.example.org.", "www.example.org", 443, zdata.DefaultSvcParamKey)
		said := 0
		for _, b := range []bool{o.recs != nil, o.alias != "", o.err != nil} {
			if b {
				said++
			}
		}
		if said != 1 {
			t.Fatalf("outcome %+v", o)
		}
		if o.recs != nil {
			if len(o.recs) == 0 || len(o.recs) > zdata.MaxSvcRecords {
				t.Fatalf("%d records", len(o.recs))
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

// TestReportZDataFromText: the text report says which record the Z-data
// came from, and why the HTTPS record's was skipped.
func TestReportZDataFromText(t *testing.T) {
	for _, tc := range []struct {
		r    Report
		want string
	}{
		{Report{Mode: "ztls", ZDataFrom: ZDataFromHTTPS}, "Z-data from the HTTPS record (key65370; no TXT query)"},
		{Report{Mode: "ztls", ZDataFrom: ZDataFromTXT, HTTPSZDataSkipped: "no Z-data: loop"}, "Z-data from the TXT record (asked after the HTTPS record: no Z-data: loop)"},
		{Report{Mode: "tls", HTTPSZDataSkipped: "no Z-data: x"}, "no Z-data from the HTTPS record: no Z-data: x"},
	} {
		var b strings.Builder
		tc.r.WriteText(&b)
		if !strings.Contains(b.String(), tc.want) {
			t.Fatalf("%+v:\n%s\nwant %q", tc.r, b.String(), tc.want)
		}
	}
	var b strings.Builder
	(&Report{Mode: "tls"}).WriteText(&b)
	if strings.Contains(b.String(), "Z-data from") {
		t.Fatalf("a report without Z-data names a record:\n%s", b.String())
	}
}
