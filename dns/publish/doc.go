// Package publish pushes RRsets into a zone that an existing primary
// server (BIND 9, Knot, PowerDNS) serves, with one RFC 2136 UPDATE signed
// by TSIG (RFC 8945, hmac-sha256 by default).
//
// Each RRSet given to Publish replaces the set of that name and type: the
// UPDATE deletes the old RRset and adds the new records in the same
// message, and the primary applies a message all or nothing (RFC 2136,
// Section 3.4), so resolvers never see a service's TXT, CERT, TLSA and
// HTTPS records from two different generations. BIND 9 and Knot DNS are
// tested as primaries.
//
//	key := publish.TSIGKey{Name: "ztls-update.", Secret: "base64 secret from tsig-keygen"}
//	err := publish.Publish(ctx, "192.0.2.53:53", "example.org.", key, []publish.RRSet{
//		{Name: "_ztls._443._tcp.www.example.org.", Type: dns.TypeTXT, Records: txt},
//		{Name: "_ztls._443._tcp.www.example.org.", Type: dns.TypeCERT, Records: cert},
//		{Name: "_443._tcp.www.example.org.", Type: dns.TypeTLSA, Records: tlsa},
//	})
//
// An RRSet with no records deletes the set. A primary that refuses or
// fails the update returns an *UpdateError carrying its RCODE and TSIG
// error: REFUSED when updates are not allowed for the key (or unsigned),
// NOTAUTH with BADSIG or BADKEY when the signature does not verify. The
// primary's answer must carry a valid TSIG too, or Publish fails.
//
// The zero-configuration Publish uses TCP; Publisher exposes the transport
// and timeout.
package publish
