package authority

import (
	"context"
	"fmt"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
)

// Zones is the Handler that answers from a set of zones: the answer comes
// from the zone closest to the query name, with the AA bit; names outside
// every zone, and classes other than IN, get REFUSED. A Zones is fixed
// once built; the zones' data can change (Zone.ReplaceRRset). Safe for
// concurrent use.
type Zones struct {
	byOrigin map[string]*Zone
}

// NewZones returns a handler for the given zones. Two zones with the same
// origin are an error; nested zones are fine (the closest one answers).
func NewZones(zones ...*Zone) (*Zones, error) {
	zs := &Zones{byOrigin: make(map[string]*Zone, len(zones))}
	for _, z := range zones {
		if _, dup := zs.byOrigin[z.origin]; dup {
			return nil, fmt.Errorf("authority: zone %s given twice", z.origin)
		}
		zs.byOrigin[z.origin] = z
	}
	return zs, nil
}

// Zone returns the zone closest to name (the one whose origin is the
// longest suffix of name), or nil.
func (zs *Zones) Zone(name string) *Zone {
	name = dnsname.Canonical(name)
	for n := name; n != ""; n = parent(n) {
		if z := zs.byOrigin[n]; z != nil {
			return z
		}
	}
	return nil
}

// ReplaceRRset replaces an RRset in the zone closest to name; see
// Zone.ReplaceRRset.
func (zs *Zones) ReplaceRRset(name string, rrtype uint16, rrs []dns.RR) error {
	z := zs.Zone(name)
	if z == nil {
		return fmt.Errorf("authority: no zone holds %s", name)
	}
	return z.ReplaceRRset(name, rrtype, rrs)
}

// ServeDNS answers r from the zones. It expects one question (put
// CheckQuery in front of it).
func (zs *Zones) ServeDNS(_ context.Context, w ResponseWriter, r *dns.Msg) {
	w.WriteMsg(zs.Answer(r))
}

// Answer builds the answer to r without sending it.
func (zs *Zones) Answer(r *dns.Msg) *dns.Msg {
	if len(r.Question) != 1 {
		return reply(r, dns.RcodeFormatError)
	}
	q := r.Question[0]
	if q.Qclass != dns.ClassINET && q.Qclass != dns.ClassANY {
		return reply(r, dns.RcodeRefused)
	}
	qname := dnsname.Canonical(q.Name)
	z := zs.Zone(qname)
	if z == nil {
		return reply(r, dns.RcodeRefused)
	}
	a := z.lookup(dns.Fqdn(qname), q.Qtype)
	m := reply(r, a.rcode)
	m.Authoritative = a.authority
	m.Answer = a.answer
	m.Ns = a.ns
	m.Extra = a.extra
	if a.negSOA != nil {
		m.Ns = append(m.Ns, a.negSOA)
	}
	return m
}
