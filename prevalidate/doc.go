// Package prevalidate fetches and checks, ahead of need, what a ztls
// connection checks before its first flight (Stark et al., "The Case for
// Prefetching and Prevalidating TLS Server Certificates", NDSS 2012), and
// keeps it in a Cache that connections (package dial) consult.
//
// Prefetch looks up the addresses, the HTTPS record and the Z-data,
// verifies the Z-data record's signature, validity, chain, name and
// revocation (CRLs, and OCSP under Options.OCSP), makes the key share and
// Z-data ECDH for the next connection, and keeps it all in a Cache. For a
// host without Z-data it fetches the certificate by a truncated TLS 1.3
// handshake (ClientHello, the server's flight up to its Certificate,
// close) and verifies it. A dial.Connect that then finds the entry, valid
// and verified under its own certificate policy (a Policy), sends its
// first flight without a DNS lookup or a chain verification
// (dial.Report.Prefetch; tls13.Config's VerifiedChains hands the engine
// the chain): with TurboTLS the first response comes one round trip after
// the call. Without an entry the connection is unchanged.
//
//	cache := prevalidate.NewCache(prevalidate.CacheOptions{Refresh: true})
//	opts := dial.Options{TLS: cfg, Resolver: res, Cache: cache, Request: req, ReplaySafe: true}
//	prevalidate.Prefetch(ctx, opts.Prevalidation(), "www.example.com:443", "cdn.example.net") // ahead, e.g. on a link's hover
//	res, err := dial.Connect(ctx, "www.example.com:443", opts)                                // at the click
//
// An entry expires at the earliest of its DNS TTLs, the Z-data's
// not_after, its certificates' NotAfter and its CRLs' and OCSP answers'
// nextUpdate; the refresher renews the entries that connections used
// before they expire. A server that refuses the cached Z-data (its keys
// rotated since) gets the request again over TLS 1.3, as any rejected
// early data, and the connection drops the entry (Cache.Forget).
//
// Z-data is taken from the record a connection would take it from
// (Options.ZDataFrom, dial.Options.ZDataFrom; docs/ztls-spec.md, Section
// 8.5): by default the HTTPS record's SvcParam when it carries usable
// Z-data for the origin's endpoint, its AliasMode records followed as a
// connection follows them (zdata.FromHTTPS and zdata.AliasChain, the
// code dial reads the record with), else the TXT record's. The leaf is
// the TLSA record's (a leaf dial.Memory holds is the connection's, not
// the prefetch's). PrefetchedZData.From and, on the connection from the
// entry, dial.Report.ZDataFrom say which record it was. Prefetch asks
// TXT, TLSA and CERT with the first questions whichever the choice, so
// its answers serve any connection; a verdict holds for the choice it
// was reached under only (Policy.ZDataFrom: txt, or https and both).
//
// The Cache also serves connections that nothing prefetched: the OCSP
// answers a connection's check gets (Cache.CheckOCSP) and the chains its
// connections verified (Cache.ChainCache) are kept for the next.
//
// Privacy and load. Prefetching reveals to the resolver every name
// prefetched, those the user never visits included: a resolver reached
// over DNS over TLS (resolver.TLS) hides them from the network path, not
// from the resolver. Z-data comes from DNS alone, so prefetching a ZTLS
// site costs its server nothing. A truncated handshake contacts the
// server: a TCP connection and the server's first flight (its key
// exchange and CertificateVerify signature; it never gets the client's
// Finished and sees the connection closed), and it tells the server, and
// the path, that the client may visit; Options.NoHandshake leaves it out
// (the certificate is then verified on the connection). OCSP tells the
// responder which site is visited, whether at prefetch or connection
// time. The CLI's cache file keeps the DNS answers only (a file is no
// verifier): a later process verifies what it loaded.
//
// This package does not import dial: a connection consults the cache
// (Cache.Lookup, Cache.KeySharePool, Cache.ChainCache, Cache.CheckOCSP),
// never the other way round.
package prevalidate
