package authority

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
)

// maxCNAMEChain bounds how many CNAMEs inside one zone an answer follows,
// so a loop in the data cannot loop the server.
const maxCNAMEChain = 8

// A Zone is the data of one zone, served authoritatively. Reads take an
// immutable snapshot, so queries never lock; ReplaceRRset builds a new
// snapshot (copy-on-write) and swaps it in atomically. All methods are safe
// for concurrent use. The zero value is not usable: use LoadZone or NewZone.
type Zone struct {
	origin string // canonical (lower-case, fully qualified)
	mu     sync.Mutex
	data   atomic.Pointer[zoneData]
}

// zoneData is one immutable snapshot of a zone.
type zoneData struct {
	// nodes maps every owner name (lower case) to its RRsets, and every
	// empty non-terminal (RFC 8020) to an empty node.
	nodes map[string]*node
	soa   *dns.SOA
	// cuts is true if any name below the apex holds NS records, so that
	// lookups only search for delegations when there are some.
	cuts bool
}

// node holds the RRsets of one owner name; never modified once published.
type node struct {
	sets map[uint16][]dns.RR
}

// LoadZone parses a zone file in the RFC 1035, Section 5 master format.
// origin is the zone's apex (used for relative names and $ORIGIN); file
// names the source in error messages. $INCLUDE is refused. The zone must
// have exactly one SOA, at the apex, and no data outside the apex's tree.
func LoadZone(r io.Reader, origin, file string) (*Zone, error) {
	origin = dnsname.Canonical(origin)
	if _, ok := dns.IsDomainName(origin); !ok {
		return nil, fmt.Errorf("authority: bad zone origin %q", origin)
	}
	zp := dns.NewZoneParser(r, origin, file)
	zp.SetIncludeAllowed(false)
	var rrs []dns.RR
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		rrs = append(rrs, rr)
	}
	if err := zp.Err(); err != nil {
		return nil, fmt.Errorf("authority: zone %s: %w", origin, err)
	}
	return NewZone(origin, rrs)
}

// NewZone builds a zone from records. The rules of LoadZone apply. The
// records are copied.
func NewZone(origin string, rrs []dns.RR) (*Zone, error) {
	origin = dnsname.Canonical(origin)
	if _, ok := dns.IsDomainName(origin); !ok {
		return nil, fmt.Errorf("authority: bad zone origin %q", origin)
	}
	z := &Zone{origin: origin}
	d := &zoneData{nodes: make(map[string]*node)}
	for _, rr := range rrs {
		if err := z.checkRR(rr); err != nil {
			return nil, err
		}
		name := dnsname.Canonical(rr.Header().Name)
		n := d.nodes[name]
		if n == nil || n.sets == nil {
			n = &node{sets: make(map[uint16][]dns.RR)}
			d.nodes[name] = n
		}
		t := rr.Header().Rrtype
		n.sets[t] = append(n.sets[t], dns.Copy(rr))
	}
	for name, n := range d.nodes {
		if err := checkNode(name, n.sets); err != nil {
			return nil, fmt.Errorf("authority: zone %s: %w", origin, err)
		}
		for t, set := range n.sets {
			n.sets[t] = dedupe(set)
		}
	}
	if err := d.finish(origin); err != nil {
		return nil, err
	}
	z.data.Store(d)
	zoneVersion.Add(1)
	return z, nil
}

// Swap makes z answer from next's data from now on (a zone file read
// again on SIGHUP), atomically: a query sees the old data or the new,
// never a mix. next must have the same origin; it should not be used
// afterwards.
func (z *Zone) Swap(next *Zone) error {
	if next.origin != z.origin {
		return fmt.Errorf("authority: zone %s cannot take the data of zone %s", z.origin, next.origin)
	}
	z.data.Store(next.data.Load())
	zoneVersion.Add(1)
	return nil
}

// Origin returns the zone's apex, lower case and fully qualified.
func (z *Zone) Origin() string { return z.origin }

