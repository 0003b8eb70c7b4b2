package ech

import (
	"bytes"
	"testing"
)

func FuzzParseConfigList(f *testing.F) {
	k := mustKey(f, 1, publicName)
	list, _ := MarshalConfigList([]*Config{k.Config})
	f.Add(list)
	f.Add([]byte{0, 7, 0xfe, 0x0e, 0, 3, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		cs, err := ParseConfigList(b)
		if err != nil {
			return
		}
		for _, c := range cs {
			again, err := ParseConfig(c.Raw)
			if err != nil {
				t.Fatalf("a config from the list does not parse alone: %v", err)
			}
			if c.Usable() == nil {
				if _, err := NewClientContext(again); err != nil {
					t.Fatalf("usable config, no HPKE context: %v", err)
				}
			}
		}
	})
}

func FuzzParseClientExtension(f *testing.F) {
	e := &ClientExtension{Type: TypeOuter, Suite: Suite{1, 1}, ConfigID: 9, Enc: make([]byte, 32), Payload: []byte{3}}
	b, _ := e.Marshal()
	f.Add(b)
	f.Add([]byte{TypeInner})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseClientExtension(b)
		if err != nil {
			return
		}
		again, err := e.Marshal()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs: %x from %x (%v)", again, b, err)
		}
	})
}

func FuzzDecodeInner(f *testing.F) {
	outer := hello(f, nil, sni(publicName), groups, keyShare, versions, outerECHEx)
	inner := hello(f, nil, sni(innerName), groups, keyShare, innerECH)
	enc, _ := EncodeInner(inner, []uint16{groups.typ, keyShare.typ}, 32)
	f.Add(enc, outer)
	f.Fuzz(func(t *testing.T, encoded, outer []byte) {
		got, err := DecodeInner(encoded, outer)
		if err != nil {
			return
		}
		h, err := parseHelloBody(got)
		if err != nil || len(h.trailing) != 0 {
			t.Fatalf("decoded inner does not parse cleanly: %v", err)
		}
		if _, ok := h.ext(ExtOuterExtensions); ok {
			t.Fatal("decoded inner still has ech_outer_extensions")
		}
	})
}
