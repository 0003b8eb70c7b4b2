package zdata

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
)

func TestCheckSvcParamKey(t *testing.T) {
	for _, tc := range []struct {
		key  dns.SVCBKey
		want string // "" accepted, else a part of the error
	}{
		{0, ""}, {DefaultSvcParamKey, ""}, {65281, ""}, {65534, ""},
		{65280, "TurboTLS"}, {65535, "not a private-use"}, {1, "not a private-use"}, {65279, "not a private-use"},
	} {
		err := CheckSvcParamKey(tc.key)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("key %d: %v, want %q", tc.key, err, tc.want)
		}
	}
	if _, err := ServiceHTTPSRecord(testHost, testPort, nil, clock.Now(), time.Minute, HTTPSOptions{Key: 65280}); err == nil {
		t.Error("ServiceHTTPSRecord took TurboTLS's key for the Z-data")
	}
}

// Through a whole period of a BFE service, the HTTPS record carries the
// current key's v1 record and twin and, once it is issued, the next
// key's too (never more than MaxSvcRecords), every one parsing back to
// the record issued and verifying for the service's host and port; the
// TTL ends before the earliest not-after; TurboTLS's key, alpn and hints
// sit in the same RR in key order, and the Z-data key is not mandatory.
func TestServiceHTTPSRecordThroughAPeriod(t *testing.T) {
	start := clock.Now().Truncate(time.Hour)
	fx := newBFEFixture(t, nil, start)
	o := HTTPSOptions{ALPN: []string{"h2"}, TurboUDPPort: 8443, IPv4Hint: []net.IP{net.IPv4(192, 0, 2, 7)}}
	sawFour := false
	for at := start; at.Before(start.Add(time.Hour)); at = at.Add(7 * time.Minute) {
		if _, err := fx.svc.Rotate(at); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.svc.GenerateBFE(t.Context(), at); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.svc.Rotate(at); err != nil {
			t.Fatal(err)
		}
		recs := fx.svc.HTTPSRecords(at)
		if len(recs) < 2 || len(recs) > MaxSvcRecords || len(recs)%2 != 0 {
			t.Fatalf("at +%v: %d records, want a v1 record and its twin per key, at most %d", at.Sub(start), len(recs), MaxSvcRecords)
		}
		sawFour = sawFour || len(recs) == 4
		rr, err := ServiceHTTPSRecord(testHost, testPort, recs, at, 5*time.Minute, o)
		if err != nil {
			t.Fatal(err)
		}
		if want := TTLFor(recs, at, 5*time.Minute); rr.Hdr.Ttl != uint32(want/time.Second) {
			t.Errorf("at +%v: TTL %d, want %v", at.Sub(start), rr.Hdr.Ttl, want)
		}
		if rr.Hdr.Name != HTTPSOwner(testHost, testPort) || rr.Priority != 1 || rr.Target != "." {
			t.Fatalf("record %v", rr)
		}
		var keys []dns.SVCBKey
		for _, kv := range rr.Value {
			keys = append(keys, kv.Key())
			if kv.Key() == dns.SVCB_MANDATORY {
				t.Fatal("a mandatory key")
			}
			if kv.Key() == turboUDPPortKey && !bytes.Equal(kv.(*dns.SVCBLocal).Data, []byte{0x20, 0xfb}) {
				t.Fatalf("TurboTLS port %x", kv.(*dns.SVCBLocal).Data)
			}
		}
		if want := []dns.SVCBKey{dns.SVCB_ALPN, dns.SVCB_IPV4HINT, turboUDPPortKey, DefaultSvcParamKey}; !equalKeys(keys, want) {
			t.Fatalf("keys %v, want %v", keys, want)
		}
		got, err := RecordsFromSVCB(&rr.SVCB, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			if err := r.Verify(fx.svc.Leaf(), testHost, testPort); err != nil {
				t.Fatalf("at +%v: record %d: %v", at.Sub(start), i, err)
			}
			if r.ZDataHash() != recs[i].ZDataHash() {
				t.Fatalf("at +%v: record %d does not round-trip", at.Sub(start), i)
			}
		}
	}
	if !sawFour {
		t.Error("the next period's key and twin never joined the current ones")
	}
}

