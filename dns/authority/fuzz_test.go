package authority

import (
	"bytes"
	"encoding/hex"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// FuzzLoadZone feeds arbitrary zone text to LoadZone: it either fails
// with an error or yields a zone that answers queries for its names, and
// whose RRsets can be replaced by what they hold.
func FuzzLoadZone(f *testing.F) {
	f.Add(testZone)
	f.Add("@ 60 IN SOA ns hm 1 2 3 4 5\nwww 60 IN CNAME www\n")
	f.Add("@ 60 IN SOA ns hm 1 2 3 4 5\n*.w 60 IN A 192.0.2.1\nsub 60 IN NS ns.sub\nns.sub 60 IN A 192.0.2.2\n")
	f.Add("$ORIGIN other.\n@ 60 IN SOA ns hm 1 2 3 4 5\n")
	f.Add("$TTL 1\n@ IN SOA ns hm 1 2 3 4 5\n@ IN TXT \"a\" \"b\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		z, err := LoadZone(strings.NewReader(text), "example.org.", "fuzz.zone")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "authority: ") {
				t.Fatalf("error without package prefix: %v", err)
			}
			return
		}
		zones, err := NewZones(z)
		if err != nil {
			t.Fatal(err)
		}
		d := z.data.Load()
		for name, n := range d.nodes {
			for _, qt := range []uint16{dns.TypeA, dns.TypeANY, dns.TypeNS, dns.TypeDS} {
				m := zones.Answer(query(name, qt))
				if m.Rcode != dns.RcodeSuccess && m.Rcode != dns.RcodeNameError {
					t.Fatalf("%s %d: rcode %d", name, qt, m.Rcode)
				}
				if _, err := m.Pack(); err != nil {
					t.Fatalf("answer for %s does not pack: %v", name, err)
				}
			}
			for rrtype, set := range n.sets {
				if err := z.ReplaceRRset(name, rrtype, set); err != nil {
					t.Fatalf("replacing %s %d with itself: %v", name, rrtype, err)
				}
			}
		}
	})
}

// FuzzParseCookie feeds arbitrary COOKIE option data to the parser and
// through the server: it parses exactly when RFC 7873 allows the length,
// keeps every byte, and a query carrying it is answered (FORMERR when
// malformed), never with a cookie the server did not make valid.
func FuzzParseCookie(f *testing.F) {
	f.Add(mustHex(f, "2464c4abcf10c957"))
	f.Add(mustHex(f, "2464c4abcf10c957010000005cf79f111f8130c3eee29480"))
	f.Add(mustHex(f, "fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5"))
	f.Add([]byte{})
	f.Add(make([]byte, 9))
	f.Add(make([]byte, 41))
	now := time.Unix(1559731985, 0)
	// No rate limit: every answer is checked, none dropped.
	s := cookieServer(f, &now, func(s *Server) { s.RateLimit = &RateLimit{} })
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := parseCookie(b)
		wantOK := len(b) == 8 || len(b) >= 16 && len(b) <= 40
		if (err == nil) != wantOK {
			t.Fatalf("%d bytes: %v", len(b), err)
		}
		if err == nil && (!bytes.Equal(c.client[:], b[:8]) || !bytes.Equal(c.server, b[8:])) {
			t.Fatalf("parse lost bytes of %x", b)
		}
		q := withCookie(query("www.example.org.", dns.TypeA), hex.EncodeToString(b))
		m, _ := exchangeFrom(t, s, "192.0.2.1", q)
		if m == nil {
			t.Fatal("no answer")
		}
		if !wantOK {
			if m.Rcode != dns.RcodeFormatError {
				t.Fatalf("malformed cookie %x: rcode %s", b, dns.RcodeToString[m.Rcode])
			}
			return
		}
		got, err := hex.DecodeString(cookieOf(m))
		if err != nil || len(got) != 24 || !bytes.Equal(got[:8], b[:8]) {
			t.Fatalf("answer cookie %q for %x", cookieOf(m), b)
		}
		rc, _ := parseCookie(got)
		if !s.cookies.check(rc.client, rc.server, netip.MustParseAddr("192.0.2.1"), uint32(now.Unix())) {
			t.Fatalf("the server's own cookie %x is not valid", got)
		}
	})
}
