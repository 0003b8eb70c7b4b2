package authority

import (
	"context"
	"net"
	"net/netip"
	"sort"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// testZone is the zone most tests serve.
const testZone = `$ORIGIN example.org.
$TTL 3600
@        IN SOA ns1 hostmaster 2024010101 7200 3600 1209600 300
@        IN NS  ns1
ns1      IN A   192.0.2.53
www      IN A   192.0.2.1
www      IN A   192.0.2.2
www      IN AAAA 2001:db8::1
alias    IN CNAME www
chain    IN CNAME alias
outside  IN CNAME www.example.net.
dangling IN CNAME nothing
loop1    IN CNAME loop2
loop2    IN CNAME loop1
a.b.c    IN TXT "deep"
big      IN TXT "` + "0123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "1123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "2123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "3123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "4123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "5123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "6123456789012345678901234567890123456789012345678901234567890123456789" + `"
big      IN TXT "` + "7123456789012345678901234567890123456789012345678901234567890123456789" + `"
sub      IN NS  ns.sub
sub      IN NS  ns.elsewhere.net.
ns.sub   IN A   192.0.2.99
sub      IN DS  12345 13 2 0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF
_ztls._443._tcp.www IN TXT "v=ztls1"
`

func mustZone(t testing.TB, origin, text string) *Zone {
	t.Helper()
	z, err := LoadZone(strings.NewReader(text), origin, "test.zone")
	if err != nil {
		t.Fatal(err)
	}
	return z
}

func mustZones(t testing.TB, zs ...*Zone) *Zones {
	t.Helper()
	h, err := NewZones(zs...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func rr(t testing.TB, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatalf("dns.NewRR(%q): %v", s, err)
	}
	return r
}

func rrs(t testing.TB, ss ...string) []dns.RR {
	var out []dns.RR
	for _, s := range ss {
		out = append(out, rr(t, s))
	}
	return out
}

// rrStrings renders a section sorted, so RRset order does not matter.
func rrStrings(section []dns.RR) []string {
	out := make([]string, 0, len(section))
	for _, r := range section {
		if r.Header().Rrtype == dns.TypeOPT {
			continue
		}
		out = append(out, r.String())
	}
	sort.Strings(out)
	return out
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	return m
}

// recorder is a ResponseWriter that keeps the answer.
type recorder struct {
	t     Transport
	msg   *dns.Msg
	count int
}

func (r *recorder) WriteMsg(m *dns.Msg) error { r.msg = m; r.count++; return nil }
func (r *recorder) RemoteAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53000}
}
func (r *recorder) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 53}
}
func (r *recorder) Transport() Transport {
	if r.t == 0 {
		return TransportUDP
	}
	return r.t
}

func serveRecorded(t testing.TB, h Handler, tr Transport, q *dns.Msg) *dns.Msg {
	t.Helper()
	rec := &recorder{t: tr}
	h.ServeDNS(context.Background(), rec, q)
	if rec.count != 1 {
		t.Fatalf("handler wrote %d answers, want 1", rec.count)
	}
	return rec.msg
}

// sliceOutlet collects what a responder sends, without sockets. Its
// client is remote, or no IP address when that is the zero Addr.
type sliceOutlet struct {
	sent   [][]byte
	remote netip.Addr
}

func (o *sliceOutlet) send(b []byte) error {
	o.sent = append(o.sent, append([]byte(nil), b...))
	return nil
}
func (o *sliceOutlet) localAddr() net.Addr { return &net.UDPAddr{Port: 53} }
func (o *sliceOutlet) remoteAddr() net.Addr {
	return net.UDPAddrFromAddrPort(netip.AddrPortFrom(o.remote, 53000))
}
func (o *sliceOutlet) remoteIP() netip.Addr { return o.remote }
