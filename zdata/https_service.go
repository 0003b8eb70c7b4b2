package zdata

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// turboUDPPortKey is TurboTLS's private-use SvcParamKey, turbo.KeyUDPPort
// (zdata does not import turbo; cmd/ztls's tests check the two agree).
const turboUDPPortKey dns.SVCBKey = 65280

// CheckSvcParamKey refuses a Z-data SvcParamKey that a publisher must not
// use: one outside the private-use range 65280–65534 (RFC 9460, Section
// 14.3.2), and TurboTLS's 65280, which the same record may carry with
// another meaning (docs/ztls-spec.md, Section 8.1). 0 stands for
// DefaultSvcParamKey and passes.
func CheckSvcParamKey(k dns.SVCBKey) error {
	switch {
	case k == 0:
		return nil
	case k == turboUDPPortKey:
		return fmt.Errorf("zdata: SvcParamKey %d is TurboTLS's UDP port key (key65280): give another private-use key, 65281 to 65534 (default %d)", k, DefaultSvcParamKey)
	case k < 65280 || k > 65534:
		return fmt.Errorf("zdata: SvcParamKey %d is not a private-use key (RFC 9460, Section 14.3.2): give one from 65281 to 65534 (default %d)", k, DefaultSvcParamKey)
	}
	return nil
}

// HTTPSOptions is what a service's HTTPS record carries besides its
// Z-data. The zero value is a record with the Z-data alone under
// DefaultSvcParamKey.
type HTTPSOptions struct {
	// ALPN is the alpn SvcParam; none when empty (clients then assume
	// http/1.1, RFC 9460, Section 7.1.2).
	ALPN []string
	// TurboUDPPort, when not 0, adds TurboTLS's key65280 advertising that
	// UDP port, in the same RR (RFC 9460, Section 2.2: one ServiceMode RR
	// per endpoint, so the two keys cannot live in two RRs).
	TurboUDPPort uint16
	// IPv4Hint and IPv6Hint are the address hints; none when empty.
	IPv4Hint, IPv6Hint []net.IP
	// Key is the Z-data SvcParamKey; 0 means DefaultSvcParamKey. It must
	// pass CheckSvcParamKey.
	Key dns.SVCBKey
	// NoZData leaves the Z-data out: the record then advertises only
	// ALPN, TurboTLS and the hints (a publisher that keeps Z-data in TXT).
	NoZData bool
	// ECH is the ech SvcParam (key 5, RFC 9848): an ECHConfigList; none
	// when empty. Dir.HTTPSRR fills it from the directory's ECH keys.
	ECH []byte
}

// HTTPSRecords returns the records a service's HTTPS record carries at
// now (docs/ztls-spec.md, Sections 8.3 and 8.4): for each published key
// not at its not-after, oldest first, its v1 record and, with a BFE key,
// its v2 twin — the current and the next period's, so at most
// MaxSvcRecords. Unlike the TXT set (Records), the next period's twin is
// there a whole period ahead: the value holds all four at once. v3
// (post-quantum) records are never in it: their 1216-byte share does not
// fit the value's format and would push every browser's answer over 1232
// bytes (Section 9.8).
func (s *Service) HTTPSRecords(now time.Time) []*Record {
	var out []*Record
	for _, k := range s.Keyring.Published(now) {
		if !now.Before(k.Record.NotAfter) || k.Record.V3 {
			continue // v3 records go in TXT only (Section 9.8)
		}
		recs := []*Record{k.Record}
		if k.BFE != nil {
			recs = append(recs, k.BFE.Record)
		}
		if len(out)+len(recs) > MaxSvcRecords {
			break // a key issued further ahead waits for a later answer
		}
		out = append(out, recs...)
	}
	return out
}