// SOA returns a copy of the zone's SOA record.
func (z *Zone) SOA() *dns.SOA { return dns.Copy(z.data.Load().soa).(*dns.SOA) }

// RRset returns a copy of the RRset of name and rrtype, or nil.
func (z *Zone) RRset(name string, rrtype uint16) []dns.RR {
	n := z.data.Load().nodes[dnsname.Canonical(name)]
	if n == nil {
		return nil
	}
	var out []dns.RR
	for _, rr := range n.sets[rrtype] {
		out = append(out, dns.Copy(rr))
	}
	return out
}

// ReplaceRRset replaces the RRset of name and rrtype with rrs, or deletes
// it if rrs is empty. Every record must be owned by name, have type rrtype
// and class IN. Queries see either the old or the new set, never a mix:
// the whole zone snapshot is swapped atomically. The SOA can be replaced
// (exactly one record) but not deleted; a CNAME cannot share its name with
// other data. The records are copied.
func (z *Zone) ReplaceRRset(name string, rrtype uint16, rrs []dns.RR) error {
	name = dnsname.Canonical(name)
	if !dns.IsSubDomain(z.origin, name) {
		return fmt.Errorf("authority: %s is outside zone %s", name, z.origin)
	}
	set := make([]dns.RR, 0, len(rrs))
	for _, rr := range rrs {
		if err := z.checkRR(rr); err != nil {
			return err
		}
		h := rr.Header()
		if dnsname.Canonical(h.Name) != name || h.Rrtype != rrtype {
			return fmt.Errorf("authority: record %q does not belong to RRset %s %s",
				rr.String(), name, dns.TypeToString[rrtype])
		}
		set = append(set, dns.Copy(rr))
	}
	set = dedupe(set)
	if rrtype == dns.TypeSOA && (name != z.origin || len(set) != 1) {
		return errors.New("authority: the SOA RRset is one record at the apex")
	}

	z.mu.Lock()
	defer z.mu.Unlock()
	old := z.data.Load()
	sets := make(map[uint16][]dns.RR)
	if n := old.nodes[name]; n != nil {
		maps.Copy(sets, n.sets)
	}
	if len(set) == 0 {
		delete(sets, rrtype)
	} else {
		sets[rrtype] = set
	}
	if err := checkNode(name, sets); err != nil {
		return fmt.Errorf("authority: zone %s: %w", z.origin, err)
	}
	d := &zoneData{nodes: maps.Clone(old.nodes)}
	if len(sets) == 0 {
		delete(d.nodes, name)
		// An empty non-terminal may have lost its last descendant.
		for n, nd := range d.nodes {
			if nd.sets == nil {
				delete(d.nodes, n)
			}
		}
	} else {
		d.nodes[name] = &node{sets: sets}
	}
	if err := d.finish(z.origin); err != nil {
		return err
	}
	z.data.Store(d)
	zoneVersion.Add(1)
	return nil
}

// checkRR rejects records a zone cannot hold.
func (z *Zone) checkRR(rr dns.RR) error {
	if rr == nil {
		return errors.New("authority: nil record")
	}
	h := rr.Header()
	if h.Class != dns.ClassINET {
		return fmt.Errorf("authority: record %q: class must be IN", rr.String())
	}
	switch h.Rrtype {
	case dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY, dns.TypeANY, dns.TypeAXFR, dns.TypeIXFR, dns.TypeNone:
		return fmt.Errorf("authority: record %q: type cannot be stored in a zone", rr.String())
	}
	if !dns.IsSubDomain(z.origin, dnsname.Canonical(h.Name)) {
		return fmt.Errorf("authority: record %q is outside zone %s", rr.String(), z.origin)
	}
	// The text parser accepts some RDATA the wire cannot carry (an odd
	// number of hex digits, an A record without an address): such a record
	// would make every answer with it fail, so it is refused here, packed
	// in an answer as it would be served (miekg/dns packs an empty A as a
	// lone record, for UPDATE, but not in a message).
	m := new(dns.Msg)
	m.Answer = []dns.RR{dns.Copy(rr)}
	if _, err := m.Pack(); err != nil {
		return fmt.Errorf("authority: record %q cannot be encoded: %w", rr.String(), err)
	}
	return nil
}

