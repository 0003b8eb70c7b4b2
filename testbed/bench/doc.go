// Package bench measures first-response times of secure-connection
// protocols side by side over emulated WAN links: the testbed behind the
// project's performance figures (the ZTLS paper's Table 3).
//
// Run builds four hosts with package hosts (client, resolver, dns, server),
// starts a small authoritative DNS server and a caching resolver, starts
// each contender's server, and measures first visits run by run, the
// contenders alternating, over every RTT and DNS scenario asked for:
//
//	rep, err := bench.Run(ctx, bench.Config{
//		RTTs:      bench.PaperRTTs,
//		Runs:      20,
//		Protocols: []string{"tls", "ztls", "tls-0rtt", "gotls", "quic", "quic-0rtt"},
//		Scenarios: []string{"stub", "local-warm"},
//	})
//	rep.WriteJSON(os.Stdout)
//	rep.Plot("docs/img/testbed")
//
// Every contender measures the same span, from the start of the DNS lookup
// (Client.Resolve) to the first response byte (Client.Exchange or
// Client.ReadResponse). A new protocol is one type implementing Contender
// (plus Primer if it needs a previous visit) and a Register call in an init
// function; its server answers "GET /path" requests with
// ServerConfig.Respond, or serves ServerConfig.Dir as files.
//
// The contenders of this project's engine (tls, ztls, tls-0rtt) connect
// with package dial, which opens its own sockets; their clients run in a
// worker process inside the client namespace (this binary re-executed) and
// report dial's timings. The ztls server publishes its Z-data in the
// scenario's authority through ServerConfig.Publish.
package bench
