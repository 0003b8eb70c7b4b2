package resolver

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsname"
)

// ServiceResult gathers the answers ztls needs before it connects to
// Host:Port. An Answer is never nil after LookupService returns; an Answer
// that did not land before the context ended carries the context's error.
type ServiceResult struct {
	Host string
	Port int

	A, AAAA *Answer // addresses of Host
	TXT     *Answer // Z-data at _ztls._<port>._tcp.<host>
	CERT    *Answer // certificate at _ztls._<port>._tcp.<host>
	TLSA    *Answer // DANE at _<port>._tcp.<host> (RFC 6698, Section 3)
	HTTPS   *Answer // service binding (RFC 9460)

	// Took is the time until the last answer landed (or the context ended).
	Took time.Duration
}

// Answers returns the six answers in a fixed order: A, AAAA, TXT, CERT,
// TLSA, HTTPS (nil for those a ServiceQuery skipped).
func (s *ServiceResult) Answers() []*Answer {
	return []*Answer{s.A, s.AAAA, s.TXT, s.CERT, s.TLSA, s.HTTPS}
}

// Addrs returns the IPv6 and IPv4 addresses found, IPv6 first (RFC 8305
// prefers IPv6).
func (s *ServiceResult) Addrs() []netip.Addr {
	var out []netip.Addr
	for _, a := range []*Answer{s.AAAA, s.A} {
		if a == nil {
			continue
		}
		for _, rr := range a.RRs {
			switch rr := rr.(type) {
			case *dns.AAAA:
				if ip, ok := netip.AddrFromSlice(rr.AAAA); ok {
					out = append(out, ip)
				}
			case *dns.A:
				if ip, ok := netip.AddrFromSlice(rr.A.To4()); ok {
					out = append(out, ip)
				}
			}
		}
	}
	return out
}

// ZDataName returns the owner of a service's Z-data TXT and CERT records:
// _ztls._<port>._tcp.<host>.
func ZDataName(host string, port int) string {
	return "_ztls._" + strconv.Itoa(port) + "._tcp." + dns.Fqdn(host)
}

// TLSAName returns the owner of a service's TLSA records: _<port>._tcp.<host>
// (RFC 6698, Section 3).
func TLSAName(host string, port int) string {
	return "_" + strconv.Itoa(port) + "._tcp." + dns.Fqdn(host)
}

// ServiceQuery chooses which of LookupService's questions are asked; the
// zero value asks them all. A client that takes Z-data from the HTTPS
// record (docs/ztls-spec.md, Section 8) asks the TXT record only when
// that answer carries none, and TLSA and CERT only when it holds no
// leaf for the service.
type ServiceQuery struct {
	NoTXT  bool // the Z-data TXT at _ztls._<port>._tcp.<host>
	NoCERT bool // the CERT intermediates at the same name
	NoTLSA bool // the TLSA at _<port>._tcp.<host>
	// TXTOverStream asks the TXT question over TCP at once when the
	// transport is UDP (Question.Stream): the client knows the answer
	// holds post-quantum records, over 1232 bytes.
	TXTOverStream bool
}

// LookupService asks, all at once (one LookupBatch), for host's A and AAAA, the Z-data TXT
// and CERT, the TLSA and the HTTPS records of the service at port. Each
// answer is passed to each (if non-nil) the moment it lands, so a dialer
// can start TCP on the first address while the rest is in flight; calls to
// each are made one at a time from the calling goroutine. The combined
// result is returned when all answers landed or ctx ended; in the latter
// case the error is ctx's and the result holds what landed.
func (r *Resolver) LookupService(ctx context.Context, host string, port int, each func(Answer)) (*ServiceResult, error) {
	return r.LookupServiceQuery(ctx, host, port, ServiceQuery{}, each)
}

// LookupServiceQuery is LookupService asking the questions q leaves in:
// the answers it skips are nil in the result (the others never are).
func (r *Resolver) LookupServiceQuery(ctx context.Context, host string, port int, q ServiceQuery, each func(Answer)) (*ServiceResult, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("resolver: bad port %d", port)
	}
	fqdn := dns.Fqdn(host)
	if _, ok := dns.IsDomainName(fqdn); !ok || host == "" {
		return nil, fmt.Errorf("resolver: bad domain name %q", host)
	}
	start := time.Now() // real time: elapsed
	res := &ServiceResult{Host: fqdn, Port: port}
	type question struct {
		name  string
		qtype uint16
		slot  **Answer
		skip  bool
	}
	all := []question{
		// Cached answers land in this order: the address and the HTTPS
		// record (a TurboTLS advert, maybe Z-data) before the Z-data
		// TXT, whose checks a caller may run as its last answer lands.
		{fqdn, dns.TypeA, &res.A, false},
		{fqdn, dns.TypeAAAA, &res.AAAA, false},
		{dnsname.HTTPSOwner(host, port), dns.TypeHTTPS, &res.HTTPS, false},
		{ZDataName(host, port), dns.TypeTXT, &res.TXT, q.NoTXT},
		{ZDataName(host, port), dns.TypeCERT, &res.CERT, q.NoCERT},
		{TLSAName(host, port), dns.TypeTLSA, &res.TLSA, q.NoTLSA},
	}
	var asked []question
	var qs []Question
	for _, x := range all {
		if !x.skip {
			asked = append(asked, x)
			qs = append(qs, Question{Name: x.name, Qtype: x.qtype, Stream: x.qtype == dns.TypeTXT && q.TXTOverStream})
		}
	}
	answers, err := r.LookupBatch(ctx, qs, each)
	for i, x := range asked {
		*x.slot = answers[i]
	}
	res.Took = time.Since(start)
	return res, err
}