// checkNode enforces one owner name's rules: RFC 1034, Section 3.6.2 (a
// CNAME has no other data) and one SOA.
func checkNode(name string, sets map[uint16][]dns.RR) error {
	if c := sets[dns.TypeCNAME]; c != nil {
		if len(c) != 1 {
			return fmt.Errorf("%s has more than one CNAME", name)
		}
		for t := range sets {
			if t != dns.TypeCNAME && t != dns.TypeRRSIG && t != dns.TypeNSEC {
				return fmt.Errorf("%s has a CNAME and other data", name)
			}
		}
	}
	if s := sets[dns.TypeSOA]; len(s) > 1 {
		return fmt.Errorf("%s has more than one SOA", name)
	}
	return nil
}

// dedupe drops duplicate records of a set (RFC 2181, Section 5) and gives
// all records the TTL of the first (RFC 2181, Section 5.2).
func dedupe(set []dns.RR) []dns.RR {
	if len(set) == 0 {
		return set
	}
	out := set[:0]
	for _, rr := range set {
		dup := false
		for _, kept := range out {
			if dns.IsDuplicate(rr, kept) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, rr)
		}
	}
	for _, rr := range out[1:] {
		rr.Header().Ttl = out[0].Header().Ttl
	}
	return out
}

// finish checks the apex and computes what lookups need: empty
// non-terminals and whether there are delegations.
func (d *zoneData) finish(origin string) error {
	apex := d.nodes[origin]
	if apex == nil || len(apex.sets[dns.TypeSOA]) != 1 {
		return fmt.Errorf("authority: zone %s has no SOA at its apex", origin)
	}
	d.soa = apex.sets[dns.TypeSOA][0].(*dns.SOA)
	var ents []string
	for name, n := range d.nodes {
		if n.sets == nil {
			continue
		}
		if name != origin && n.sets[dns.TypeSOA] != nil {
			// As named-checkzone: an SOA marks the top of a zone, so one
			// below the apex belongs in a zone of its own.
			return fmt.Errorf("authority: zone %s has an SOA at %s, below its apex", origin, name)
		}
		if name != origin && n.sets[dns.TypeNS] != nil {
			d.cuts = true
		}
		for p := parent(name); p != "" && len(p) > len(origin); p = parent(p) {
			if _, ok := d.nodes[p]; !ok {
				ents = append(ents, p)
			}
		}
	}
	for _, e := range ents {
		d.nodes[e] = &node{}
	}
	return nil
}

// parent returns name without its first label, or "" for the root.
func parent(name string) string {
	i, end := dns.NextLabel(name, 0)
	if end {
		return ""
	}
	return name[i:]
}

// answer is what a lookup in one zone found.
type answer struct {
	rcode     int
	authority bool // AA: false for a referral
	answer    []dns.RR
	ns        []dns.RR
	extra     []dns.RR
	negSOA    dns.RR // the SOA for the authority section of a negative answer
}

// lookup answers qname/qtype from the current snapshot (RFC 1034,
// Section 4.3.2, without wildcards). qname must be lower case and inside
// the zone.
func (z *Zone) lookup(qname string, qtype uint16) answer {
	d := z.data.Load()
	a := answer{authority: true}
	for range maxCNAMEChain + 1 {
		if d.cuts {
			if cut := d.findCut(z.origin, qname, qtype); cut != nil {
				if len(a.answer) > 0 {
					// A CNAME led below a delegation: the resolver
					// follows it from the CNAME.
					return a
				}
				a.authority = false
				a.ns = cut
				a.extra = d.glue(z.origin, cut)
				return a
			}
		}
		n, ok := d.nodes[qname]
		if !ok {
			a.rcode = dns.RcodeNameError
			a.negSOA = negativeSOA(d.soa)
			return a
		}
		if qtype == dns.TypeANY && n.sets != nil {
			a.answer = append(a.answer, minimalANY(qname, n.sets, d.soa)...)
			return a
		}
		if set := n.sets[qtype]; set != nil {
			a.answer = append(a.answer, set...)
			return a
		}
		c := n.sets[dns.TypeCNAME]
		if c == nil {
			a.negSOA = negativeSOA(d.soa) // NODATA, RFC 2308, Section 2.2
			return a
		}
		a.answer = append(a.answer, c[0])
		target := dnsname.Canonical(c[0].(*dns.CNAME).Target)
		if !dns.IsSubDomain(z.origin, target) || inChain(a.answer, target) {
			return a // out of zone, or a loop: the chain so far
		}
		qname = target
	}
	return a // a chain too long: answer what was followed
}

