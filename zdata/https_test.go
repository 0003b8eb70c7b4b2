package zdata

import (
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// maxSigLen is the longest signature of a scheme: DER ECDSA signatures
// vary by a few bytes, so a size bound must assume the longest.
func maxSigLen(s tls13.SignatureScheme, got int) int {
	switch s {
	case SchemeECDSAP256SHA256:
		return 72
	case SchemeECDSAP384SHA384:
		return 104
	}
	return got
}

// TestHTTPSAnswerSizes computes the DNS answer to the HTTPS query of
// www.example.org:443 (alpn h2,http/1.1, TurboTLS's key65280, one IPv4
// and one IPv6 hint) for every profile, with one record, the current and
// next period's, and both periods' v1 records and v2 twins with bfe=
// (docs/ztls-spec.md, Section 8.3), each with its longest signature.
// The default profile (x25519, ECDSA P-256 leaf) must fit 1232 bytes in
// every case.
func TestHTTPSAnswerSizes(t *testing.T) {
	bfeKey := testBFEKey(t)
	nb := clock.Now().Truncate(time.Second).UTC()
	base := HTTPSParams{
		Host: "www.example.org", Port: 443, ALPN: []string{"h2", "http/1.1"},
		IPv4Hint: []net.IP{net.IPv4(192, 0, 2, 1)}, IPv6Hint: []net.IP{net.ParseIP("2001:db8::1")},
		Extra: []dns.SVCBKeyValue{&dns.SVCBLocal{KeyCode: 65280, Data: []byte{0x01, 0xbb}}}, TTL: time.Minute,
	}
	size := func(recs ...*Record) int {
		t.Helper()
		p := base
		p.Records = recs
		rr, err := HTTPSRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		n, err := AnswerSize(rr)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			n += maxSigLen(r.Scheme, len(r.Signature)) - len(r.Signature)
		}
		return n
	}
	none := size()
	t.Logf("no Z-data: %d bytes", none)
	for _, leaf := range []string{"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa2048"} {
		for _, g := range []tls13.CurveID{GroupX25519, GroupSecp256r1} {
			fx := newFixture(t, leaf, Options{Group: g}, nil)
			var v1, v2 [2]*Record
			for i := range 2 {
				start := nb.Add(time.Duration(i) * MaxValidity)
				v1[i] = svcRecord(t, fx, svcProfile{leaf: leaf, group: g}, nil, start)
				v2[i] = svcRecord(t, fx, svcProfile{leaf: leaf, group: g, v2: true, bfe: true}, bfeKey, start)
			}
			one, two, four := size(v1[0]), size(v1[0], v1[1]), size(v1[0], v2[0], v1[1], v2[1])
			t.Logf("%-10s %-9v v1: %4d   current+next v1: %4d   v1+v2/bfe both periods: %4d bytes", leaf, g, one, two, four)
			if leaf == "ecdsa-p256" && g == GroupX25519 && max(one, two, four) > 1232 {
				t.Errorf("default profile: %d bytes, over 1232", max(one, two, four))
			}
			if one <= none {
				t.Errorf("%s %v: the Z-data added nothing (%d ≤ %d)", leaf, g, one, none)
			}
		}
	}
}
