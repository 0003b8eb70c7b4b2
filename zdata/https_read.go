package zdata

// Reading Z-data out of an HTTPS RRset (docs/ztls-spec.md, Sections 8.5
// and 8.6): the records of the ServiceMode RR whose endpoint the client
// connects to, an AliasMode target to follow (RFC 9460, Section 3), or
// why there is none; and the rule for following aliases. The client
// (package dial) and the prevalidation service (package prevalidate)
// read an answer the same way through FromHTTPS; each asks the DNS for
// the alias targets itself.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// From says which DNS record a client takes Z-data from
// (docs/ztls-spec.md, Section 8.5); dial.Options.ZDataFrom and
// prevalidate.Options.ZDataFrom are of this type.
type From string

const (
	// FromHTTPSFirst (the default; "" means the same) takes Z-data from
	// the HTTPS record, asked beside A and AAAA anyway, and asks for the
	// TXT record only when that answer carries none: no extra query when
	// it does, a second round trip when it does not. TLSA and CERT are
	// asked with the first questions unless the client holds a leaf for
	// the service (dial's Memory).
	FromHTTPSFirst From = "https"
	// FromBoth asks for the HTTPS and TXT records at once, and takes the
	// HTTPS record's Z-data when it carries any, else the TXT record's:
	// one query more, never a second round trip.
	FromBoth From = "both"
	// FromTXT takes Z-data from the TXT record only (Section 1), with
	// TLSA and CERT, as releases before Section 8 did.
	FromTXT From = "txt"
)

// String returns the choice's name; the zero value is "https".
func (f From) String() string {
	if f == "" {
		return string(FromHTTPSFirst)
	}
	return string(f)
}

// ParseFrom parses "https", "both" or "txt" ("" is https).
func ParseFrom(s string) (From, error) {
	switch f := From(s); f {
	case "", FromHTTPSFirst, FromBoth, FromTXT:
		return f, nil
	}
	return "", fmt.Errorf("zdata: unknown Z-data source %q (want https, both or txt)", s)
}

// The record Z-data was taken from, as reports name it (dial's
// Report.ZDataFrom, prevalidate's PrefetchedZData.From).
const (
	SourceHTTPS = "https"
	SourceTXT   = "txt"
)

// MaxAliasHops is how many AliasMode records a client follows
// (docs/ztls-spec.md, Section 8.6).
const MaxAliasHops = 8

// FromHTTPS reads the HTTPS RRset rrs, owned by owner, for the origin
// host:port, with Z-data under key (0 means DefaultSvcParamKey). It says
// exactly one thing: the records recs, an AliasMode target to follow
// (alias, fully qualified and lower-case), or why there is neither (a
// *Error of ReasonNoZData, or ReasonMalformed for a value that does not
// parse).
//
// The client connects to the origin's own addresses, so a ServiceMode
// RR's Z-data is used only when its endpoint is that: TargetName "."
// (the owner, which after an alias is the alias target: Section 8.6
// reads the RR the chain ends on), the owner or the origin host named
// explicitly, and no port SvcParam other than port. Among those the one
// of lowest SvcPriority that carries key is read; Z-data is never taken
// from one RR for another's endpoint.
func FromHTTPS(rrs []dns.RR, owner, host string, port int, key dns.SVCBKey) (recs []*Record, alias string, why error) {
	if key == 0 {
		key = DefaultSvcParamKey
	}
	var svc []*dns.HTTPS
	for _, rr := range rrs {
		h, ok := rr.(*dns.HTTPS)
		if !ok {
			continue
		}
		if h.Priority == 0 {
			// RFC 9460, Section 2.4.2: with an AliasMode record in the
			// set, the ServiceMode records are ignored.
			return readAlias(h)
		}
		svc = append(svc, h)
	}
	if len(svc) == 0 {
		return nil, "", noHTTPSZData("no ServiceMode HTTPS record")
	}
	slices.SortStableFunc(svc, func(a, b *dns.HTTPS) int { return cmp.Compare(a.Priority, b.Priority) })
	var elsewhere string
	for _, h := range svc {
		recs, err := RecordsFromSVCB(&h.SVCB, key)
		if errors.Is(err, ErrNoSvcParam) {
			continue
		}
		if ep, ok := endpointOf(h, owner, host, port); !ok {
			if elsewhere == "" {
				elsewhere = ep
			}
			continue
		}
		if err != nil {
			return nil, "", err
		}
		return recs, "", nil
	}
	if elsewhere != "" {
		return nil, "", noHTTPSZData(fmt.Sprintf("the HTTPS record carries it only for the endpoint %s, and the client connects to the origin's own addresses", elsewhere))
	}
	return nil, "", noHTTPSZData(fmt.Sprintf("the HTTPS record carries no key%d", key))
}

