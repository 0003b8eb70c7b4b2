package authority

import (
	"strings"
	"testing"

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
