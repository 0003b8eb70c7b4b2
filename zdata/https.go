package zdata

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsname"
)

// HTTPSParams describes a service's HTTPS record (RFC 9460) carrying
// Z-data (docs/ztls-spec.md, Section 8).
type HTTPSParams struct {
	Host string // the origin; its owner name is HTTPSOwner(Host, Port)
	Port int
	// Target is the TargetName; "" means "." (the owner itself).
	Target   string
	ALPN     []string // alpn; none when empty
	IPv4Hint []net.IP
	IPv6Hint []net.IP
	// Extra are other SvcParams, such as TurboTLS's key65280
	// (turbo.HTTPSRecord's); they must not use Key.
	Extra []dns.SVCBKeyValue
	// Key is the Z-data SvcParamKey; 0 means DefaultSvcParamKey.
	Key     dns.SVCBKey
	Records []*Record // the Z-data; none: a record without it
	TTL     time.Duration
}

// HTTPSOwner returns the owner of the HTTPS record of host's service on
// port: host itself for 443, else _<port>._https.<host> (RFC 9460,
// Section 9.1), in lower-case A-labels.
func HTTPSOwner(host string, port int) string {
	return dnsname.HTTPSOwner(hostOrLower(host), port)
}

// HTTPSRecord builds p's ServiceMode HTTPS record (priority 1), its
// SvcParams in increasing key order as RFC 9460, Section 2.2 puts them
// on the wire. The Z-data key is never made mandatory (Section 8.1).
func HTTPSRecord(p HTTPSParams) (*dns.HTTPS, error) {
	key := p.Key
	if key == 0 {
		key = DefaultSvcParamKey
	}
	target := p.Target
	if target == "" {
		target = "."
	}
	h := &dns.HTTPS{SVCB: dns.SVCB{
		Hdr:      dns.RR_Header{Name: HTTPSOwner(p.Host, p.Port), Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: ttlSeconds(p.TTL)},
		Priority: 1,
		Target:   dns.Fqdn(target),
	}}
	v := &h.Value
	if len(p.ALPN) > 0 {
		*v = append(*v, &dns.SVCBAlpn{Alpn: p.ALPN})
	}
	if len(p.IPv4Hint) > 0 {
		*v = append(*v, &dns.SVCBIPv4Hint{Hint: p.IPv4Hint})
	}
	if len(p.IPv6Hint) > 0 {
		*v = append(*v, &dns.SVCBIPv6Hint{Hint: p.IPv6Hint})
	}
	for _, kv := range p.Extra {
		if kv.Key() == key {
			return nil, fmt.Errorf("zdata: HTTPSParams.Extra uses the Z-data key %d", key)
		}
		*v = append(*v, kv)
	}
	if len(p.Records) > 0 {
		kv, err := SvcParam(key, p.Records)
		if err != nil {
			return nil, err
		}
		*v = append(*v, kv)
	}
	slices.SortStableFunc(*v, func(a, b dns.SVCBKeyValue) int { return cmp.Compare(a.Key(), b.Key()) })
	for i := 1; i < len(*v); i++ {
		if (*v)[i].Key() == (*v)[i-1].Key() {
			return nil, fmt.Errorf("zdata: HTTPS record: SvcParamKey %d twice", (*v)[i].Key())
		}
	}
	return h, nil
}

// AnswerSize returns the wire size of the DNS response that answers the
// query for rrs' owner and type with rrs alone: header, question, the
// answer with name compression and an EDNS(0) OPT record advertising
// 1232 bytes (as an authority answering a client that sent EDNS sends
// it). Compare it with 1232, the largest answer that needs no TCP.
func AnswerSize(rrs ...dns.RR) (int, error) {
	if len(rrs) == 0 {
		return 0, errors.New("zdata: AnswerSize of no record")
	}
	m := new(dns.Msg)
	m.SetQuestion(rrs[0].Header().Name, rrs[0].Header().Rrtype)
	m.Response, m.Authoritative, m.Compress = true, true, true
	m.Answer = rrs
	m.SetEdns0(1232, false)
	b, err := m.Pack()
	if err != nil {
		return 0, fmt.Errorf("zdata: packing the answer: %v", err)
	}
	return len(b), nil
}
