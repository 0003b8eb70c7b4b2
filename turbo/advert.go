package turbo

import (
	"errors"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsname"
)

// KeyUDPPort is the private-use SvcParamKey (RFC 9460, Section 14.3.2:
// 65280-65534 are for private use) under which a server advertises its
// TurboTLS UDP port in its HTTPS record: two bytes, network order.
const KeyUDPPort dns.SVCBKey = 65280

// HTTPSRecord is the HTTPS record (ServiceMode, priority 1, target ".")
// advertising TurboTLS on udpPort for host's service on tcpPort.
func HTTPSRecord(host string, tcpPort int, udpPort uint16, ttl uint32) *dns.HTTPS {
	return &dns.HTTPS{SVCB: dns.SVCB{
		Hdr:      dns.RR_Header{Name: dnsname.HTTPSOwner(host, tcpPort), Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: ttl},
		Priority: 1,
		Target:   ".",
		Value:    []dns.SVCBKeyValue{&dns.SVCBLocal{KeyCode: KeyUDPPort, Data: []byte{byte(udpPort >> 8), byte(udpPort)}}},
	}}
}

// ErrNoAdvert means no HTTPS record advertises a TurboTLS UDP port.
var ErrNoAdvert = errors.New("turbo: the server advertises no TurboTLS UDP port (HTTPS key65280)")

// UDPPortFrom returns the TurboTLS UDP port advertised by the first
// ServiceMode HTTPS record among rrs that carries a well-formed key65280.
func UDPPortFrom(rrs []dns.RR) (uint16, error) {
	for _, rr := range rrs {
		h, ok := rr.(*dns.HTTPS)
		if !ok || h.Priority == 0 {
			continue // AliasMode carries no parameters (RFC 9460, Section 2.4.2)
		}
		for _, kv := range h.Value {
			if l, ok := kv.(*dns.SVCBLocal); ok && l.KeyCode == KeyUDPPort {
				if len(l.Data) != 2 || (l.Data[0] == 0 && l.Data[1] == 0) {
					return 0, errors.New("turbo: malformed key65280 in the HTTPS record")
				}
				return uint16(l.Data[0])<<8 | uint16(l.Data[1]), nil
			}
		}
	}
	return 0, ErrNoAdvert
}
