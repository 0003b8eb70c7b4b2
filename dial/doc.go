// Package dial establishes ztls connections as the ZTLS paper's client
// does, done properly: the address, Z-data, TLSA and CERT lookups run in
// parallel; TCP starts the moment an address arrives; Z-data is verified
// (signature, validity, chain, name) while the SYN is in flight; the
// handshake opens with ZTLS if valid Z-data is in hand when TCP is up
// (waiting at most a small budget), else with TLS 1.3. Every step is
// timed and every fallback has its reason in the Report.
//
// # Prevalidated services
//
// A connection consults a prevalidate.Cache (Options.Cache; the process
// default when nil) before its lookups: what prevalidate.Prefetch fetched
// and checked ahead of need, valid under the connection's certificate
// policy, lands as the lookup phase's answers, and the first flight
// leaves without a DNS lookup or a chain verification (Report.Prefetch).
// Options.Prevalidation gives the prevalidate.Options whose entries a
// Connect with those Options uses:
//
//	opts := dial.Options{TLS: cfg, Resolver: res, Cache: cache, Request: req, ReplaySafe: true}
//	prevalidate.Prefetch(ctx, opts.Prevalidation(), "www.example.com:443") // ahead, e.g. on a link's hover
//	res, err := dial.Connect(ctx, "www.example.com:443", opts)              // at the click
package dial
