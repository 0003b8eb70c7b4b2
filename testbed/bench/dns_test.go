package bench

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	dnsresolver "github.com/ztls-project/ztls/dns/resolver"
)

// captureWriter is a dns.ResponseWriter that keeps the reply.
type captureWriter struct {
	dns.ResponseWriter
	msg *dns.Msg
}

func (w *captureWriter) WriteMsg(m *dns.Msg) error { w.msg = m; return nil }
func (w *captureWriter) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 5353}
}

// TestAuthorityNegativeAnswersCarrySOA: NODATA and NXDOMAIN from the
// benchmark's authority carry the zone's SOA, so that a resolver may cache
// them (RFC 2308); a positive answer does not.
func TestAuthorityNegativeAnswersCarrySOA(t *testing.T) {
	a := &authority{rrs: map[rrKey][]dns.RR{}}
	a.add(&dns.A{Hdr: dns.RR_Header{Name: ServerName + ".", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
		A: net.IPv4(10, 0, 0, 1)})
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		soa   bool
	}{
		{ServerName + ".", dns.TypeA, dns.RcodeSuccess, false},
		{ServerName + ".", dns.TypeCERT, dns.RcodeSuccess, true},
		{"nothing." + benchZone, dns.TypeA, dns.RcodeNameError, true},
	} {
		q := new(dns.Msg)
		q.SetQuestion(tc.name, tc.qtype)
		w := &captureWriter{}
		a.ServeDNS(w, q)
		gotSOA := len(w.msg.Ns) == 1 && w.msg.Ns[0].Header().Rrtype == dns.TypeSOA && w.msg.Ns[0].Header().Name == benchZone
		if w.msg.Rcode != tc.rcode || gotSOA != tc.soa {
			t.Errorf("%s %s: rcode %d, SOA %v; want %d, %v", tc.name, dns.TypeToString[tc.qtype], w.msg.Rcode, gotSOA, tc.rcode, tc.soa)
		}
	}
}

// TestLoopbackDNSAnswersOverTCPWhenTruncated: an answer over 1232 bytes
// (here six 250-byte TXT records) reaches the client's resolver the way
// it does on the Internet: truncated over UDP to the buffer the query
// advertised, then whole over TCP, from the authority to the benchmark's
// resolver and from it to the client. Before, both answered over UDP only
// and sent the whole 1.6 kB datagram, which the client's resolver drops
// (larger than its buffer) until its budget ran out: in the last minutes
// of each hour, when ztls-bfe's TXT answer was 1.37 kB, every ztls-bfe
// visit failed with no Z-data.
func TestLoopbackDNSAnswersOverTCPWhenTruncated(t *testing.T) {
	w := newLoopbackWorld(t)
	name := "_ztls._443._tcp." + ServerName + "."
	var rrs []dns.RR
	for i := range 6 {
		rrs = append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
			Txt: []string{strings.Repeat(string(rune('a'+i)), 250)}})
	}
	w.d.auth.replace(rrs)
	resAddr := w.d.stub.resolver.server.String()

	// Over UDP, within the buffer: TC, and 512 bytes without EDNS0.
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeTXT)
	r, _, err := (&dns.Client{Net: "udp"}).Exchange(q, resAddr)
	if err != nil || !r.Truncated || r.Len() > dns.MinMsgSize {
		t.Fatalf("UDP without EDNS0: %v, TC %v, %d bytes", err, r != nil && r.Truncated, r.Len())
	}

	// The client's resolver, over UDP: asked again over TCP, whole.
	for _, scen := range []string{"cold", "cached"} {
		res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{resAddr}, Transport: dnsresolver.UDP, CacheSize: -1, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		a, err := res.Lookup(context.Background(), name, dns.TypeTXT)
		res.Close()
		if err != nil || a.Err != nil || len(a.RRs) != len(rrs) || a.Transport != string(dnsresolver.TCP) {
			t.Fatalf("%s: %v, %+v", scen, err, a)
		}
	}
	// The benchmark's own stub too.
	m, err := w.d.stub.lookup(context.Background(), name, dns.TypeTXT)
	if err != nil || len(m.Answer) != len(rrs) {
		t.Fatalf("stub: %v, %v", err, m)
	}
}
