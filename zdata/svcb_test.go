package zdata

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// svcProfile is one profile the HTTPS record must carry: a leaf key
// type, a group, and the record version (v2 with or without bfe=).
type svcProfile struct {
	leaf  string
	group tls13.CurveID
	v2    bool
	bfe   bool
}

func (p svcProfile) String() string {
	v := "v1"
	if p.v2 {
		v = "v2"
		if p.bfe {
			v += "+bfe"
		}
	}
	return p.leaf + "/" + p.group.String() + "/" + v
}

// svcProfiles lists every leaf key type SchemeFor takes, with both
// groups, as v1, v2 and v2 with bfe=.
func svcProfiles() []svcProfile {
	var out []svcProfile
	for _, leaf := range []string{"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa2048"} {
		for _, g := range []tls13.CurveID{GroupX25519, GroupSecp256r1} {
			out = append(out, svcProfile{leaf, g, false, false}, svcProfile{leaf, g, true, false}, svcProfile{leaf, g, true, true})
		}
	}
	return out
}

// testBFEKey is a small BFE public key (8 connections at p = 1/4: the
// same 111 bytes as any other key, made fast).
func testBFEKey(tb testing.TB) []byte {
	tb.Helper()
	params, err := bfe.NewParams(8, 1.0/4)
	if err != nil {
		tb.Fatal(err)
	}
	pk, err := bfe.GenerateKey(context.Background(), filepath.Join(tb.TempDir(), "k.bfe"), bfe.KeyGenConfig{Params: params})
	if err != nil {
		tb.Fatal(err)
	}
	return pk.Bytes()
}

// svcRecord signs a record of profile p with fx's leaf.
func svcRecord(tb testing.TB, fx *fixture, p svcProfile, bfeKey []byte, nb time.Time) *Record {
	tb.Helper()
	r := fx.issue(tb, nb).Record.Clone()
	if p.v2 {
		r.pub, r.V2 = nil, true
		if p.bfe {
			r.BFE = bfeKey
		}
		if err := r.Sign(fx.leaf.Key, fx.leaf.Chain[0]); err != nil {
			tb.Fatal(err)
		}
	}
	return r
}

// published returns r as a client reads it: no service, no leaf hash.
func unbound(r *Record) *Record {
	c := r.Clone()
	c.Host, c.Port, c.LeafHash, c.pub = "", 0, [32]byte{}, nil
	return c
}