func equalKeys(a, b []dns.SVCBKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Without Z-data (none published, or NoZData) the record still carries
// TurboTLS's key and alpn, with the TTL asked for.
func TestServiceHTTPSRecordWithoutZData(t *testing.T) {
	now := clock.Now()
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	if _, err := fx.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		recs []*Record
		o    HTTPSOptions
	}{
		{"no records", nil, HTTPSOptions{TurboUDPPort: 443, ALPN: []string{"h2"}}},
		{"NoZData", fx.svc.HTTPSRecords(now), HTTPSOptions{TurboUDPPort: 443, ALPN: []string{"h2"}, NoZData: true}},
	} {
		rr, err := ServiceHTTPSRecord(testHost, testPort, tc.recs, now, 300*time.Second, tc.o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RecordsFromSVCB(&rr.SVCB, 0); err != ErrNoSvcParam || rr.Hdr.Ttl != 300 || len(rr.Value) != 2 {
			t.Errorf("%s: %v (%v)", tc.name, rr, err)
		}
	}
}

// MergeHTTPS adds the Z-data and TurboTLS keys to each ServiceMode RR the
// operator wrote, keeping its target, alpn, ech and hints, replacing a
// stale value of the same private-use key and lowering the TTL; an
// AliasMode RRset is left alone, and an empty one gets own.
func TestMergeHTTPS(t *testing.T) {
	now := clock.Now()
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	if _, err := fx.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	own, err := ServiceHTTPSRecord(testHost, testPort, fx.svc.HTTPSRecords(now), now, time.Minute, HTTPSOptions{TurboUDPPort: 443})
	if err != nil {
		t.Fatal(err)
	}
	owner := own.Hdr.Name
	rr := func(s string) dns.RR {
		t.Helper()
		r, err := dns.NewRR(owner + " 3600 IN HTTPS " + s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	base := []dns.RR{
		rr(`1 svc1.example.net. alpn=h3,h2 ech=AEX+DQBBpAAgACCRR9EpLPhI5GNZSnBXY8AyTUBLIuedclStvyO3fLIcOgAEAAEAAQASY2xvdWRmbGFyZS1lY2guY29tAAA= key65280="\000\001"`),
		rr(`2 svc2.example.net. port=8443 ipv6hint=2001:db8::1`),
	}
	merged, aliased := MergeHTTPS(base, own, DefaultSvcParamKey, turboUDPPortKey)
	if aliased || len(merged) != 2 {
		t.Fatalf("merged %v (aliased %v)", merged, aliased)
	}
	for i, m := range merged {
		h := m.(*dns.HTTPS)
		b := base[i].(*dns.HTTPS)
		if h.Target != b.Target || h.Priority != b.Priority || h.Hdr.Ttl != own.Hdr.Ttl {
			t.Fatalf("RR %d: %v", i, h)
		}
		recs, err := RecordsFromSVCB(&h.SVCB, 0)
		if err != nil || len(recs) != len(fx.svc.HTTPSRecords(now)) {
			t.Fatalf("RR %d: %d records (%v)", i, len(recs), err)
		}
		var keys []dns.SVCBKey
		for _, kv := range h.Value {
			keys = append(keys, kv.Key())
			if kv.Key() == turboUDPPortKey && !bytes.Equal(kv.(*dns.SVCBLocal).Data, []byte{0x01, 0xbb}) {
				t.Fatalf("RR %d: the stale TurboTLS port stayed: %v", i, h)
			}
		}
		want := map[int][]dns.SVCBKey{
			0: {dns.SVCB_ALPN, dns.SVCB_ECHCONFIG, turboUDPPortKey, DefaultSvcParamKey},
			1: {dns.SVCB_PORT, dns.SVCB_IPV6HINT, turboUDPPortKey, DefaultSvcParamKey},
		}[i]
		if !equalKeys(keys, want) {
			t.Fatalf("RR %d: keys %v, want %v", i, keys, want)
		}
		if _, err := dns.NewRR(h.String()); err != nil {
			t.Fatalf("RR %d does not parse back: %v", i, err)
		}
	}
	if base[0].(*dns.HTTPS).Hdr.Ttl != 3600 || len(base[0].(*dns.HTTPS).Value) != 3 {
		t.Fatal("MergeHTTPS changed its argument")
	}
	// A managed key own no longer carries leaves; another stays.
	noTurbo, err := ServiceHTTPSRecord(testHost, testPort, nil, now, time.Minute, HTTPSOptions{NoZData: true})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := MergeHTTPS(merged, noTurbo, DefaultSvcParamKey)
	if h := again[0].(*dns.HTTPS); len(h.Value) != 3 || h.Value[2].Key() != turboUDPPortKey {
		t.Fatalf("dropping the Z-data key only: %v", h)
	}
	alias := []dns.RR{rr("0 pool.example.net.")}
	if got, aliased := MergeHTTPS(alias, own, DefaultSvcParamKey); !aliased || len(got) != 1 || got[0] != alias[0] {
		t.Fatalf("AliasMode: %v %v", got, aliased)
	}
	if got, aliased := MergeHTTPS(nil, own, DefaultSvcParamKey); aliased || len(got) != 1 || got[0] != dns.RR(own) {
		t.Fatalf("empty base: %v", got)
	}
}

// A post-quantum service's v3 records stay out of its HTTPS record
// (Section 9.8), which then builds without Z-data instead of failing on
// the 1216-byte share; its TXT set still has them.
func TestServiceHTTPSRecordLeavesOutV3(t *testing.T) {
	now := clock.Now()
	fx := newFixture(t, "ecdsa-p256", Options{Group: GroupX25519MLKEM768}, nil)
	if _, err := fx.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	if recs := fx.svc.Records(now); len(recs) == 0 || !recs[0].V3 {
		t.Fatalf("the TXT set holds %d records, want v3 ones", len(recs))
	}
	recs := fx.svc.HTTPSRecords(now)
	if len(recs) != 0 {
		t.Fatalf("%d records in the HTTPS record, want none", len(recs))
	}
	rr, err := ServiceHTTPSRecord(testHost, testPort, recs, now, 5*time.Minute, HTTPSOptions{ALPN: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := RecordsFromSVCB(&rr.SVCB, 0); err != ErrNoSvcParam {
		t.Fatalf("the record carries %d Z-data records (%v)", len(got), err)
	}
}
