package dial

// Z-data carried in the HTTPS record (docs/ztls-spec.md, Section 8):
// where the client looks for it (Options.ZDataFrom), and what an HTTPS
// RRset says about it: the records of the ServiceMode RR whose endpoint
// dial connects to, an AliasMode target to follow (RFC 9460, Section 3),
// or why there is none.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/zdata"
)

// ZDataFrom says which DNS record a connection takes Z-data from
// (Options.ZDataFrom; docs/ztls-spec.md, Section 8.5).
type ZDataFrom string

const (
	// ZDataHTTPSFirst (the default; "" means the same) takes Z-data from
	// the HTTPS record, asked beside A and AAAA anyway, and asks for the
	// TXT record only when that answer carries none: no extra query when
	// it does, a second round trip when it does not. TLSA and CERT are
	// asked with the first questions unless the client holds a leaf for
	// the service from an earlier handshake (Memory).
	ZDataHTTPSFirst ZDataFrom = "https"
	// ZDataBoth asks for the HTTPS and TXT records at once, and takes the
	// HTTPS record's Z-data when it carries any, else the TXT record's:
	// one query more, never a second round trip.
	ZDataBoth ZDataFrom = "both"
	// ZDataTXT takes Z-data from the TXT record only (Section 1), with
	// TLSA and CERT, as releases before Section 8 did.
	ZDataTXT ZDataFrom = "txt"
)

// String returns the choice's name; the zero value is "https".
func (f ZDataFrom) String() string {
	if f == "" {
		return string(ZDataHTTPSFirst)
	}
	return string(f)
}

// ParseZDataFrom parses "https", "both" or "txt" ("" is https).
func ParseZDataFrom(s string) (ZDataFrom, error) {
	switch f := ZDataFrom(s); f {
	case "", ZDataHTTPSFirst, ZDataBoth, ZDataTXT:
		return f, nil
	}
	return "", fmt.Errorf("dial: unknown Z-data source %q (want https, both or txt)", s)
}

// Report.ZDataFrom values: the record the Z-data came from.
const (
	ZDataFromHTTPS = "https"
	ZDataFromTXT   = "txt"
)

// maxAliasHops is how many AliasMode records a client follows
// (docs/ztls-spec.md, Section 8.6).
const maxAliasHops = 8

// httpsZData is what one HTTPS RRset says about Z-data: the records of
// the ServiceMode RR whose endpoint dial connects to, or an AliasMode
// target to follow, or neither (err says why, a *zdata.Error).
type httpsZData struct {
	recs  []*zdata.Record
	alias string // fully qualified, lower-case
	err   error
}

// readHTTPS reads the HTTPS RRset rrs, owned by owner, for the origin
// host:port, with Z-data under key. dial connects to the origin's own
// addresses, so a ServiceMode RR's Z-data is used only when its endpoint
// is that: TargetName "." (the owner, which after an alias is the alias
// target: Section 8.6 reads the RR the chain ends on), the owner or the
// origin host named explicitly, and no port SvcParam other than port.
// Among those the one of lowest SvcPriority that carries key is read;
// Z-data is never taken from one RR for another's endpoint.
func readHTTPS(rrs []dns.RR, owner, host string, port int, key dns.SVCBKey) httpsZData {
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
		return noHTTPSZData("no ServiceMode HTTPS record")
	}
	slices.SortStableFunc(svc, func(a, b *dns.HTTPS) int { return cmp.Compare(a.Priority, b.Priority) })
	var elsewhere string
	for _, h := range svc {
		recs, err := zdata.RecordsFromSVCB(&h.SVCB, key)
		if errors.Is(err, zdata.ErrNoSvcParam) {
			continue
		}
		if ep, ok := endpointOf(h, owner, host, port); !ok {
			if elsewhere == "" {
				elsewhere = ep
			}
			continue
		}
		if err != nil {
			return httpsZData{err: err}
		}
		return httpsZData{recs: recs}
	}
	if elsewhere != "" {
		return noHTTPSZData(fmt.Sprintf("the HTTPS record carries it only for the endpoint %s, and dial connects to the origin's own addresses", elsewhere))
	}
	return noHTTPSZData(fmt.Sprintf("the HTTPS record carries no key%d", key))
}

// readAlias is what an AliasMode record says: follow its target, unless
// it is "." (the service does not exist: RFC 9460, Section 2.5.1).
func readAlias(h *dns.HTTPS) httpsZData {
	t := strings.ToLower(dns.Fqdn(h.Target))
	if t == "." {
		return noHTTPSZData("the HTTPS AliasMode record's target is \".\" (no service)")
	}
	return httpsZData{alias: t}
}

// endpointOf says whether h's endpoint is the one dial connects to, and
// names it when it is not.
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
func noHTTPSZData(why string) httpsZData {
	return httpsZData{err: &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New(why)}}
}

// aliasChain follows AliasMode records from the origin's HTTPS owner,
// at most maxAliasHops of them, refusing loops.
type aliasChain struct {
	owner string // the origin's, lower-case and fully qualified
	seen  map[string]bool
	hops  int
}

func newAliasChain(owner string) *aliasChain {
	o := strings.ToLower(dns.Fqdn(owner))
	return &aliasChain{owner: o, seen: map[string]bool{o: true}}
}

// origin is the origin's HTTPS owner.
func (c *aliasChain) origin() string { return c.owner }

// next admits target as the next name to ask, or says why not.
func (c *aliasChain) next(target string) error {
	c.hops++
	switch {
	case c.seen[target]:
		return &zdata.Error{Reason: zdata.ReasonNoZData, Err: fmt.Errorf("the HTTPS AliasMode records loop (back to %s after %d)", target, c.hops)}
	case c.hops > maxAliasHops:
		return &zdata.Error{Reason: zdata.ReasonNoZData, Err: fmt.Errorf("the HTTPS AliasMode chain is longer than %d records", maxAliasHops)}
	}
	c.seen[target] = true
	return nil
}

// txtStrings returns recs as the TXT strings they are signed as
// (zdata.ParseSvcParam: the Selector treats them as the TXT records).
func txtStrings(recs []*zdata.Record) [][]string {
	out := make([][]string, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.TXT())
	}
	return out
}
