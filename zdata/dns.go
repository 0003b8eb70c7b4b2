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

// TTLFor returns a TTL that ends before the earliest not-after among the
// records not yet expired at now (docs/ztls-spec.md, Section 1: caches must drop
// the RRset before a record in it expires), capped at max. It is 0 when
// nothing is left.
func TTLFor(recs []*Record, now time.Time, max time.Duration) time.Duration {
	ttl := max
	any := false
	for _, r := range recs {
		if now.After(r.NotAfter) {
			continue
		}
		any = true
		left := r.NotAfter.Sub(now).Truncate(time.Second) - time.Second
		if left < ttl {
			ttl = left
		}
	}
	if !any || ttl < 0 {
		return 0
	}
	return ttl.Truncate(time.Second)
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
