package metrics

import (
	"context"
	"net"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/authority"
)

// DNSMiddleware counts each answered query by type and response code. A
// nil Registry's middleware passes queries through untouched.
func (r *Registry) DNSMiddleware() authority.Middleware {
	return func(next authority.Handler) authority.Handler {
		if r == nil {
			return next
		}
		return authority.HandlerFunc(func(ctx context.Context, w authority.ResponseWriter, q *dns.Msg) {
			next.ServeDNS(ctx, &countingWriter{ResponseWriter: w, r: r, q: q}, q)
		})
	}
}

type countingWriter struct {
	authority.ResponseWriter
	r *Registry
	q *dns.Msg
}

func (w *countingWriter) WriteMsg(m *dns.Msg) error {
	if len(w.q.Question) > 0 {
		w.r.DNSAnswered(w.q.Question[0].Qtype, m.Rcode)
	} else {
		w.r.DNSQuery("none", rcodeLabel(m.Rcode))
	}
	return w.ResponseWriter.WriteMsg(m)
}

// DNSAnswered counts one answer of the given query type and RCODE; it is
// also the authority's Server.CachedAnswer, for the answers it sends from
// its cache without the Handler chain.
func (r *Registry) DNSAnswered(qtype uint16, rcode int) {
	t := dns.TypeToString[qtype]
	if t == "" {
		t = "other" // bounded label values
	}
	r.DNSQuery(t, rcodeLabel(rcode))
}

func rcodeLabel(rcode int) string {
	if s := dns.RcodeToString[rcode]; s != "" {
		return s
	}
	return "other"
}

// RemoteAddr and LocalAddr pass through (explicit for clarity).
func (w *countingWriter) RemoteAddr() net.Addr { return w.ResponseWriter.RemoteAddr() }
func (w *countingWriter) LocalAddr() net.Addr  { return w.ResponseWriter.LocalAddr() }

// AuthorityStats exposes an authority's running totals: UDP traffic,
// response rate limiting, cookies and stream connections.
func (r *Registry) AuthorityStats(stats func() authority.Stats) {
	for _, c := range []struct {
		name, help string
		get        func(authority.Stats) uint64
	}{
		{"ztls_dns_udp_bytes_in_total", "UDP query bytes read.", func(s authority.Stats) uint64 { return s.UDPBytesIn }},
		{"ztls_dns_udp_bytes_out_total", "UDP answer bytes sent.", func(s authority.Stats) uint64 { return s.UDPBytesOut }},
		{"ztls_dns_rrl_dropped_total", "Answers dropped by response rate limiting.", func(s authority.Stats) uint64 { return s.RRLDropped }},
		{"ztls_dns_rrl_slipped_total", "Answers sent as empty TC=1 replies by response rate limiting.", func(s authority.Stats) uint64 { return s.RRLSlipped }},
		{"ztls_dns_cookies_valid_total", "Queries with a valid server cookie.", func(s authority.Stats) uint64 { return s.CookiesValid }},
		// The connection series have the names of serve's (the same
		// things), and no ztls_dns_ prefix.
		{"ztls_conns_refused_per_ip_total", "Stream (TCP, TLS) connections closed at accept: their address held the most allowed (Server.MaxConnsPerAddr).", func(s authority.Stats) uint64 { return s.ConnsRefusedAddr }},
		{"ztls_conns_refused_per_net_total", "Stream (TCP, TLS) connections closed at accept: their /24 or /56 held the most allowed (Server.MaxConnsPerPrefix).", func(s authority.Stats) uint64 { return s.ConnsRefusedPrefix }},
		{"ztls_conns_refused_full_total", "Stream (TCP, TLS) connections closed at accept: the most allowed were open (Server.MaxConns).", func(s authority.Stats) uint64 { return s.ConnsRefusedFull }},
	} {
		r.CounterFunc(c.name, c.help, func() float64 { return float64(c.get(stats())) })
	}
	r.GaugeFunc("ztls_conns_open", "Stream (TCP, TLS) connections open now.", func() float64 { return float64(stats().ConnsOpen) })
}