// ServiceHTTPSRecord builds the HTTPS record of host's service on port
// carrying recs (as HTTPSRecords returns them) and o, with the TTL
// TTLFor gives recs (at most maxTTL; maxTTL when it carries no Z-data). It is the one builder behind every
// HTTPS record this project serves, prints or publishes, so the served,
// printed and published records are the same bytes.
func ServiceHTTPSRecord(host string, port int, recs []*Record, now time.Time, maxTTL time.Duration, o HTTPSOptions) (*dns.HTTPS, error) {
	if err := CheckSvcParamKey(o.Key); err != nil {
		return nil, err
	}
	p := HTTPSParams{Host: host, Port: port, ALPN: o.ALPN, IPv4Hint: o.IPv4Hint, IPv6Hint: o.IPv6Hint, Key: o.Key, TTL: maxTTL}
	if o.TurboUDPPort != 0 {
		port := o.TurboUDPPort
		p.Extra = []dns.SVCBKeyValue{&dns.SVCBLocal{KeyCode: turboUDPPortKey, Data: []byte{byte(port >> 8), byte(port)}}}
	}
	if len(o.ECH) > 0 {
		p.Extra = append(p.Extra, &dns.SVCBECHConfig{ECH: o.ECH})
	}
	if !o.NoZData && len(recs) > 0 {
		p.Records = recs
		p.TTL = TTLFor(recs, now, maxTTL)
	}
	return HTTPSRecord(p)
}

// HTTPSRR is ServiceHTTPSRecord for the directory's service at now: the
// record to serve, print or publish beside RRs, with the directory's
// published ECH configs (ECHConfigList) when o.ECH is empty.
func (d *Dir) HTTPSRR(now time.Time, maxTTL time.Duration, o HTTPSOptions) (*dns.HTTPS, error) {
	if len(o.ECH) == 0 {
		keys, err := d.ECHKeys()
		if err != nil {
			return nil, err
		}
		if o.ECH, err = ECHConfigList(keys, now); err != nil {
			return nil, err
		}
	}
	d.mu.Lock() // the records, as RRs reads them
	recs := d.Service.HTTPSRecords(now)
	d.mu.Unlock()
	return ServiceHTTPSRecord(d.Config.Host, d.Config.Port, recs, now, maxTTL, o)
}

// MergeHTTPS puts own's values of the managed keys (the Z-data key,
// TurboTLS's key65280: those the publisher owns; and ech when own
// carries it, from the directory's ECH keys) into each ServiceMode RR
// of base, an HTTPS RRset the operator wrote at own's owner, keeping each
// RR's target, priority and other SvcParams (alpn, ech, hints, port) as
// they are. A managed key in base is dropped first (RFC 9460, Section
// 2.2: a key at most once per RR), also when own no longer carries it.
// Each merged RR's TTL is the lower of the two, so the Z-data's TTL rule
// holds.
// AliasMode RRs are kept unchanged: an alias carries no SvcParams, and a
// client that sees one ignores the ServiceMode RRs beside it (Section
// 2.4.2), so the Z-data belongs at the alias's target (docs/ztls-spec.md,
// Section 8.6); aliased reports that base holds one. Without a
// ServiceMode RR in base (or with an alias) the result is base itself,
// or own alone when base is empty.
func MergeHTTPS(base []dns.RR, own *dns.HTTPS, managed ...dns.SVCBKey) (merged []dns.RR, aliased bool) {
	var service []*dns.HTTPS
	for _, rr := range base {
		if h, ok := rr.(*dns.HTTPS); ok {
			if h.Priority == 0 {
				aliased = true
			} else {
				service = append(service, h)
			}
		}
	}
	switch {
	case aliased:
		return base, true
	case len(service) == 0:
		return []dns.RR{own}, false
	}
	for _, kv := range own.Value {
		if kv.Key() == dns.SVCB_ECHCONFIG && !slices.Contains(managed, dns.SVCB_ECHCONFIG) {
			managed = append(slices.Clip(managed), dns.SVCB_ECHCONFIG)
		}
	}
	var ours []dns.SVCBKeyValue
	for _, kv := range own.Value {
		if slices.Contains(managed, kv.Key()) {
			ours = append(ours, kv)
		}
	}
	for _, h := range service {
		c := dns.Copy(h).(*dns.HTTPS)
		c.Hdr.Name = own.Hdr.Name
		c.Hdr.Ttl = min(c.Hdr.Ttl, own.Hdr.Ttl)
		v := c.Value[:0]
		for _, kv := range c.Value {
			if !slices.Contains(managed, kv.Key()) {
				v = append(v, kv)
			}
		}
		v = append(v, ours...)
		slices.SortStableFunc(v, func(a, b dns.SVCBKeyValue) int { return cmp.Compare(a.Key(), b.Key()) })
		c.Value = v
		merged = append(merged, c)
	}
	return merged, false
}
