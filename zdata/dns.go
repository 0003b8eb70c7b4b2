package zdata

import (
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/miekg/dns"
)

// TLSARecordData returns the RDATA of the DANE-EE record that publishes
// the leaf: "3 0 0 <hex DER>" (RFC 6698, Section 2.1; RFC 7218 names:
// DANE-EE, Cert, Full).
func TLSARecordData(leafDER []byte) string {
	return "3 0 0 " + hex.EncodeToString(leafDER)
}

// TLSA builds the service's TLSA 3 0 0 record for leafDER.
func TLSA(host string, port int, leafDER []byte, ttl time.Duration) *dns.TLSA {
	return &dns.TLSA{
		Hdr:          dns.RR_Header{Name: TLSAName(host, port), Rrtype: dns.TypeTLSA, Class: dns.ClassINET, Ttl: ttlSeconds(ttl)},
		Usage:        3,
		Selector:     0,
		MatchingType: 0,
		Certificate:  hex.EncodeToString(leafDER),
	}
}

// CERTRecords builds one CERT record of type PKIX (RFC 4398, Section 2.1)
// per intermediate certificate. The owner name and TTL are left for the
// caller (ZoneRRs sets them to TXTName and the zone TTL).
func CERTRecords(intermediates [][]byte) []*dns.CERT {
	out := make([]*dns.CERT, 0, len(intermediates))
	for _, der := range intermediates {
		out = append(out, &dns.CERT{
			Hdr:         dns.RR_Header{Rrtype: dns.TypeCERT, Class: dns.ClassINET},
			Type:        dns.CertPKIX,
			KeyTag:      0,
			Algorithm:   0,
			Certificate: base64.StdEncoding.EncodeToString(der),
		})
	}
	return out
}

// TXTRR builds the record's TXT RR at TXTName(r.Host, r.Port).
func (r *Record) TXTRR(ttl time.Duration) *dns.TXT {
	return &dns.TXT{
		Hdr: dns.RR_Header{Name: TXTName(r.Host, r.Port), Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: ttlSeconds(ttl)},
		Txt: r.TXT(),
	}
}

func ttlSeconds(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(d / time.Second)
}

// TTLFor returns a TTL, capped at max, that ends before the set of recs
// stops holding, for every instant until it ends, a valid record of each
// version it carries a valid record of at now (docs/ztls-spec.md,
// Section 1): a cached set must never leave a client of one version
// without a record it can use. A version's records cover from now to the
// not-after of its record valid now, extended by each record of the same
// version whose not-before is at most a second after the covered end (the
// next period's record, published a period ahead). So the current and
// next v1 records together cover two periods, and a TXT set in the twin
// window of Section 7.1, which holds the next period's v2 twin in place of
// its v1 record, ends at the current not-after. It is 0 when nothing is
// valid at now.
func TTLFor(recs []*Record, now time.Time, max time.Duration) time.Duration {
	ttl := max
	any := false
	for _, v := range []int{1, 2, 3} {
		end, ok := coveredUntil(recs, v, now)
		if !ok {
			continue
		}
		any = true
		if left := end.Sub(now).Truncate(time.Second) - time.Second; left < ttl {
			ttl = left
		}
	}
	if !any || ttl < 0 {
		return 0
	}
	return ttl.Truncate(time.Second)
}

// version is the record's ztls version: 1, 2 or 3.
func (r *Record) version() int {
	switch {
	case r.V3:
		return 3
	case r.V2:
		return 2
	}
	return 1
}

// coveredUntil is the end of the unbroken run of validity of recs' records
// of version v that contains now, and whether one is valid at now.
func coveredUntil(recs []*Record, v int, now time.Time) (time.Time, bool) {
	var end time.Time
	found := false
	for _, r := range recs {
		if r.version() == v && r.ValidAt(now) && (!found || r.NotAfter.After(end)) {
			end, found = r.NotAfter, true
		}
	}
	for grown := found; grown; {
		grown = false
		for _, r := range recs {
			if r.version() == v && !r.NotBefore.After(end.Add(time.Second)) && r.NotAfter.After(end) {
				end, grown = r.NotAfter, true
			}
		}
	}
	return end, found
}

// ZoneRRs returns the records to publish for recs (all of one service):
// one TXT per record and the CERT intermediates at TXTName, and the TLSA
// 3 0 0 leaf at TLSAName. The TTL is capped below the shortest validity
// window so an RRset cached when a record starts is gone before it ends;
// a publisher working mid-window passes TTLFor(recs, now, max).
func ZoneRRs(recs []*Record, leafDER []byte, intermediates [][]byte, ttl time.Duration) []dns.RR {
	if len(recs) == 0 {
		return nil
	}
	for _, r := range recs {
		if w := r.NotAfter.Sub(r.NotBefore) - time.Second; w < ttl {
			ttl = w
		}
	}
	if ttl < 0 {
		ttl = 0
	}
	host, port := recs[0].Host, recs[0].Port
	var out []dns.RR
	for _, r := range recs {
		out = append(out, r.TXTRR(ttl))
	}
	for _, c := range CERTRecords(intermediates) {
		c.Hdr.Name = TXTName(host, port)
		c.Hdr.Ttl = ttlSeconds(ttl)
		out = append(out, c)
	}
	if len(leafDER) > 0 {
		out = append(out, TLSA(host, port, leafDER, ttl))
	}
	return out
}

// ZoneLines returns ZoneRRs as BIND-style zone-file lines with
// fully-qualified owner names.
func ZoneLines(recs []*Record, leafDER []byte, intermediates [][]byte, ttl time.Duration) []string {
	rrs := ZoneRRs(recs, leafDER, intermediates, ttl)
	out := make([]string, len(rrs))
	for i, rr := range rrs {
		out[i] = rr.String()
	}
	return out
}