// readAlias is what an AliasMode record says: follow its target, unless
// it is "." (the service does not exist: RFC 9460, Section 2.5.1).
func readAlias(h *dns.HTTPS) ([]*Record, string, error) {
	t := strings.ToLower(dns.Fqdn(h.Target))
	if t == "." {
		return nil, "", noHTTPSZData("the HTTPS AliasMode record's target is \".\" (no service)")
	}
	return nil, t, nil
}

// endpointOf says whether h's endpoint is the origin's own (owner, or
// host, at port), and names it when it is not.
func endpointOf(h *dns.HTTPS, owner, host string, port int) (string, bool) {
	target := strings.ToLower(dns.Fqdn(h.Target))
	sameName := target == "." || target == strings.ToLower(dns.Fqdn(owner)) || target == strings.ToLower(dns.Fqdn(host))
	name := target
	if target == "." {
		name = strings.ToLower(dns.Fqdn(owner))
	}
	for _, kv := range h.Value {
		if p, ok := kv.(*dns.SVCBPort); ok && int(p.Port) != port {
			return fmt.Sprintf("%s port %d", name, p.Port), false
		}
	}
	return name, sameName
}

// noHTTPSZData is the outcome of an RRset without usable Z-data.
func noHTTPSZData(why string) error {
	return &Error{Reason: ReasonNoZData, Err: errors.New(why)}
}

// AliasChain follows AliasMode records from the origin's HTTPS owner,
// at most MaxAliasHops of them, refusing loops. It is not safe for
// concurrent use.
type AliasChain struct {
	owner string // the origin's, lower-case and fully qualified
	seen  map[string]bool
	hops  int
}

// NewAliasChain starts a chain at the origin's HTTPS owner
// (HTTPSOwner).
func NewAliasChain(owner string) *AliasChain {
	o := strings.ToLower(dns.Fqdn(owner))
	return &AliasChain{owner: o, seen: map[string]bool{o: true}}
}

// Origin is the origin's HTTPS owner, lower-case and fully qualified.
func (c *AliasChain) Origin() string { return c.owner }

// Next admits target (as FromHTTPS returns it) as the next name to ask,
// or says why not: a loop, or a chain longer than MaxAliasHops (a *Error
// of ReasonNoZData).
func (c *AliasChain) Next(target string) error {
	c.hops++
	switch {
	case c.seen[target]:
		return &Error{Reason: ReasonNoZData, Err: fmt.Errorf("the HTTPS AliasMode records loop (back to %s after %d)", target, c.hops)}
	case c.hops > MaxAliasHops:
		return &Error{Reason: ReasonNoZData, Err: fmt.Errorf("the HTTPS AliasMode chain is longer than %d records", MaxAliasHops)}
	}
	c.seen[target] = true
	return nil
}

// TXTStrings returns recs as the TXT strings they are signed as
// (ParseSvcParam): a Selector treats them as the TXT record's.
func TXTStrings(recs []*Record) [][]string {
	out := make([][]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.TXT())
	}
	return out
}
