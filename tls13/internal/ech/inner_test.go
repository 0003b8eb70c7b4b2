package ech

import (
	"bytes"
	"errors"
	"testing"
)

// hello builds a ClientHello body with the given extensions.
func hello(t testing.TB, sid []byte, exts ...extension) []byte {
	t.Helper()
	h := &helloBody{version: 0x0303, random: bytes.Repeat([]byte{7}, 32), suites: []byte{0x13, 0x01}, comp: []byte{0}}
	b, err := h.marshal(sid, exts, 0)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sni(name string) extension {
	n := len(name)
	return extension{typ: extServerName, data: append([]byte{byte((n + 3) >> 8), byte(n + 3), 0, byte(n >> 8), byte(n)}, name...)}
}

var (
	innerECH   = extension{typ: ExtEncryptedClientHello, data: []byte{TypeInner}}
	groups     = extension{typ: 10, data: []byte{0, 2, 0, 0x1d}}
	keyShare   = extension{typ: 51, data: bytes.Repeat([]byte{1}, 38)}
	versions   = extension{typ: 43, data: []byte{2, 3, 4}}
	outerECHEx = extension{typ: ExtEncryptedClientHello, data: []byte{0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0}}
)

func TestEncodeDecodeInner(t *testing.T) {
	sid := bytes.Repeat([]byte{9}, 32)
	inner := hello(t, sid, sni(innerName), groups, keyShare, versions, innerECH)
	outer := hello(t, sid, sni(publicName), groups, keyShare, versions, outerECHEx)
	encoded, err := EncodeInner(inner, []uint16{groups.typ, keyShare.typ}, 64)
	if err != nil {
		t.Fatal(err)
	}
	if len(encoded)%32 != 0 {
		t.Fatalf("encoded inner of %d bytes, want a multiple of 32", len(encoded))
	}
	if len(encoded) >= len(inner)+64 {
		t.Fatalf("compression saved nothing: %d bytes from %d", len(encoded), len(inner))
	}
	got, err := DecodeInner(encoded, outer)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, inner) {
		t.Fatalf("decoded inner differs:\n%x\n%x", got, inner)
	}
}

// The padding hides the name's length: inners for names of different
// lengths up to the maximum encode to the same size.
func TestPaddingHidesNameLength(t *testing.T) {
	size := -1
	for _, name := range []string{"a.test", "a-much-longer-name.example.test", "x.y"} {
		inner := hello(t, nil, sni(name), groups, innerECH)
		enc, err := EncodeInner(inner, nil, 64)
		if err != nil {
			t.Fatal(err)
		}
		if size >= 0 && len(enc) != size {
			t.Fatalf("%q: %d bytes, another name gave %d", name, len(enc), size)
		}
		size = len(enc)
	}
}

func TestDecodeInnerRefuses(t *testing.T) {
	outer := hello(t, nil, sni(publicName), groups, keyShare, versions, outerECHEx)
	ref := func(types ...uint16) extension {
		return extension{typ: ExtOuterExtensions, data: outerExtensionsBody(types)}
	}
	cases := map[string][]byte{
		"no inner ech":         hello(t, nil, sni(innerName), ref(groups.typ)),
		"session id":           hello(t, []byte{1}, sni(innerName), innerECH),
		"references ech":       hello(t, nil, ref(ExtEncryptedClientHello), innerECH),
		"references missing":   hello(t, nil, ref(0x7777), innerECH),
		"referenced twice":     hello(t, nil, ref(groups.typ, groups.typ), innerECH),
		"two outer extensions": hello(t, nil, ref(groups.typ), extension{typ: 0x1111}, innerECH, ref(keyShare.typ)),
		"duplicate":            hello(t, nil, groups, ref(groups.typ), innerECH),
		"empty reference list": hello(t, nil, extension{typ: ExtOuterExtensions, data: []byte{0}}, innerECH),
		"non-zero padding":     append(hello(t, nil, sni(innerName), innerECH), 0, 0, 1),
		"garbage":              {1, 2, 3},
	}
	for name, encoded := range cases {
		if _, err := DecodeInner(encoded, outer); !errors.Is(err, ErrInnerIllegal) {
			t.Errorf("%s: %v, want ErrInnerIllegal", name, err)
		}
	}
}

func TestEncodeInnerRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		inner    []byte
		compress []uint16
	}{
		"no inner ech":     {hello(t, nil, sni(innerName)), nil},
		"compress ech":     {hello(t, nil, innerECH), []uint16{ExtEncryptedClientHello}},
		"compress missing": {hello(t, nil, innerECH), []uint16{groups.typ}},
	} {
		if _, err := EncodeInner(c.inner, c.compress, 32); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

// References out of the outer's order decode (Go's client sends them so
// after a HelloRetryRequest); the inner keeps the order it names.
func TestDecodeInnerOutOfOrder(t *testing.T) {
	outer := hello(t, nil, sni(publicName), groups, keyShare, versions, outerECHEx)
	ref := extension{typ: ExtOuterExtensions, data: outerExtensionsBody([]uint16{keyShare.typ, groups.typ})}
	got, err := DecodeInner(hello(t, nil, ref, innerECH), outer)
	if err != nil {
		t.Fatal(err)
	}
	if want := hello(t, nil, keyShare, groups, innerECH); !bytes.Equal(got, want) {
		t.Fatalf("decoded %x, want %x", got, want)
	}
}
