package authority

import (
	"context"
	"net"

	"github.com/miekg/dns"
)

// Transport names the transport a query arrived on.
type Transport uint8

// The transports a Server serves.
const (
	TransportUDP Transport = iota + 1 // datagrams, RFC 1035, Section 4.2.1
	TransportTCP                      // length-prefixed stream, RFC 7766
	TransportTLS                      // DNS over TLS, RFC 7858
)

// String returns "udp", "tcp" or "tls".
func (t Transport) String() string {
	switch t {
	case TransportUDP:
		return "udp"
	case TransportTCP:
		return "tcp"
	case TransportTLS:
		return "tls"
	}
	return "unknown"
}

// Stream reports whether t is a stream transport (TCP or TLS).
func (t Transport) Stream() bool { return t == TransportTCP || t == TransportTLS }

// A ResponseWriter sends the answer to one query. A handler calls WriteMsg
// at most once; not calling it means no answer is sent (a UDP client then
// times out, a stream client sees no answer for that ID). The server
// finishes the message on the way out: it adds an OPT record when the query
// had one (RFC 6891), the edns-tcp-keepalive option on streams (RFC 7828),
// padding on TLS when the client padded (RFC 8467), and truncates UDP
// answers to the client's buffer with TC=1. A ResponseWriter is used by one
// goroutine.
type ResponseWriter interface {
	// WriteMsg packs and sends m. A second call returns an error.
	WriteMsg(m *dns.Msg) error
	// RemoteAddr is the client's address.
	RemoteAddr() net.Addr
	// LocalAddr is the address the query arrived at.
	LocalAddr() net.Addr
	// Transport is the transport the query arrived on.
	Transport() Transport
}

// A Handler answers DNS queries. ServeDNS may be called from many
// goroutines at once, also for queries of the same stream connection. The
// request is parsed and owned by the handler; ctx is cancelled when the
// server shuts down or the connection is gone.
type Handler interface {
	ServeDNS(ctx context.Context, w ResponseWriter, r *dns.Msg)
}

// HandlerFunc adapts a function to the Handler interface.
type HandlerFunc func(ctx context.Context, w ResponseWriter, r *dns.Msg)

// ServeDNS calls f(ctx, w, r).
func (f HandlerFunc) ServeDNS(ctx context.Context, w ResponseWriter, r *dns.Msg) { f(ctx, w, r) }

// Middleware wraps a Handler, like a CoreDNS plugin that either answers
// itself or passes the query to next.
type Middleware func(next Handler) Handler

// Chain returns h wrapped by the middlewares; the first middleware sees
// each query first. Chain(zones, CheckQuery) is the usual server chain.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// reply builds the header of an answer to r with the given rcode. The
// question is echoed only when r has exactly one.
func reply(r *dns.Msg, rcode int) *dns.Msg {
	m := new(dns.Msg)
	m.Id = r.Id
	m.Response = true
	m.Opcode = r.Opcode
	m.RecursionDesired = r.RecursionDesired
	m.CheckingDisabled = r.CheckingDisabled
	m.Rcode = rcode
	if len(r.Question) == 1 {
		m.Question = []dns.Question{r.Question[0]}
	}
	return m
}

// CheckQuery is the middleware that rejects what no authoritative handler
// should see: opcodes other than QUERY get NOTIMP (so UPDATE and NOTIFY
// are not implemented here), a question count other than one FORMERR
// (RFC 9619), a malformed OPT record FORMERR (RFC 6891, Section 6.1.1), an
// EDNS version other than 0 BADVERS (RFC 6891, Section 6.1.3), a stream
// query whose edns-tcp-keepalive option carries a timeout FORMERR
// (RFC 7828, Section 3.2.1), meta query types FORMERR or NOTIMP, zone
// transfers REFUSED and TSIG-signed queries REFUSED (this server holds no
// keys).
func CheckQuery(next Handler) Handler {
	return HandlerFunc(func(ctx context.Context, w ResponseWriter, r *dns.Msg) {
		if rcode := checkQuery(w.Transport(), r); rcode != dns.RcodeSuccess {
			w.WriteMsg(reply(r, rcode))
			return
		}
		next.ServeDNS(ctx, w, r)
	})
}

func checkQuery(t Transport, r *dns.Msg) int {
	if r.Opcode != dns.OpcodeQuery {
		return dns.RcodeNotImplemented
	}
	if len(r.Question) != 1 {
		return dns.RcodeFormatError
	}
	var opt *dns.OPT
	for _, rr := range r.Extra {
		switch rr := rr.(type) {
		case *dns.OPT:
			if opt != nil || rr.Hdr.Name != "." {
				return dns.RcodeFormatError
			}
			opt = rr
		case *dns.TSIG:
			return dns.RcodeRefused
		}
	}
	if opt != nil {
		if opt.Version() != 0 {
			return dns.RcodeBadVers
		}
		if t.Stream() {
			for _, o := range opt.Option {
				if ka, ok := o.(*dns.EDNS0_TCP_KEEPALIVE); ok && ka.Timeout != 0 {
					return dns.RcodeFormatError
				}
			}
		}
	}
	switch r.Question[0].Qtype {
	case dns.TypeOPT, dns.TypeTSIG, dns.TypeTKEY:
		return dns.RcodeFormatError
	case dns.TypeMAILA, dns.TypeMAILB:
		return dns.RcodeNotImplemented
	case dns.TypeAXFR, dns.TypeIXFR:
		return dns.RcodeRefused
	}
	return dns.RcodeSuccess
}
