package ech

import (
	"bytes"
	"testing"
)

func TestCompressibleRunIsConsecutive(t *testing.T) {
	x := extension{typ: 0x1111, data: []byte{1}}
	inner := hello(t, nil, sni(innerName), groups, keyShare, x, versions, innerECH)
	outer := hello(t, nil, sni(publicName), groups, keyShare, versions, outerECHEx)
	got, err := Compressible(inner, outer)
	if err != nil {
		t.Fatal(err)
	}
	// groups and key_share run together; versions is shared too but after
	// an extension the outer lacks, so it is left in the inner.
	if len(got) != 2 || got[0] != groups.typ || got[1] != keyShare.typ {
		t.Fatalf("compressible %v, want [10 51]", got)
	}
	enc, err := EncodeInner(inner, got, 32)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeInner(enc, outer)
	if err != nil || !bytes.Equal(back, inner) {
		t.Fatalf("the inner does not survive compression: %v", err)
	}
}

func TestOuterAAD(t *testing.T) {
	outer := hello(t, nil, sni(publicName), groups, outerECHEx, versions)
	aad, at, ext, err := OuterAAD(outer)
	if err != nil {
		t.Fatal(err)
	}
	if ext.ConfigID != 1 || len(ext.Payload) != 1 || outer[at] != ext.Payload[0] || aad[at] != 0 {
		t.Fatalf("payload at %d: %+v", at, ext)
	}
	aad[at] = outer[at]
	if !bytes.Equal(aad, outer) {
		t.Fatal("the AAD differs from the outer beyond the payload")
	}
	if _, _, _, err := OuterAAD(hello(t, nil, innerECH)); err != ErrIllegal {
		t.Fatalf("inner type: %v, want ErrIllegal", err)
	}
}

func FuzzOuterAAD(f *testing.F) {
	f.Add(hello(f, nil, sni(publicName), groups, outerECHEx, versions))
	f.Fuzz(func(t *testing.T, body []byte) {
		aad, at, ext, err := OuterAAD(body)
		if err != nil {
			return
		}
		if len(aad) != len(body) || at+len(ext.Payload) > len(body) || !bytes.Equal(body[at:at+len(ext.Payload)], ext.Payload) {
			t.Fatalf("payload not where OuterAAD says (%d)", at)
		}
	})
}

func FuzzCompressible(f *testing.F) {
	f.Add(hello(f, nil, sni(innerName), groups, keyShare, innerECH), hello(f, nil, sni(publicName), groups, keyShare, outerECHEx))
	f.Fuzz(func(t *testing.T, inner, outer []byte) {
		refs, err := Compressible(inner, outer)
		if err != nil || len(refs) == 0 {
			return
		}
		enc, err := EncodeInner(inner, refs, 0)
		if err != nil {
			return // not an inner (no inner extension, trailing bytes)
		}
		in, _ := parseHelloBody(inner)
		out, _ := parseHelloBody(outer)
		if !bytes.Equal(in.sessionID, out.sessionID) {
			return // the inner takes the outer's legacy_session_id back
		}
		back, err := DecodeInner(enc, outer)
		if err != nil || !bytes.Equal(back, inner) {
			t.Fatalf("compressing %v does not round-trip: %v", refs, err)
		}
	})
}
