package dial

// The application protocol (ALPN, RFC 7301): what a ClientHello offers,
// and whether the request, written in one protocol, can go early under
// the Z-data, whose early data is for one protocol too
// (docs/ztls-spec.md, Section 2).

import (
	"fmt"
	"slices"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/tls13"
)

// http11 is HTTP/1.1's ALPN protocol ID, and the protocol of an HTTP
// connection that negotiates none.
const http11 = "http/1.1"

// earlyALPN is the protocol a request must be written in to go early
// under Z-data whose early ALPN is zALPN: zALPN itself or, for Z-data
// without alpn= (early data only on connections that negotiate no ALPN),
// HTTP/1.1, offered by a ClientHello without ALPN. ok is false when the
// client does not speak it: protos is its ALPN list (empty: none).
func earlyALPN(zALPN string, protos []string) (proto string, ok bool) {
	if zALPN == "" {
		return http11, len(protos) == 0 || slices.Contains(protos, http11)
	}
	return zALPN, slices.Contains(protos, zALPN)
}

// fitsALPN: a request written in proto can be sent on a connection that
// negotiated negotiated ("" for the request: data in no protocol, which
// fits any).
func fitsALPN(proto, negotiated string) bool {
	return proto == "" || proto == negotiated || negotiated == "" && proto == http11
}

// alpnFor is the ALPN list of a ClientHello that makes the ZTLS offer z
// (nil: none) and whether z can carry the request early; why says why
// not, as a fallback reason. For a request in an application protocol
// (Options.RequestALPN) the Z-data decides: the request goes early only
// in the protocol the Z-data names, and a request in another is asked
// for in that one (Options.RequestIn) before z is given up. Without an
// offer, the list is what the request can be sent in, narrowed by the
// HTTPS record when its answer is in.
func (a *attempt) alpnFor(z *tls13.ZDataOffer) (protos []string, keep bool, why string) {
	if a.reqALPN == "" {
		// Data in no protocol: the list as configured; the engine puts the
		// Z-data's early ALPN first, or skips ztls when the list lacks it.
		return a.protos, z != nil, ""
	}
	if z == nil {
		return a.plainALPN(), false, ""
	}
	early, ok := earlyALPN(z.ALPN, a.protos)
	if !ok {
		return a.plainALPN(), false, fmt.Sprintf("Z-data not usable: its early data is for %s, which this client does not offer (ALPN %q)", alpnName(z.ALPN), a.protos)
	}
	if early != a.reqALPN {
		a.requestIn(early)
	}
	switch {
	case early != a.reqALPN:
		return a.plainALPN(), false, fmt.Sprintf("Z-data not usable: its early data is for %s, and the request is written in %s", alpnName(z.ALPN), a.reqALPN)
	case !a.o.ReplaySafe:
		return a.plainALPN(), false, ReasonNoEarly
	case z.ALPN == "":
		return nil, true, ""
	}
	return withFirst(a.offerable(), z.ALPN), true, ""
}

// alpnName names a Z-data's early ALPN in a reason.
func alpnName(zALPN string) string {
	if zALPN == "" {
		return "connections without ALPN"
	}
	return fmt.Sprintf("ALPN %q", zALPN)
}

// requestIn asks Options.RequestIn, once, for the request in proto.
func (a *attempt) requestIn(proto string) {
	if a.o.RequestIn == nil || a.askedIn {
		return
	}
	a.askedIn = true
	if req, safe := a.o.RequestIn(proto); len(req) > 0 {
		a.o.Request, a.o.ReplaySafe, a.reqALPN = req, safe, proto
	}
}

// offerable is the ALPN list worth offering for the request: the whole
// list when the caller can write it in whichever is negotiated
// (Options.RequestIn), else only the protocol it is in (a connection
// that negotiated another could not carry it), when the list has it.
func (a *attempt) offerable() []string {
	if a.o.RequestIn != nil || !slices.Contains(a.protos, a.reqALPN) {
		return a.protos
	}
	return []string{a.reqALPN}
}

// plainALPN is the ALPN list of a ClientHello without early data:
// offerable, narrowed to the HTTPS record's protocols when they share
// some.
func (a *attempt) plainALPN() []string {
	protos := a.offerable()
	if svc := a.serviceALPN(); svc != nil {
		var both []string
		for _, p := range protos {
			if slices.Contains(svc, p) {
				both = append(both, p)
			}
		}
		if len(both) > 0 {
			return both
		}
	}
	return protos
}

// serviceALPN is the protocols of the host's HTTPS record, when its
// answer is in (it is not waited for): its alpn values, and http/1.1
// unless it says no-default-alpn (RFC 9460, Section 7.1.1); nil when the
// answer is not in or has no ServiceMode record with alpn.
func (a *attempt) serviceALPN() []string {
	if a.https == nil && a.look != nil {
		select {
		case a.https = <-a.look.https:
		default:
		}
	}
	if a.https == nil {
		return nil
	}
	var protos []string
	for _, rr := range a.https.RRs {
		h, ok := rr.(*dns.HTTPS)
		if !ok || h.Priority == 0 {
			continue // AliasMode carries no parameters (RFC 9460, Section 2.4.2)
		}
		var alpn []string
		noDefault := false
		for _, kv := range h.Value {
			switch kv := kv.(type) {
			case *dns.SVCBAlpn:
				alpn = kv.Alpn
			case *dns.SVCBNoDefaultAlpn:
				noDefault = true
			}
		}
		if len(alpn) == 0 {
			continue
		}
		protos = append(protos, alpn...)
		if !noDefault {
			protos = append(protos, http11)
		}
	}
	return protos
}

// settleALPN fixes, once the Z-data's verdict is in, the ALPN list of
// the ClientHello, and drops the offer (with the reason) when it cannot
// carry the request early.
func (a *attempt) settleALPN() error {
	protos, keep, why := a.alpnFor(a.offer)
	if a.offer != nil && !keep {
		a.offer, a.reason = nil, why
	}
	a.setALPN(protos)
	return a.requireZTLS()
}

// setALPN makes protos the ClientHello's ALPN list.
func (a *attempt) setALPN(protos []string) {
	a.cfg = a.configWith(protos)
}

// configWith is the TLS configuration with the ALPN list protos.
func (a *attempt) configWith(protos []string) *tls13.Config {
	if slices.Equal(a.cfg.NextProtos, protos) {
		return a.cfg
	}
	cfg := a.cfg.Clone()
	cfg.NextProtos = protos
	return cfg
}

// withFirst is protos with p first.
func withFirst(protos []string, p string) []string {
	out := []string{p}
	for _, q := range protos {
		if q != p {
			out = append(out, q)
		}
	}
	return out
}
