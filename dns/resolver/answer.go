package resolver

// What the records of an answer say, for its readers (dial's lookup
// phase and prevalidate's prefetch read the same answers the same way).

import (
	"net/netip"

	"github.com/miekg/dns"
)

// RecordsOf returns the records of type T in a, in order.
func RecordsOf[T dns.RR](a *Answer) []T {
	var out []T
	for _, rr := range a.RRs {
		if t, ok := rr.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// Addrs returns the addresses of a's A and AAAA records.
func (a *Answer) Addrs() []netip.Addr {
	var ips []netip.Addr
	for _, rr := range a.RRs {
		switch v := rr.(type) {
		case *dns.A:
			if ip, ok := netip.AddrFromSlice(v.A.To4()); ok {
				ips = append(ips, ip)
			}
		case *dns.AAAA:
			if ip, ok := netip.AddrFromSlice(v.AAAA); ok {
				ips = append(ips, ip)
			}
		}
	}
	return ips
}

// TXTStrings returns the strings of each TXT record in a.
func (a *Answer) TXTStrings() [][]string {
	var txts [][]string
	for _, t := range RecordsOf[*dns.TXT](a) {
		txts = append(txts, t.Txt)
	}
	return txts
}

// Status is why a holds what it holds, for people: the error when no
// reply arrived, else the reply's RCODE ("NOERROR", "NXDOMAIN", ...).
func (a *Answer) Status() string {
	if a.Err != nil {
		return a.Err.Error()
	}
	return dns.RcodeToString[a.Rcode]
}