// inChain reports whether name already owns a record of the chain.
func inChain(chain []dns.RR, name string) bool {
	for _, rr := range chain {
		if dnsname.Canonical(rr.Header().Name) == name {
			return true
		}
	}
	return false
}

// findCut returns the NS RRset of the closest delegation at or above
// qname (but below the apex), or nil. A DS query at the cut itself is
// answered by the parent, this zone (RFC 4035, Section 3.1.4.1).
func (d *zoneData) findCut(origin, qname string, qtype uint16) []dns.RR {
	var cut []dns.RR
	for name := qname; len(name) > len(origin); name = parent(name) {
		n := d.nodes[name]
		if n == nil || n.sets[dns.TypeNS] == nil {
			continue
		}
		if name == qname && qtype == dns.TypeDS {
			continue
		}
		cut = n.sets[dns.TypeNS] // keep going: the highest cut wins
	}
	return cut
}

// glue returns the in-zone addresses of the name servers of a referral.
func (d *zoneData) glue(origin string, ns []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range ns {
		host := dnsname.Canonical(rr.(*dns.NS).Ns)
		if !dns.IsSubDomain(origin, host) {
			continue
		}
		if n := d.nodes[host]; n != nil {
			out = append(out, n.sets[dns.TypeA]...)
			out = append(out, n.sets[dns.TypeAAAA]...)
		}
	}
	return out
}

// negativeSOA returns the SOA for a negative answer, with the TTL RFC 2308,
// Section 3 asks for: the smaller of its TTL and its MINIMUM field.
func negativeSOA(soa *dns.SOA) dns.RR {
	if soa.Minttl >= soa.Hdr.Ttl {
		return soa
	}
	c := *soa
	c.Hdr.Ttl = soa.Minttl
	return &c
}

// maxANYAnswer is the largest RRset an ANY query gets; a name whose
// every RRset is larger (Z-data TXT, TLSA, CERT) gets the synthesized
// HINFO instead.
const maxANYAnswer = 256

// minimalANY answers an ANY query the RFC 8482 way, so that ANY is no
// amplifier: one RRset of the name, never all of them. That is the CNAME
// if there is one, else the smallest RRset on the wire (ties: the lowest
// type); when even that is larger than maxANYAnswer, a synthesized HINFO
// "RFC8482" "" (RFC 8482, Section 4.2) with the negative-answer TTL.
func minimalANY(qname string, sets map[uint16][]dns.RR, soa *dns.SOA) []dns.RR {
	if c := sets[dns.TypeCNAME]; c != nil {
		return c
	}
	var (
		best     []dns.RR
		bestType uint16
		bestLen  int
	)
	for t, set := range sets {
		n := 0
		for _, rr := range set {
			n += dns.Len(rr)
		}
		if best == nil || n < bestLen || n == bestLen && t < bestType {
			best, bestType, bestLen = set, t, n
		}
	}
	if best != nil && bestLen <= maxANYAnswer {
		return best
	}
	return []dns.RR{&dns.HINFO{
		Hdr: dns.RR_Header{Name: qname, Rrtype: dns.TypeHINFO, Class: dns.ClassINET,
			Ttl: min(soa.Hdr.Ttl, soa.Minttl)}, // negativeSOA's TTL (RFC 2308, Section 5)
		Cpu: "RFC8482",
	}}
}
