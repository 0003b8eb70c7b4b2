package wire

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"

	"golang.org/x/crypto/cryptobyte"
)

// node is one write of a random structure: a value or a length-prefixed
// vector of further writes.
type node struct {
	kind   int // 0 bytes, 1..5 uint8/16/24/32/64, 6..8 prefix of 1/2/3 bytes
	val    uint64
	data   []byte
	inside []node
}

func randNodes(r *rand.Rand, depth int) []node {
	out := make([]node, r.IntN(5))
	for i := range out {
		k := r.IntN(9)
		if depth == 0 && k >= 6 {
			k = 0
		}
		n := node{kind: k, val: r.Uint64()}
		switch {
		case k == 0:
			n.data = make([]byte, r.IntN(40))
			for j := range n.data {
				n.data[j] = byte(r.Uint32())
			}
		case k >= 6:
			n.inside = randNodes(r, depth-1)
		}
		out[i] = n
	}
	return out
}

func buildWire(b *Builder, ns []node) {
	for _, n := range ns {
		switch n.kind {
		case 0:
			b.AddBytes(n.data)
		case 1:
			b.AddUint8(uint8(n.val))
		case 2:
			b.AddUint16(uint16(n.val))
		case 3:
			b.AddUint24(uint32(n.val) & 0xffffff)
		case 4:
			b.AddUint32(uint32(n.val))
		case 5:
			b.AddUint64(n.val)
		case 6:
			b.AddUint8LengthPrefixed(func(b *Builder) { buildWire(b, n.inside) })
		case 7:
			b.AddUint16LengthPrefixed(func(b *Builder) { buildWire(b, n.inside) })
		case 8:
			b.AddUint24LengthPrefixed(func(b *Builder) { buildWire(b, n.inside) })
		}
	}
}

func buildCryptobyte(b *cryptobyte.Builder, ns []node) {
	for _, n := range ns {
		switch n.kind {
		case 0:
			b.AddBytes(n.data)
		case 1:
			b.AddUint8(uint8(n.val))
		case 2:
			b.AddUint16(uint16(n.val))
		case 3:
			b.AddUint24(uint32(n.val) & 0xffffff)
		case 4:
			b.AddUint32(uint32(n.val))
		case 5:
			b.AddUint64(n.val)
		case 6:
			b.AddUint8LengthPrefixed(func(b *cryptobyte.Builder) { buildCryptobyte(b, n.inside) })
		case 7:
			b.AddUint16LengthPrefixed(func(b *cryptobyte.Builder) { buildCryptobyte(b, n.inside) })
		case 8:
			b.AddUint24LengthPrefixed(func(b *cryptobyte.Builder) { buildCryptobyte(b, n.inside) })
		}
	}
}

// Builder writes exactly what cryptobyte.Builder writes for the same
// calls, nested length prefixes of every width included.
func TestBuilderMatchesCryptobyte(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 2000 {
		ns := randNodes(r, 4)
		var cb cryptobyte.Builder
		buildCryptobyte(&cb, ns)
		want, werr := cb.Bytes()
		prefix := []byte{0xaa}
		b := NewBuilder(append([]byte(nil), prefix...))
		buildWire(b, ns)
		got, err := b.Bytes()
		if (err != nil) != (werr != nil) {
			t.Fatalf("case %d: error %v, cryptobyte %v", i, err, werr)
		}
		if err == nil && !bytes.Equal(got, append(prefix, want...)) {
			t.Fatalf("case %d:\n got %x\nwant %x", i, got, want)
		}
	}
}

// Contents too long for their prefix, and SetError, are errors that stick:
// nothing written afterwards, Bytes reports the first.
func TestBuilderErrors(t *testing.T) {
	var b Builder
	b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(make([]byte, 256)) })
	if _, err := b.Bytes(); err == nil {
		t.Fatal("256 bytes fitted a 1-byte length prefix")
	}
	var ok Builder
	ok.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(make([]byte, 255)) })
	if out, err := ok.Bytes(); err != nil || len(out) != 256 || out[0] != 255 {
		t.Fatalf("255 bytes: %d bytes, %v", len(out), err)
	}
	first, second := errors.New("first"), errors.New("second")
	var s Builder
	s.AddUint16(1)
	s.AddUint16LengthPrefixed(func(b *Builder) {
		b.AddUint8(2)
		b.SetError(first)
		b.AddUint8(3)
	})
	s.SetError(second)
	s.AddUint32(4)
	if _, err := s.Bytes(); err != first {
		t.Fatalf("error %v, want the first", err)
	}
	if len(s.buf) != 5 {
		t.Fatalf("%d bytes written, want the 5 before the error", len(s.buf))
	}
}
