package authority

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
)

func TestZonesAnswer(t *testing.T) {
	soa := "example.org.\t300\tIN\tSOA\tns1.example.org. hostmaster.example.org. 2024010101 7200 3600 1209600 300"
	tests := []struct {
		name    string
		qname   string
		qtype   uint16
		qclass  uint16
		rcode   int
		aa      bool
		answer  []string
		ns      []string
		extra   []string
		noQuest bool
	}{
		{name: "A RRset", qname: "www.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"www.example.org.\t3600\tIN\tA\t192.0.2.1", "www.example.org.\t3600\tIN\tA\t192.0.2.2"}},
		{name: "case insensitive", qname: "WwW.ExAmPlE.oRg.", qtype: dns.TypeAAAA, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"www.example.org.\t3600\tIN\tAAAA\t2001:db8::1"}},
		{name: "NODATA", qname: "www.example.org.", qtype: dns.TypeMX, rcode: dns.RcodeSuccess, aa: true, ns: []string{soa}},
		{name: "NXDOMAIN", qname: "nope.example.org.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{soa}},
		{name: "empty non-terminal is NODATA", qname: "b.c.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: true, ns: []string{soa}},
		{name: "below empty non-terminal", qname: "x.b.c.example.org.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true, ns: []string{soa}},
		{name: "apex NS", qname: "example.org.", qtype: dns.TypeNS, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"example.org.\t3600\tIN\tNS\tns1.example.org."}},
		{name: "CNAME followed", qname: "chain.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"alias.example.org.\t3600\tIN\tCNAME\twww.example.org.", "chain.example.org.\t3600\tIN\tCNAME\talias.example.org.",
				"www.example.org.\t3600\tIN\tA\t192.0.2.1", "www.example.org.\t3600\tIN\tA\t192.0.2.2"}},
		{name: "CNAME asked for", qname: "alias.example.org.", qtype: dns.TypeCNAME, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"alias.example.org.\t3600\tIN\tCNAME\twww.example.org."}},
		{name: "CNAME then NODATA", qname: "alias.example.org.", qtype: dns.TypeMX, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"alias.example.org.\t3600\tIN\tCNAME\twww.example.org."}, ns: []string{soa}},
		{name: "CNAME out of zone", qname: "outside.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"outside.example.org.\t3600\tIN\tCNAME\twww.example.net."}},
		{name: "CNAME to NXDOMAIN (RFC 6604)", qname: "dangling.example.org.", qtype: dns.TypeA, rcode: dns.RcodeNameError, aa: true,
			answer: []string{"dangling.example.org.\t3600\tIN\tCNAME\tnothing.example.org."}, ns: []string{soa}},
		{name: "CNAME loop ends", qname: "loop1.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"loop1.example.org.\t3600\tIN\tCNAME\tloop2.example.org.", "loop2.example.org.\t3600\tIN\tCNAME\tloop1.example.org."}},
		{name: "referral with glue", qname: "host.sub.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: false,
			ns:    []string{"sub.example.org.\t3600\tIN\tNS\tns.elsewhere.net.", "sub.example.org.\t3600\tIN\tNS\tns.sub.example.org."},
			extra: []string{"ns.sub.example.org.\t3600\tIN\tA\t192.0.2.99"}},
		{name: "referral at the cut", qname: "sub.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: false,
			ns:    []string{"sub.example.org.\t3600\tIN\tNS\tns.elsewhere.net.", "sub.example.org.\t3600\tIN\tNS\tns.sub.example.org."},
			extra: []string{"ns.sub.example.org.\t3600\tIN\tA\t192.0.2.99"}},
		{name: "DS at the cut from the parent", qname: "sub.example.org.", qtype: dns.TypeDS, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"sub.example.org.\t3600\tIN\tDS\t12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"}},
		{name: "Z-data TXT", qname: "_ztls._443._tcp.www.example.org.", qtype: dns.TypeTXT, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"_ztls._443._tcp.www.example.org.\t3600\tIN\tTXT\t\"v=ztls1\""}},
		{name: "ANY", qname: "www.example.org.", qtype: dns.TypeANY, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"www.example.org.\t3600\tIN\tAAAA\t2001:db8::1"}}, // RFC 8482: the smallest RRset
		{name: "ANY at a name of large RRsets is a synthesized HINFO", qname: "big.example.org.", qtype: dns.TypeANY, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"big.example.org.\t300\tIN\tHINFO\t\"RFC8482\" \"\""}},
		{name: "ANY at a CNAME is the CNAME", qname: "alias.example.org.", qtype: dns.TypeANY, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"alias.example.org.\t3600\tIN\tCNAME\twww.example.org."}},
		{name: "outside every zone", qname: "www.example.net.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "root", qname: ".", qtype: dns.TypeNS, rcode: dns.RcodeRefused},
		{name: "parent of the zone", qname: "org.", qtype: dns.TypeA, rcode: dns.RcodeRefused},
		{name: "CHAOS class", qname: "version.bind.", qtype: dns.TypeTXT, qclass: dns.ClassCHAOS, rcode: dns.RcodeRefused},
		{name: "nested zone answers for itself", qname: "www.inner.example.org.", qtype: dns.TypeA, rcode: dns.RcodeSuccess, aa: true,
			answer: []string{"www.inner.example.org.\t60\tIN\tA\t192.0.2.77"}},
	}
	inner := mustZone(t, "inner.example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\nwww 60 IN A 192.0.2.77\n")
	zones := mustZones(t, mustZone(t, "example.org.", testZone), inner)
	h := Chain(zones, CheckQuery)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := query(tc.qname, tc.qtype)
			if tc.qclass != 0 {
				q.Question[0].Qclass = tc.qclass
			}
			q.RecursionDesired = true
			m := serveRecorded(t, h, TransportUDP, q)
			if m.Rcode != tc.rcode || m.Authoritative != tc.aa || !m.Response || m.Id != q.Id {
				t.Fatalf("rcode=%s aa=%v qr=%v id=%d; want %s aa=%v, id %d",
					dns.RcodeToString[m.Rcode], m.Authoritative, m.Response, m.Id, dns.RcodeToString[tc.rcode], tc.aa, q.Id)
			}
			if !m.RecursionDesired || m.RecursionAvailable {
				t.Errorf("RD must be echoed and RA clear: rd=%v ra=%v", m.RecursionDesired, m.RecursionAvailable)
			}
			if len(m.Question) != 1 || m.Question[0] != q.Question[0] {
				t.Errorf("question = %v", m.Question)
			}
			check := func(section string, got []string, want []string) {
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s:\n got %q\nwant %q", section, got, want)
				}
			}
			check("answer", rrStrings(m.Answer), tc.answer)
			check("authority", rrStrings(m.Ns), tc.ns)
			check("additional", rrStrings(m.Extra), tc.extra)
		})
	}
}

