package tls13

import (
	"crypto/ecdh"
	"slices"
	"testing"
)

// The outer ClientHello's alpn is the client's NextProtos in configured
// order, even when ZTLS moves the Z-data's early protocol to the front
// of the inner's list (spec Section 10.1): that order would hint at a
// ZTLS offer.
func TestECHOuterALPNConfiguredOrder(t *testing.T) {
	x := newECHZTLS(t)
	offer, key := newZData(t, ecdh.X25519(), X25519, echInnerName, "http/1.1", x.z.p)
	x.scfg.ZData = &testZKeys{keys: []*ZDataKey{key}}
	configured := []string{"h2", "http/1.1"}
	x.ccfg.NextProtos = configured
	x.scfg.NextProtos = []string{"http/1.1", "h2"}
	request := []byte("GET /alpn-order")
	c, s, first, read, cerr, serr := earlyRun(t, x.ccfg, x.scfg, offer, nil, request)
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	if c.info.ECH != ECHAccepted || !c.info.ZTLS || !s.info.ZTLS || string(read) != string(request) {
		t.Fatalf("client %+v, server read %q", c.info, read)
	}
	if c.info.NegotiatedProtocol != "http/1.1" {
		t.Fatalf("negotiated %q, want the Z-data's http/1.1", c.info.NegotiatedProtocol)
	}
	outer := outerHello(t, first)
	if !slices.Equal(outer.ALPN, configured) {
		t.Fatalf("the outer ClientHello's alpn is %q, want the configured %q", outer.ALPN, configured)
	}
	checkOuterHidesZTLS(t, first, offer, request)
}
