// Package authority is an embedded authoritative DNS server: it loads
// zone files and answers for them over UDP, TCP (RFC 7766) and DNS over
// TLS (RFC 7858), with the T-DNS behaviour stream clients rely on: a
// connection is read continuously, its queries are answered concurrently
// and each answer is written the moment it is ready, out of order.
//
// Serving a zone takes three pieces: the zone data, a handler chain, and
// a Server with sockets.
//
//	f, _ := os.Open("example.org.zone")
//	zone, err := authority.LoadZone(f, "example.org.", f.Name())
//	if err != nil { ... }
//	zones, err := authority.NewZones(zone)
//	if err != nil { ... }
//	srv := &authority.Server{Handler: authority.Chain(zones, authority.CheckQuery)}
//	pc, _ := net.ListenPacket("udp", "127.0.0.1:5353")
//	ln, _ := net.Listen("tcp", "127.0.0.1:5353")
//	go srv.ServeUDP(pc)
//	go srv.ServeTCP(ln)
//	defer srv.Close()
//
// At scale, ListenReusePort opens one UDP socket per CPU on one port
// (SO_REUSEPORT), each served in batches of datagrams (recvmmsg and
// sendmmsg), and Server.AnswerCacheSize sends a repeated query's packed
// answer again without building it. Idle stream connections hold no
// read buffer, so thousands can stay open (RFC 7766, T-DNS).
//
// DNS over TLS takes a listener and a *tls.Config (ServeTLS), or any
// listener whose connections speak TLS (ServeStream with TransportTLS), so
// another TLS implementation can be dropped in: ztls's own engine
// (tls13.NewListener) waits as cheaply as crypto/tls when idle.
//
// Handlers are shaped like net/http's: a Handler gets the parsed query and
// a ResponseWriter, and Middleware wraps handlers into a chain, CoreDNS
// style. CheckQuery answers malformed or unsupported queries (FORMERR,
// NOTIMP, BADVERS, REFUSED) before they reach the zones; Zones answers from
// the data (AA bit, NXDOMAIN versus NODATA with the SOA in the authority
// section, CNAMEs inside the zone, referrals with glue, REFUSED outside its
// zones). The Server finishes every answer: OPT echo with the client's
// buffer honoured (512 bytes without EDNS), TC=1 when an answer does not
// fit, edns-tcp-keepalive on streams (RFC 7828), padding on TLS (RFC 8467).
// A packet whose header does not parse, or that is a response, is never
// answered.
//
// The server is bounded under abuse by default. Stream connections are
// capped per source address and per client network (/24, /56), must send
// their first query within FirstQueryTimeout, and at MaxConns a newcomer
// replaces an idle connection. UDP answers pass Response Rate Limiting
// (RateLimit, BIND 9's model with slip), DNS cookies (RFC 7873, RFC 9018)
// exempt a client from it, answers to clients without a valid server
// cookie are capped at MaxUDPAmplification times the query (TC=1 beyond),
// and ANY gets one RRset (RFC 8482). Server.Stats counts what was refused.
//
// Zone data can change while the server runs: Zone.ReplaceRRset swaps a
// new snapshot in atomically, so queries see the old RRset or the new one,
// never a mix and never a lock.
//
//	err := zone.ReplaceRRset("_ztls._443._tcp.www.example.org.", dns.TypeTXT, rrs)
package authority