func TestLoadZoneErrors(t *testing.T) {
	tests := []struct {
		name, origin, text, want string
	}{
		{"no SOA", "example.org.", "www 60 IN A 192.0.2.1\n", "no SOA"},
		{"SOA not at apex", "example.org.", "www 60 IN SOA ns hm 1 2 3 4 5\n", "no SOA"},
		{"two SOAs", "example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\n@ 60 IN SOA ns hm 2 2 3 4 5\n", "more than one SOA"},
		{"SOA below the apex", "example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\nsub 60 IN SOA ns hm 1 2 3 4 5\n", "SOA at sub.example.org., below its apex"},
		{"out of zone", "example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\nwww.example.net. 60 IN A 192.0.2.1\n", "outside zone"},
		{"CNAME and other data", "example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\nx 60 IN CNAME y\nx 60 IN A 192.0.2.1\n", "CNAME and other data"},
		{"class CH", "example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\nx 60 CH TXT \"a\"\n", "class must be IN"},
		{"syntax", "example.org.", "@ 60 IN SOA ns hm 1 2 3 4 5\nx 60 IN A not-an-address\n", "authority: zone example.org."},
		{"include refused", "example.org.", "$INCLUDE /etc/passwd\n", "authority: zone example.org."},
		{"bad origin", "exa..mple.", "", "bad zone origin"},
		// Found by FuzzLoadZone: the parser takes an odd-length digest.
		{"unencodable DS", "example.org.", "$TTL 0\n@ SOA 0 0 0 0 0 0 0\n0 DS 0 0 0 0", "cannot be encoded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadZone(strings.NewReader(tc.text), tc.origin, "test.zone")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, err := NewZones(mustZone(t, "a.", "@ 1 IN SOA n h 1 2 3 4 5"), mustZone(t, "A.", "@ 1 IN SOA n h 1 2 3 4 5")); err == nil {
		t.Fatal("NewZones accepted the same zone twice")
	}
}

func TestNegativeSOATTL(t *testing.T) {
	// RFC 2308, Section 3: the SOA's TTL is the smaller of TTL and MINIMUM.
	zones := mustZones(t, mustZone(t, "example.com.", "@ 30 IN SOA ns hm 1 2 3 4 600\n"))
	m := zones.Answer(query("x.example.com.", dns.TypeA))
	if len(m.Ns) != 1 || m.Ns[0].Header().Ttl != 30 {
		t.Fatalf("authority = %v", m.Ns)
	}
}

func TestReplaceRRset(t *testing.T) {
	z := mustZone(t, "example.org.", testZone)
	zones := mustZones(t, z)
	ask := func(name string, qtype uint16) *dns.Msg { return zones.Answer(query(name, qtype)) }
	name := "_ztls._443._tcp.www.example.org."

	// Replace: old record gone, new ones served.
	if err := zones.ReplaceRRset(name, dns.TypeTXT, rrs(t,
		name+" 60 IN TXT \"v=ztls1 new\"", name+" 60 IN TXT \"second\"")); err != nil {
		t.Fatal(err)
	}
	if got := rrStrings(ask(name, dns.TypeTXT).Answer); len(got) != 2 || !strings.Contains(got[1], "v=ztls1 new") {
		t.Fatalf("after replace: %q", got)
	}

	// A new name deep below the apex makes its ancestors empty
	// non-terminals; deleting it removes them again.
	deep := "_443._tcp.new.example.org."
	tlsa := deep + " 60 IN TLSA 3 1 1 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"
	if err := z.ReplaceRRset(deep, dns.TypeTLSA, rrs(t, tlsa)); err != nil {
		t.Fatal(err)
	}
	if m := ask("_tcp.new.example.org.", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("ENT after insert: %s", dns.RcodeToString[m.Rcode])
	}
	if m := ask(deep, dns.TypeTLSA); len(m.Answer) != 1 {
		t.Fatalf("TLSA after insert: %v", m)
	}
	if err := z.ReplaceRRset(deep, dns.TypeTLSA, nil); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{deep, "_tcp.new.example.org.", "new.example.org."} {
		if m := ask(n, dns.TypeA); m.Rcode != dns.RcodeNameError {
			t.Fatalf("%s after delete: %s", n, dns.RcodeToString[m.Rcode])
		}
	}
	// The ENTs of other names survive a delete.
	if m := ask("b.c.example.org.", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("unrelated ENT lost: %s", dns.RcodeToString[m.Rcode])
	}

	// The caller's records are copied.
	mine := rrs(t, "www.example.org. 60 IN A 192.0.2.200")
	if err := z.ReplaceRRset("www.example.org.", dns.TypeA, mine); err != nil {
		t.Fatal(err)
	}
	mine[0].(*dns.A).A[3] = 9
	if got := rrStrings(z.RRset("www.example.org.", dns.TypeA)); len(got) != 1 || !strings.HasSuffix(got[0], "192.0.2.200") {
		t.Fatalf("zone shares the caller's record: %q", got)
	}

	errCases := []struct {
		name   string
		owner  string
		rrtype uint16
		rrs    []dns.RR
	}{
		{"outside zone", "www.example.net.", dns.TypeA, nil},
		{"wrong owner", "x.example.org.", dns.TypeA, rrs(t, "y.example.org. 60 IN A 192.0.2.1")},
		{"wrong type", "x.example.org.", dns.TypeA, rrs(t, "x.example.org. 60 IN AAAA ::1")},
		{"CNAME beside data", "www.example.org.", dns.TypeCNAME, rrs(t, "www.example.org. 60 IN CNAME x.example.org.")},
		{"delete SOA", "example.org.", dns.TypeSOA, nil},
		{"nil record", "x.example.org.", dns.TypeA, []dns.RR{nil}},
	}
	for _, tc := range errCases {
		if err := z.ReplaceRRset(tc.owner, tc.rrtype, tc.rrs); err == nil {
			t.Errorf("%s: ReplaceRRset succeeded", tc.name)
		}
	}
	// A failed replace leaves the data alone.
	if m := ask("www.example.org.", dns.TypeA); len(m.Answer) != 1 {
		t.Fatalf("failed replace changed data: %v", m.Answer)
	}
	// The SOA can be replaced; negative answers use the new one.
	if err := z.ReplaceRRset("example.org.", dns.TypeSOA, rrs(t, "example.org. 60 IN SOA ns1 hm 7 1 1 1 10")); err != nil {
		t.Fatal(err)
	}
	if m := ask("nope.example.org.", dns.TypeA); m.Ns[0].(*dns.SOA).Serial != 7 {
		t.Fatalf("SOA not replaced: %v", m.Ns)
	}
}

// Queries running while the set is replaced see the old set or the new
// one, whole. Run with -race.
func TestReplaceRRsetWhileQuerying(t *testing.T) {
	z := mustZone(t, "example.org.", testZone)
	zones := mustZones(t, z)
	name := "_ztls._443._tcp.www.example.org."
	version := func(v int) []dns.RR {
		var out []dns.RR
		for i := range 3 {
			out = append(out, rr(t, fmt.Sprintf("%s 60 IN TXT \"gen=%d part=%d\"", name, v, i)))
		}
		return out
	}
	if err := z.ReplaceRRset(name, dns.TypeTXT, version(0)); err != nil {
		t.Fatal(err)
	}
	const gens = 200
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				m := zones.Answer(query(name, dns.TypeTXT))
				if len(m.Answer) != 3 {
					errs <- fmt.Errorf("got %d records", len(m.Answer))
					return
				}
				var g0 int
				for i, a := range m.Answer {
					var g, p int
					fmt.Sscanf(a.(*dns.TXT).Txt[0], "gen=%d part=%d", &g, &p)
					if i == 0 {
						g0 = g
					}
					if g != g0 || p != i {
						errs <- fmt.Errorf("mixed answer: %v", m.Answer)
						return
					}
				}
				if g0 < last {
					errs <- fmt.Errorf("went back from generation %d to %d", last, g0)
					return
				}
				last = g0
			}
		}()
	}
	for v := 1; v <= gens; v++ {
		if err := z.ReplaceRRset(name, dns.TypeTXT, version(v)); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := zones.Answer(query(name, dns.TypeTXT)); !strings.Contains(m.Answer[0].String(), fmt.Sprintf("gen=%d", gens)) {
		t.Fatalf("final answer %v", m.Answer)
	}
}

