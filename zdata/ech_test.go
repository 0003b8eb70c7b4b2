package zdata

import (
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

const echTestPublicName = "public.ztls.example" // 19 bytes

func newECHDir(t *testing.T) (*Dir, string) {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	return newDir(t, ca, leaf, nil)
}

func publishedStarts(t *testing.T, d *Dir, at time.Time) []time.Time {
	t.Helper()
	keys, err := d.ECHKeys()
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, k := range ECHPublished(keys, at) {
		out = append(out, k.NotBefore)
	}
	return out
}

// TestECHRotationInstant: just before a period boundary the answer holds
// the current and the next config; at the boundary the next becomes the
// current and the one after joins; the server keeps accepting the old
// key for Window past its not-after, then rotation removes it.
func TestECHRotationInstant(t *testing.T) {
	d, path := newECHDir(t)
	v, w := d.Service.Options.Validity, d.Service.Options.Window
	now := clock.Now().UTC()
	cur := d.Service.slot(now)
	next := cur.Add(v)
	if added, _, err := d.RotateECH("", now); err != nil || added != 0 {
		t.Fatalf("without a public name or keys: added %d, %v", added, err)
	}
	if added, _, err := d.RotateECH(echTestPublicName, now); err != nil || added != 2 {
		t.Fatalf("first rotation: added %d, %v; want the current and the next period's", added, err)
	}
	ents, err := os.ReadDir(filepath.Join(path, ECHDir))
	if err != nil || len(ents) != 2 {
		t.Fatalf("ech dir: %v, %d files", err, len(ents))
	}
	for _, e := range ents {
		if info, _ := e.Info(); info.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", e.Name(), info.Mode().Perm())
		}
	}
	before := next.Add(-time.Second)
	if got := publishedStarts(t, d, before); len(got) != 2 || !got[0].Equal(cur) || !got[1].Equal(next) {
		t.Fatalf("one second before the boundary: published %v, want %v and %v", got, cur, next)
	}
	// At the boundary: a rotation adds the period after next; the
	// current key is no longer published but still accepted.
	if added, removed, err := d.RotateECH("", next); err != nil || added != 1 || removed != 0 {
		t.Fatalf("rotation at the boundary: added %d removed %d, %v", added, removed, err)
	}
	if got := publishedStarts(t, d, next); len(got) != 2 || !got[0].Equal(next) || !got[1].Equal(next.Add(v)) {
		t.Fatalf("at the boundary: published %v, want %v and %v", got, next, next.Add(v))
	}
	keys, err := d.ECHKeys()
	if err != nil {
		t.Fatal(err)
	}
	srv := ECHServerKeys(keys, next.Add(w), w)
	if len(srv) != 3 || srv[0].SendAsRetry || !srv[1].SendAsRetry {
		t.Fatalf("at not-after+window the server holds %d keys (old sent as retry: %v), want 3 with the old one not a retry", len(srv), srv[0].SendAsRetry)
	}
	var set tls13.ECHKeySet
	if err := set.Set(srv); err != nil {
		t.Fatal(err)
	}
	if len(set.RetryConfigList()) == 0 {
		t.Fatal("no retry configs")
	}
	if _, removed, err := d.RotateECH("", next.Add(w+time.Second)); err != nil || removed != 1 {
		t.Fatalf("past not-after+window: removed %d, %v; want the old key gone", removed, err)
	}
	if keys, _ := d.ECHKeys(); len(ECHServerKeys(keys, next.Add(w+time.Second), w)) != 2 {
		t.Fatal("the server still holds the old key past its window")
	}
}

// TestECHHTTPSAnswerSize: the default profile's largest HTTPS answer
// (four Z-data records, TurboTLS, ALPN, a hint) with two ECH configs
// stays within 1232 bytes (docs/ztls-spec.md, Section 10.3), and the ech
// SvcParam round-trips.
func TestECHHTTPSAnswerSize(t *testing.T) {
	start := clock.Now().Truncate(time.Hour)
	fx := newBFEFixture(t, nil, start)
	var ks []tls13.ECHKey
	for id := range uint8(2) {
		k, err := tls13.GenerateECHKey(id, echTestPublicName+"x", echMaxNameLength, nil)
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	list, err := tls13.MarshalECHConfigList(ks)
	if err != nil {
		t.Fatal(err)
	}
	o := HTTPSOptions{ALPN: []string{"h2"}, TurboUDPPort: 8443, IPv4Hint: []net.IP{net.IPv4(192, 0, 2, 7)}, ECH: list}
	largest := 0
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
		rr, err := ServiceHTTPSRecord(testHost, testPort, fx.svc.HTTPSRecords(at), at, 5*time.Minute, o)
		if err != nil {
			t.Fatal(err)
		}
		n, err := AnswerSize(rr)
		if err != nil {
			t.Fatal(err)
		}
		largest = max(largest, n)
		var got []byte
		for _, kv := range rr.Value {
			if e, ok := kv.(*dns.SVCBECHConfig); ok {
				got = e.ECH
			}
		}
		if string(got) != string(list) {
			t.Fatal("the ech SvcParam does not carry the ECHConfigList")
		}
	}
	t.Logf("largest HTTPS answer with two ECH configs: %d bytes", largest)
	if largest > 1232 {
		t.Fatalf("largest HTTPS answer %d bytes > 1232", largest)
	}
}

// TestMergeHTTPSECHManaged: the operator's ech is replaced by the
// directory's when the directory publishes ECH keys, and kept otherwise.
func TestMergeHTTPSECHManaged(t *testing.T) {
	owner := HTTPSOwner(testHost, testPort)
	base := &dns.HTTPS{SVCB: dns.SVCB{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: 300},
		Priority: 1, Target: ".", Value: []dns.SVCBKeyValue{&dns.SVCBAlpn{Alpn: []string{"h2"}}, &dns.SVCBECHConfig{ECH: []byte("operator")}}}}
	own, err := ServiceHTTPSRecord(testHost, testPort, nil, clock.Now(), time.Minute, HTTPSOptions{ECH: []byte("ours")})
	if err != nil {
		t.Fatal(err)
	}
	merged, _ := MergeHTTPS([]dns.RR{base}, own, DefaultSvcParamKey)
	if len(merged) != 1 {
		t.Fatalf("%d RRs", len(merged))
	}
	var echs []string
	for _, kv := range merged[0].(*dns.HTTPS).Value {
		if e, ok := kv.(*dns.SVCBECHConfig); ok {
			echs = append(echs, string(e.ECH))
		}
	}
	if len(echs) != 1 || echs[0] != "ours" {
		t.Fatalf("merged ech %q, want the directory's alone", echs)
	}
	without, err := ServiceHTTPSRecord(testHost, testPort, nil, clock.Now(), time.Minute, HTTPSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	merged, _ = MergeHTTPS([]dns.RR{base}, without, DefaultSvcParamKey)
	for _, kv := range merged[0].(*dns.HTTPS).Value {
		if e, ok := kv.(*dns.SVCBECHConfig); ok && string(e.ECH) != "operator" {
			t.Fatalf("ech %q, want the operator's kept", e.ECH)
		}
	}
}
