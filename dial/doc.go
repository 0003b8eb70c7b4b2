// Package dial establishes ztls connections as the ZTLS paper's client
// does, done properly: the address, Z-data, TLSA and CERT lookups run in
// parallel; TCP starts the moment an address arrives; Z-data is verified
// (signature, validity, chain, name) while the SYN is in flight; the
// handshake opens with ZTLS if valid Z-data is in hand when TCP is up
// (waiting at most a small budget), else with TLS 1.3. Every step is
// timed and every fallback has its reason in the Report.
//
// # Where the Z-data comes from
//
// By default (Options.ZDataFrom, ZDataHTTPSFirst) the Z-data is read from
// the service's HTTPS record (docs/ztls-spec.md, Section 8), which is
// asked beside A and AAAA anyway (TurboTLS's advertisement and the ALPN
// are read from it too): with Z-data there, no query of its own. The TXT
// record of Section 1 is asked only when the HTTPS record carries none (a
// second round trip), or at once with ZDataBoth; ZDataTXT reads the TXT
// record only. The records are verified for the dialled host and port
// with a leaf an earlier handshake of the process verified (Memory), when
// there is one, else with the TLSA and CERT records asked with the
// first questions. Report.ZDataFrom says which record the Z-data came
// from, and Report.HTTPSZDataSkipped why the HTTPS record's was not used:
//
//	opts := dial.Options{TLS: cfg, Resolver: res, Request: req, ReplaySafe: true}
//	res, err := dial.Connect(ctx, "www.example.com:443", opts)
//	// res.Report.ZDataFrom == "https": no TXT query was asked
//
// An AliasMode record is followed (at most 8, loops refused); a
// ServiceMode record whose endpoint is not the one dial connects to (the
// origin's own addresses) is not read: dial does not connect to another
// TargetName's addresses, so that Z-data would be for another endpoint.
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