func TestCheckQuery(t *testing.T) {
	h := Chain(mustZones(t, mustZone(t, "example.org.", testZone)), CheckQuery)
	withOPT := func(m *dns.Msg, version uint8, opts ...dns.EDNS0) *dns.Msg {
		o := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		o.SetUDPSize(1232)
		o.SetVersion(version)
		o.Option = opts
		m.Extra = append(m.Extra, o)
		return m
	}
	update := query("example.org.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	notify := query("example.org.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	noQ := query("www.example.org.", dns.TypeA)
	noQ.Question = nil
	twoQ := query("www.example.org.", dns.TypeA)
	twoQ.Question = append(twoQ.Question, twoQ.Question[0])
	twoOPT := withOPT(withOPT(query("www.example.org.", dns.TypeA), 0), 0)
	signed := query("www.example.org.", dns.TypeA)
	signed.SetTsig("key.", dns.HmacSHA256, 300, 0)
	ka := &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE, Timeout: 100}
	tests := []struct {
		name  string
		t     Transport
		q     *dns.Msg
		rcode int
	}{
		{"UPDATE", TransportUDP, update, dns.RcodeNotImplemented},
		{"NOTIFY", TransportUDP, notify, dns.RcodeNotImplemented},
		{"no question", TransportUDP, noQ, dns.RcodeFormatError},
		{"two questions", TransportUDP, twoQ, dns.RcodeFormatError},
		{"two OPT records", TransportUDP, twoOPT, dns.RcodeFormatError},
		{"EDNS version 1", TransportUDP, withOPT(query("www.example.org.", dns.TypeA), 1), dns.RcodeBadVers},
		{"keepalive with timeout on TCP", TransportTCP, withOPT(query("www.example.org.", dns.TypeA), 0, ka), dns.RcodeFormatError},
		{"keepalive with timeout on UDP is ignored", TransportUDP, withOPT(query("www.example.org.", dns.TypeA), 0, ka), dns.RcodeSuccess},
		{"empty keepalive on TCP", TransportTCP, withOPT(query("www.example.org.", dns.TypeA), 0, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}), dns.RcodeSuccess},
		{"AXFR", TransportTCP, query("example.org.", dns.TypeAXFR), dns.RcodeRefused},
		{"qtype OPT", TransportUDP, query("example.org.", dns.TypeOPT), dns.RcodeFormatError},
		{"MAILB", TransportUDP, query("example.org.", dns.TypeMAILB), dns.RcodeNotImplemented},
		{"TSIG-signed", TransportUDP, signed, dns.RcodeRefused},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := serveRecorded(t, h, tc.t, tc.q)
			if m.Rcode != tc.rcode || m.Id != tc.q.Id || !m.Response || m.Opcode != tc.q.Opcode {
				t.Fatalf("rcode %s id %d opcode %d; want %s", dns.RcodeToString[m.Rcode], m.Id, m.Opcode, dns.RcodeToString[tc.rcode])
			}
			if tc.rcode != dns.RcodeSuccess && len(m.Answer) != 0 {
				t.Fatalf("error answer carries records: %v", m.Answer)
			}
		})
	}
}

// Swap replaces a served zone's data at once; another origin is refused.
func TestZoneSwap(t *testing.T) {
	load := func(text string) *Zone {
		t.Helper()
		z, err := LoadZone(strings.NewReader(text), "swap.test.", "test")
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	const head = "$TTL 300\n@ IN SOA ns1 hostmaster 1 3600 600 86400 60\n@ IN NS ns1\nns1 IN A 127.0.0.1\n"
	z := load(head + "www IN A 192.0.2.1\n")
	if err := z.Swap(load(head + "www IN A 192.0.2.2\n")); err != nil {
		t.Fatal(err)
	}
	rrs := z.RRset("www.swap.test.", dns.TypeA)
	if len(rrs) != 1 || rrs[0].(*dns.A).A.String() != "192.0.2.2" {
		t.Fatalf("after Swap: %v", rrs)
	}
	other, err := LoadZone(strings.NewReader(head), "other.test.", "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := z.Swap(other); err == nil {
		t.Fatal("Swap took another origin's data")
	}
}
