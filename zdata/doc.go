// Package zdata is ZTLS's Z-data: the signed record a server publishes in
// DNS so a client that has never contacted it can send early data with
// its first ClientHello (docs/ztls-spec.md, Section 1; Lim et al., WWW 2023).
//
// A record is a TXT RRset entry at TXTName(host, port)
// ("_ztls._443._tcp.example.com.") whose character-strings are the paper's
// fields in order: v=ztls1, not-before, not-after, max_early_data_size,
// Zdata_id, group, key share, optional nsc= and alpn=, Y/N, signature
// scheme and the base64 signature. The certificate's leaf goes in a TLSA
// 3 0 0 record at TLSAName(host, port); intermediates in CERT (PKIX)
// records next to the TXT. The signature, made with the leaf's key, also
// covers the host, the port and the leaf's SHA-256, so a record copied to
// another service does not verify.
//
// Server side: a Service signs records with a tls13.Certificate and keeps
// their private keys in a Keyring, which is the engine's tls13.ZDataKeys.
// Rotate keeps the current and the next record in the keyring:
//
//	svc, err := zdata.NewService("example.com", 443, cert, zdata.Options{ALPN: "h2"}, nil)
//	added, err := svc.Rotate(time.Now())          // call every minute or so
//	cfg := &tls13.Config{Certificates: []tls13.Certificate{cert}, ZData: svc.Keyring}
//	lines := zdata.ZoneLines(svc.Records(now), cert.Chain[0], cert.Chain[1:],
//		zdata.TTLFor(svc.Records(now), now, 5*time.Minute)) // zone-file lines to publish
//
// With a seed (fleet mode) every server holding the seed and the
// certificate derives the same key and Zdata_id for each hourly epoch
// (DeriveKey, Service.Epoch), so a fleet publishes identical records
// without talking; its members must share one strike register (package
// zdata/redisreg).
//
// A Dir is the on-disk form shared by `ztls zdata`, `ztls serve --zdata`
// and `ztls dns serve --zdata`: service.json, keys/<id>.json (0600) and an
// optional seed. LoadDir, Dir.Rotate (which saves and erases expired keys),
// Dir.Reload or Dir.Watch to pick up rotations, Dir.RRs for a DNS server.
//
// Client side: a Selector takes the TXT, TLSA and CERT answers, checks
// syntax, group, share, validity window, signature, chain and name, and
// returns the record to use and its leaf; Record.Offer turns it into the
// engine's tls13.ZDataOffer. On failure ReasonOf(err) is the fallback
// reason for the connection report:
//
//	sel := zdata.NewSelector(host, port, zdata.SelectOptions{Roots: roots, Now: time.Now()})
//	sel.StartChains(tlsa, certs)
//	rec, leaf, err := sel.Select(txt)
//	if err != nil {
//		report.FallbackReason = string(zdata.ReasonOf(err)) // plain TLS 1.3
//	} else {
//		conn.SetZData(rec.Offer(leaf))
//	}
//
// Bloom filter encryption (docs/ztls-spec.md, Section 7): with
// Options.BFEConnections a Service gives each key a BFE key (package bfe),
// generated in the background an epoch ahead (Service.GenerateBFE; in
// fleet mode derived from the seed) and published as a v2 twin of the key's
// record (v=ztls2 with bfe=; v1 clients keep the v1 record). A serving
// process sets BFEServe (and BFELog, a fleet's redisreg.PunctureLog); the
// Keyring then answers a twin's zdata_hash with a key that decapsulates,
// puncturing the BFE key, so a replayed first flight is refused without a
// strike register and a stolen key state cannot decrypt an accepted one.
// Clients: Record.Prepare encapsulates ahead; SelectOptions.NoBFE ignores
// v2 records with bfe=.
//
// ParseTXT is strict (trimmed spaces only, fields in order, no leading
// zeros, no unknown fields) and keeps each field's published text, so the
// signature input is exactly what the signer signed.
package zdata
