package bench

import (
	"net"
	"testing"

	"github.com/miekg/dns"
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
