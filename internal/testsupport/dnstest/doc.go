// Package dnstest starts real DNS servers for tests: BIND 9 (StartBind)
// and Knot DNS (StartKnot) as authoritative primaries taking TSIG-signed
// UPDATEs, BIND 9 (StartBind with Forward) and Unbound (StartUnbound) as
// caching resolvers in front of a test's authority, each on a loopback
// address and a free port, configured in a temporary directory and
// stopped by t.Cleanup.
//
//	b := dnstest.StartBind(t, dnstest.BindOptions{
//		Zones: []dnstest.BindZone{{Origin: "example.test.", Text: zoneText, AllowUpdate: true}},
//		Key:   &dnstest.BindKey{Name: "ztls-update.", Secret: secret},
//	})
//	// b.Addr is "127.0.0.1:port", answering over UDP and TCP.
//
// Tests are skipped, not failed, when the server's binary is not
// installed (make deps installs it).
package dnstest