func TestSvcParamRoundTrip(t *testing.T) {
	bfeKey := testBFEKey(t)
	fixtures := map[string]*fixture{}
	nb := clock.Now().Truncate(time.Second).UTC()
	for _, p := range svcProfiles() {
		t.Run(p.String(), func(t *testing.T) {
			fx := fixtures[p.leaf+p.group.String()]
			if fx == nil {
				fx = newFixture(t, p.leaf, Options{Group: p.group, ALPN: "h2", NSC: []uint16{0x1303}}, nil)
				fixtures[p.leaf+p.group.String()] = fx
			}
			r := svcRecord(t, fx, p, bfeKey, nb)
			b, err := MarshalSvcParam([]*Record{r})
			if err != nil {
				t.Fatal(err)
			}
			got, err := ParseSvcParam(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 {
				t.Fatalf("%d records, want 1", len(got))
			}
			g := got[0]
			if !reflect.DeepEqual(unbound(g), unbound(r)) {
				t.Fatalf("round trip changed the record:\n got %+v\nwant %+v", g, r)
			}
			if !reflect.DeepEqual(g.TXT(), r.TXT()) {
				t.Fatalf("TXT of the parsed record differs:\n got %q\nwant %q", g.TXT(), r.TXT())
			}
			// The same signature path as the TXT record: Verify, and the
			// Selector fed the record's TXT strings.
			if err := g.Verify(fx.leaf.Cert, testHost, testPort); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if g.ZDataHash() != r.ZDataHash() {
				t.Fatal("zdata_hash differs from the TXT record's: the server would not know the record")
			}
			rec, _, err := selectOne([][]string{got[0].TXT()}, fx.tlsa(), fx.certs(), testHost, testPort, fx.roots(), nb.Add(time.Second))
			if err != nil {
				t.Fatalf("Select: %v", err)
			}
			if rec.ZDataHash() != r.ZDataHash() {
				t.Fatal("Select picked another record")
			}
		})
	}
}

// TestSvcParamRotation carries the current and the next period's
// records, v1 and v2 twins, in one value, in order.
func TestSvcParamRotation(t *testing.T) {
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	bfeKey := testBFEKey(t)
	nb := clock.Now().Truncate(time.Second).UTC()
	var recs []*Record
	for _, start := range []time.Time{nb, nb.Add(MaxValidity)} {
		recs = append(recs, svcRecord(t, fx, svcProfile{v2: false}, nil, start), svcRecord(t, fx, svcProfile{v2: true, bfe: true}, bfeKey, start))
	}
	b, err := MarshalSvcParam(recs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSvcParam(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range recs {
		if err := got[i].Verify(fx.leaf.Cert, testHost, testPort); err != nil {
			t.Fatalf("record %d: %v", i+1, err)
		}
		if got[i].ZDataHash() != recs[i].ZDataHash() {
			t.Fatalf("record %d changed", i+1)
		}
	}
	if _, err := MarshalSvcParam(append(recs, recs[0])); err == nil {
		t.Fatal("five records marshaled")
	}
	if _, err := MarshalSvcParam(nil); err == nil {
		t.Fatal("no record marshaled")
	}
}

// TestSvcParamTampered changes every byte of a v1 and a v2 record with
// bfe= in turn: each change is refused by the parser or the signature.
func TestSvcParamTampered(t *testing.T) {
	fx := newFixture(t, "ecdsa-p256", Options{ALPN: "h2", NSC: []uint16{0x1303}}, nil)
	bfeKey := testBFEKey(t)
	nb := clock.Now().Truncate(time.Second).UTC()
	for _, p := range []svcProfile{{v2: false}, {v2: true, bfe: true}} {
		r := svcRecord(t, fx, p, bfeKey, nb)
		b, err := MarshalSvcParam([]*Record{r})
		if err != nil {
			t.Fatal(err)
		}
		for i := range b {
			for _, mask := range []byte{0x01, 0x80} {
				m := bytes.Clone(b)
				m[i] ^= mask
				got, err := ParseSvcParam(m)
				if err == nil {
					err = got[0].Verify(fx.leaf.Cert, testHost, testPort)
				}
				if err == nil {
					t.Fatalf("%v: byte %d ^ %#x accepted", p, i, mask)
				}
			}
		}
	}
}

// TestSvcParamCopied: a record verifies only for the host and port it
// was signed for, whatever HTTPS record carries it.
func TestSvcParamCopied(t *testing.T) {
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	r := svcRecord(t, fx, svcProfile{}, nil, clock.Now().Truncate(time.Second))
	b, err := MarshalSvcParam([]*Record{r})
	if err != nil {
		t.Fatal(err)
	}
	for _, svc := range []struct {
		host string
		port int
	}{{"other.test", testPort}, {testHost, 8443}, {"other.test", 8443}} {
		got, err := ParseSvcParam(b)
		if err != nil {
			t.Fatal(err)
		}
		err = got[0].Verify(fx.leaf.Cert, svc.host, svc.port)
		if ReasonOf(err) != ReasonBadSignature {
			t.Errorf("%s:%d: %v, want %q", svc.host, svc.port, err, ReasonBadSignature)
		}
	}
}

// TestSvcParamStrict refuses malformed values with an error naming the
// field, and no strict prefix of a good value parses.
func TestSvcParamStrict(t *testing.T) {
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	r := svcRecord(t, fx, svcProfile{}, nil, clock.Now().Truncate(time.Second))
	good, err := MarshalSvcParam([]*Record{r})
	if err != nil {
		t.Fatal(err)
	}
	entry := good[2:]
	withEntry := func(e []byte) []byte {
		return append(binary.BigEndian.AppendUint16(nil, uint16(len(e))), e...)
	}
	edit := func(f func(e []byte) []byte) []byte { return withEntry(f(bytes.Clone(entry))) }
	const shareAt = 1 + 1 + 4*4 + 2 // the key_share length byte
	nscAt := shareAt + 1 + 32
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty value"},
		{"trailing byte", string(append(bytes.Clone(good), 0)), "entry length: 1 byte left"},
		{"trailing entry bytes", string(edit(func(e []byte) []byte { return append(e, 0) })), "1 bytes after the signature"},
		{"entry past the end", string(good[:len(good)-1]), "entry length"},
		{"version 3", string(edit(func(e []byte) []byte { e[0] = 3; return e })), "version: 3 unknown"},
		{"version 0", string(edit(func(e []byte) []byte { e[0] = 0; return e })), "version: 0 unknown"},
		{"flag bits", string(edit(func(e []byte) []byte { e[1] = 0x02; return e })), "flags: unknown bits 0x02"},
		{"share length", string(edit(func(e []byte) []byte {
			return append(append(e[:shareAt:shareAt], 31), e[shareAt+2:]...)
		})), "key_share: 31 bytes"},
		{"odd nsc", string(edit(func(e []byte) []byte {
			return append(append(e[:nscAt:nscAt], 1, 0x13), e[nscAt+1:]...)
		})), "nsc: odd length 1"},
		{"bad alpn", string(edit(func(e []byte) []byte {
			return append(append(e[:nscAt+1:nscAt+1], 3, 'h', ',', '2'), e[nscAt+2:]...)
		})), "alpn: byte 0x2c not allowed"},
		{"five entries", string(bytes.Repeat(good, 5)), "more than 4 records"},
	} {
		_, err := ParseSvcParam([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) || ReasonOf(err) != ReasonMalformed {
			t.Errorf("%s: %v, want a malformed-Z-data error containing %q", tc.name, err, tc.want)
		}
	}
	for i := range len(good) {
		if _, err := ParseSvcParam(good[:i]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", i)
		}
	}
	// A v1 record with a bfe byte is a v1 record with trailing bytes.
	v1bfe := edit(func(e []byte) []byte {
		at := nscAt + 2
		return append(append(e[:at:at], 0), e[at:]...)
	})
	if _, err := ParseSvcParam(v1bfe); err == nil {
		t.Error("v1 record with a bfe field parsed")
	}
}

// TestSvcParamNonCanonicalRefused: a TXT record signed over another
// spelling cannot travel in the binary form (its signature is over other
// text), and MarshalSvcParam says so.
func TestSvcParamNonCanonicalRefused(t *testing.T) {
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	r := svcRecord(t, fx, svcProfile{}, nil, clock.Now().Truncate(time.Second))
	txt := r.TXT()
	txt[1] = strings.ToLower(txt[1]) // a lower-case z
	p, err := ParseTXT(txt)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MarshalSvcParam([]*Record{p}); err == nil || !strings.Contains(err.Error(), "non-canonical") {
		t.Fatalf("MarshalSvcParam: %v, want a non-canonical error", err)
	}
	p, _ = ParseTXT(r.TXT())
	if _, err := MarshalSvcParam([]*Record{p}); err != nil {
		t.Fatalf("canonical TXT record: %v", err)
	}
}

func TestRecordsFromSVCB(t *testing.T) {
	fx := newFixture(t, "ecdsa-p256", Options{}, nil)
	r := svcRecord(t, fx, svcProfile{}, nil, clock.Now().Truncate(time.Second))
	kv, err := SvcParam(0, []*Record{r})
	if err != nil {
		t.Fatal(err)
	}
	svc := &dns.SVCB{Priority: 1, Target: ".", Value: []dns.SVCBKeyValue{&dns.SVCBAlpn{Alpn: []string{"h2"}}, kv}}
	got, err := RecordsFromSVCB(svc, 0)
	if err != nil || len(got) != 1 || !reflect.DeepEqual(unbound(got[0]), unbound(r)) {
		t.Fatalf("RecordsFromSVCB: %v", err)
	}
	if _, err := RecordsFromSVCB(svc, 65371); !errors.Is(err, ErrNoSvcParam) {
		t.Errorf("another key: %v, want ErrNoSvcParam", err)
	}
	alias := &dns.SVCB{Priority: 0, Target: "svc.example.net.", Value: svc.Value}
	if _, err := RecordsFromSVCB(alias, 0); !errors.Is(err, ErrNoSvcParam) {
		t.Errorf("AliasMode: %v, want ErrNoSvcParam (RFC 9460, Section 2.4.2)", err)
	}
	// The presentation form survives a zone file and parses back.
	h := &dns.HTTPS{SVCB: *svc}
	h.Hdr = dns.RR_Header{Name: "server.test.", Rrtype: dns.TypeHTTPS, Class: dns.ClassINET, Ttl: 60}
	back, err := dns.NewRR(h.String())
	if err != nil {
		t.Fatalf("zone form %q: %v", h.String(), err)
	}
	if got, err := RecordsFromSVCB(&back.(*dns.HTTPS).SVCB, 0); err != nil || !reflect.DeepEqual(unbound(got[0]), unbound(r)) {
		t.Fatalf("after the zone form: %v", err)
	}
}

// FuzzSvcParam feeds ParseSvcParam arbitrary bytes: what parses must
// marshal back to the same bytes (the encoding has one form), and every
// error is the package's.
func FuzzSvcParam(f *testing.F) {
	fx := newFixture(f, "ecdsa-p256", Options{ALPN: "h2", NSC: []uint16{0x1303}}, nil)
	nb := clock.Now().Truncate(time.Second).UTC()
	v1 := svcRecord(f, fx, svcProfile{}, nil, nb)
	v2 := svcRecord(f, fx, svcProfile{v2: true, bfe: true}, testBFEKey(f), nb)
	for _, recs := range [][]*Record{{v1}, {v2}, {v1, v2}, {v1, v2, v1, v2}} {
		b, err := MarshalSvcParam(recs)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0, 1, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		recs, err := ParseSvcParam(in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "zdata: ") {
				t.Fatalf("unprefixed error %v", err)
			}
			return
		}
		out, err := MarshalSvcParam(recs)
		if err != nil {
			t.Fatalf("parsed but does not marshal: %v", err)
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("marshal changed the bytes:\n in %x\nout %x", in, out)
		}
	})
}
