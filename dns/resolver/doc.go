// Package resolver is the client's DNS for ztls: a stub resolver that
// speaks UDP, TCP or DNS over TLS (RFC 7858) to recursive resolvers, with
// the T-DNS techniques that make TCP and TLS as fast as UDP (Zhu et al.,
// IEEE S&P 2015): one kept-open connection per server, pipelined queries,
// answers matched by ID and question in whatever order they come back,
// edns-tcp-keepalive (RFC 7828), padding to 128-octet blocks over TLS
// (RFC 8467), TLS session resumption on reconnect, and a transparent
// reconnect (in-flight queries are resent) when the server closes.
//
// Build a Resolver from /etc/resolv.conf or from explicit servers:
//
//	cfg, err := resolver.FromResolvConf("/etc/resolv.conf")
//	if err != nil { ... }
//	cfg.Transport = resolver.TLS // port 853 unless a server names its port
//	cfg.Servers = []string{"127.0.0.1:853"}
//	cfg.TLSConfig = &tls.Config{RootCAs: pool, ServerName: "dns.example.test"}
//	r, err := resolver.New(cfg)
//	if err != nil { ... }
//	defer r.Close()
//
// Ask one question, or everything ztls needs before it connects:
//
//	a, err := r.Lookup(ctx, "www.example.test", dns.TypeAAAA)
//	// a.RRs, a.Rcode, a.Took, a.FromCache, a.Transport
//
//	res, err := r.LookupService(ctx, "www.example.test", 443, func(a resolver.Answer) {
//		// called as each of A, AAAA, Z-data TXT and CERT, TLSA and HTTPS
//		// lands: a dialer can start TCP on the first address right here
//	})
//	addrs := res.Addrs()
//
// LookupBatch asks any set of questions together (LookupService is one
// batch): one UDP socket with a distinct random ID per question, or one
// write on the kept-open stream, instead of one exchange per question.
//
//	answers, err := r.LookupBatch(ctx, []resolver.Question{
//		{Name: "www.example.test", Qtype: dns.TypeA},
//		{Name: "www.example.test", Qtype: dns.TypeAAAA},
//	}, nil)
//
// Exchange takes a whole *dns.Msg for callers that build their own.
//
// Answers are cached by TTL (the smallest of the answer's records), negative
// answers by the SOA's negative TTL (RFC 2308), in a bounded LRU; with
// Config.Prefetch an entry used in the last 10 % of its TTL is refreshed in
// the background. Packets that are not the answer to the query (wrong ID,
// question or source address, malformed, larger than the advertised
// 1232-octet buffer) are dropped while the query keeps waiting within its
// time budget; records about names off the question's CNAME chain are
// removed. A truncated UDP answer is asked again over TCP.
//
// DNS over TLS uses crypto/tls unless Config.Dialer supplies connections,
// which is how the project's own TLS engine plugs in. A Resolver is safe
// for concurrent use.
package resolver
