package wire

import (
	"encoding/binary"
	"fmt"
)

// Builder writes TLS structures the way cryptobyte.Builder does, with the
// same method names, closures for length prefixes included, but into one
// buffer: a length-prefixed vector reserves its prefix, the closure writes
// the contents after it, and the prefix is filled in once their length is
// known. cryptobyte allocates a child Builder for every length prefix
// (about seventy per handshake pair); a Builder allocates only its buffer
// as it grows.
//
// The first error (SetError, or contents too long for their prefix)
// sticks: later writes do nothing and Bytes returns it. The zero value is
// ready to use; NewBuilder starts from a buffer of the caller's. A Builder
// is not safe for concurrent use.
type Builder struct {
	buf []byte
	err error
}

// NewBuilder returns a Builder that appends to buf.
func NewBuilder(buf []byte) *Builder { return &Builder{buf: buf} }

// Bytes returns what was written, or the first error.
func (b *Builder) Bytes() ([]byte, error) {
	if b.err != nil {
		return nil, b.err
	}
	return b.buf, nil
}

// SetError makes err the Builder's error unless it already has one.
func (b *Builder) SetError(err error) {
	if b.err == nil {
		b.err = err
	}
}

// AddUint8 appends a byte.
func (b *Builder) AddUint8(v uint8) {
	if b.err == nil {
		b.buf = append(b.buf, v)
	}
}

// AddUint16 appends a big-endian uint16.
func (b *Builder) AddUint16(v uint16) {
	if b.err == nil {
		b.buf = append(b.buf, byte(v>>8), byte(v))
	}
}

// AddUint24 appends the low 24 bits of v, big-endian.
func (b *Builder) AddUint24(v uint32) {
	if b.err == nil {
		b.buf = append(b.buf, byte(v>>16), byte(v>>8), byte(v))
	}
}

// AddUint32 appends a big-endian uint32.
func (b *Builder) AddUint32(v uint32) {
	if b.err == nil {
		b.buf = append(b.buf, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
	}
}

// AddUint64 appends a big-endian uint64.
func (b *Builder) AddUint64(v uint64) {
	if b.err == nil {
		b.buf = binary.BigEndian.AppendUint64(b.buf, v)
	}
}

// AddBytes appends v.
func (b *Builder) AddBytes(v []byte) {
	if b.err == nil {
		b.buf = append(b.buf, v...)
	}
}

// AddUint8LengthPrefixed writes what f writes as an opaque<0..2^8-1> vector.
func (b *Builder) AddUint8LengthPrefixed(f func(*Builder)) { b.addLengthPrefixed(1, f) }

// AddUint16LengthPrefixed writes what f writes as a <0..2^16-1> vector.
func (b *Builder) AddUint16LengthPrefixed(f func(*Builder)) { b.addLengthPrefixed(2, f) }

// AddUint24LengthPrefixed writes what f writes as a <0..2^24-1> vector.
func (b *Builder) AddUint24LengthPrefixed(f func(*Builder)) { b.addLengthPrefixed(3, f) }

func (b *Builder) addLengthPrefixed(prefix int, f func(*Builder)) {
	if b.err != nil {
		return
	}
	start := len(b.buf)
	b.buf = append(b.buf, make([]byte, prefix)...)
	f(b)
	if b.err != nil {
		return
	}
	n := len(b.buf) - start - prefix
	if n >= 1<<(8*prefix) {
		b.err = fmt.Errorf("wire: %d bytes do not fit a %d-byte length prefix", n, prefix)
		return
	}
	for i := prefix - 1; i >= 0; i-- {
		b.buf[start+i] = byte(n)
		n >>= 8
	}
}
