package zdata

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/bfe"
)

// FuzzParseTXT feeds ParseTXT character-strings separated by NUL bytes.
// Whatever parses must survive TXT() and parse to the same record.
func FuzzParseTXT(f *testing.F) {
	fx := newFixture(f, "ecdsa-p256", Options{NSC: []uint16{0x1303}, ALPN: "h2"}, nil)
	k := fx.issue(f, time.Unix(1_800_000_000, 0))
	s := k.Record.TXT()
	f.Add(strings.Join(s, "\x00"))
	f.Add(strings.Join(append([]string{"  v=ztls1 "}, s[1:]...), "\x00"))
	f.Add(strings.Join(append(append([]string(nil), s[:7]...), s[9:]...), "\x00"))
	f.Add("v=ztls1\x0020250101000000z\x0020250101010000Z\x000\x001\x0023\x00AAAA\x00Y\x002055\x00AA==")
	// v2 records (docs/ztls-spec.md, Section 7.1): with bfe=, and without.
	v2 := v2Twin(f, fx, k.Record)
	f.Add(strings.Join(v2.TXT(), "\x00"))
	v2.BFE = nil
	f.Add(strings.Join(v2.TXT(), "\x00"))
	// v3 records (docs/ztls-spec.md, Section 9.2): the share over seven
	// strings, and re-split over eight.
	pq := newFixture(f, "ecdsa-p256", Options{Group: GroupX25519MLKEM768}, nil).issue(f, time.Unix(1_800_000_000, 0))
	v3 := pq.Record.TXT()
	f.Add(strings.Join(v3, "\x00"))
	f.Add(strings.Join(append(append(append([]string(nil), v3[:6]...), v3[6][:100], v3[6][100:]), v3[7:]...), "\x00"))
	f.Add("v=spf1 -all")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		strs := strings.Split(in, "\x00")
		r, err := ParseTXT(strs)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "zdata: ") {
				t.Fatalf("unprefixed error %v", err)
			}
			return
		}
		out := r.TXT()
		r2, err := ParseTXT(out)
		if err != nil {
			t.Fatalf("TXT() of a parsed record does not parse: %v\n%q", err, out)
		}
		if !reflect.DeepEqual(r2.TXT(), out) {
			t.Fatalf("TXT() not stable:\n%q\n%q", out, r2.TXT())
		}
		a, b := r.Clone(), r2.Clone()
		a.pub, b.pub = nil, nil
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("round trip changed the record:\n%+v\n%+v", a, b)
		}
		if string(r.SignatureInput("h.test", 1)) != string(r2.SignatureInput("h.test", 1)) {
			t.Fatal("round trip changed the signature input")
		}
		_ = r.CheckValidity(time.Unix(1_800_000_000, 0))
		_ = ValidateShare(r.Group, r.KeyShare)
	})
}

// FuzzParseKey feeds ParseKey arbitrary key files.
func FuzzParseKey(f *testing.F) {
	fx := newFixture(f, "ecdsa-p256", Options{}, nil)
	k := fx.issue(f, time.Unix(1_800_000_000, 0))
	b, err := MarshalKey(k)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// A key with its v2 twin (docs/ztls-spec.md, Section 7.1).
	twin := v2Twin(f, fx, k.Record)
	if b, err = MarshalKey(&Key{Record: k.Record, Private: k.Private, BFE: &BFEKey{Record: twin}}); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// A post-quantum key (docs/ztls-spec.md, Section 9).
	pq := newFixture(f, "ecdsa-p256", Options{Group: GroupX25519MLKEM768}, nil).issue(f, time.Unix(1_800_000_000, 0))
	if b, err = MarshalKey(pq); err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte(`{"host":"a.test","port":443,"txt":["v=ztls1"],"leaf_sha256":"","private_key":""}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		k, err := ParseKey(data)
		if err != nil {
			return
		}
		b, err := MarshalKey(k)
		if err != nil {
			t.Fatal(err)
		}
		k2, err := ParseKey(b)
		if err != nil {
			t.Fatalf("re-marshalled key does not parse: %v", err)
		}
		if k2.Record.ZDataHash() != k.Record.ZDataHash() || string(k2.privateBytes()) != string(k.privateBytes()) {
			t.Fatal("key changed in a round trip")
		}
		if (k.BFE == nil) != (k2.BFE == nil) || (k.BFE != nil && k.BFE.Record.ZDataHash() != k2.BFE.Record.ZDataHash()) {
			t.Fatal("twin changed in a round trip")
		}
	})
}

// v2Twin is r's v2 twin (docs/ztls-spec.md, Section 7.1) with a small
// BFE key, signed with fx's leaf: a seed for the parsers' fuzz targets.
func v2Twin(tb testing.TB, fx *fixture, r *Record) *Record {
	tb.Helper()
	params, err := bfe.NewParams(8, 1.0/4)
	if err != nil {
		tb.Fatal(err)
	}
	pk, err := bfe.GenerateKey(context.Background(), filepath.Join(tb.TempDir(), "k.bfe"), bfe.KeyGenConfig{Params: params})
	if err != nil {
		tb.Fatal(err)
	}
	twin := r.Clone()
	twin.pub, twin.V2, twin.BFE = nil, true, pk.Bytes()
	if err := twin.Sign(fx.leaf.Key, fx.leaf.Chain[0]); err != nil {
		tb.Fatal(err)
	}
	return twin
}
