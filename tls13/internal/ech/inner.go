package ech

import (
	"errors"
	"fmt"
	"slices"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// TagLen is the AEAD tag length of every suite this package runs: the
// payload is the EncodedClientHelloInner plus TagLen bytes.
const TagLen = 16

// extServerName is server_name (RFC 6066), whose length sets the padding.
const extServerName uint16 = 0

// helloBody is a ClientHello's body (without the handshake header), split
// into what ECH rewrites: the session id, and the extensions in order.
type helloBody struct {
	version   uint16
	random    []byte
	sessionID []byte
	suites    []byte
	comp      []byte
	exts      []extension
	trailing  []byte // after the extensions: the padding of an encoded inner
}

type extension struct {
	typ  uint16
	data []byte
}

func parseHelloBody(b []byte) (*helloBody, error) {
	s := cryptobyte.String(b)
	h := &helloBody{}
	var random, sid, suites, comp, exts cryptobyte.String
	if !s.ReadUint16(&h.version) || !s.ReadBytes((*[]byte)(&random), 32) ||
		!s.ReadUint8LengthPrefixed(&sid) || len(sid) > 32 ||
		!s.ReadUint16LengthPrefixed(&suites) || !s.ReadUint8LengthPrefixed(&comp) ||
		!s.ReadUint16LengthPrefixed(&exts) {
		return nil, errors.New("ech: malformed ClientHello")
	}
	h.random, h.sessionID, h.suites, h.comp = random, sid, suites, comp
	rest := s
	seen := map[uint16]bool{}
	for !exts.Empty() {
		var e extension
		var data cryptobyte.String
		if !exts.ReadUint16(&e.typ) || !exts.ReadUint16LengthPrefixed(&data) {
			return nil, errors.New("ech: malformed ClientHello extensions")
		}
		if seen[e.typ] {
			return nil, fmt.Errorf("ech: ClientHello repeats extension %#04x", e.typ)
		}
		seen[e.typ] = true
		e.data = data
		h.exts = append(h.exts, e)
	}
	h.trailing = rest
	return h, nil
}

// marshal writes the body, followed by pad zero bytes.
func (h *helloBody) marshal(sessionID []byte, exts []extension, pad int) ([]byte, error) {
	b := wire.NewBuilder(nil)
	b.AddUint16(h.version)
	b.AddBytes(h.random)
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes(sessionID) })
	b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(h.suites) })
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes(h.comp) })
	b.AddUint16LengthPrefixed(func(b *wire.Builder) {
		for _, e := range exts {
			b.AddUint16(e.typ)
			b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(e.data) })
		}
	})
	b.AddBytes(make([]byte, pad))
	return b.Bytes()
}

func (h *helloBody) ext(typ uint16) (extension, bool) {
	for _, e := range h.exts {
		if e.typ == typ {
			return e, true
		}
	}
	return extension{}, false
}

// EncodeInner returns the EncodedClientHelloInner of a ClientHelloInner
// body (RFC 9849, Section 5.1): its legacy_session_id emptied, the
// extensions whose types are in compress (in the inner's order, each
// also in the outer with the same body, in the same relative order)
// replaced by one ech_outer_extensions listing them, and zero padding as
// Section 6.1.3 recommends for maxNameLength.
func EncodeInner(innerBody []byte, compress []uint16, maxNameLength uint8) ([]byte, error) {
	h, err := parseHelloBody(innerBody)
	if err != nil {
		return nil, err
	}
	if len(h.trailing) != 0 {
		return nil, errors.New("ech: bytes after the ClientHelloInner")
	}
	if e, ok := h.ext(ExtEncryptedClientHello); !ok || len(e.data) != 1 || e.data[0] != TypeInner {
		return nil, errors.New("ech: ClientHelloInner without an inner encrypted_client_hello extension")
	}
	if _, ok := h.ext(ExtOuterExtensions); ok {
		return nil, errors.New("ech: ClientHelloInner with an ech_outer_extensions of its own")
	}
	want := map[uint16]bool{}
	for _, t := range compress {
		if t == ExtEncryptedClientHello || t == ExtOuterExtensions {
			return nil, fmt.Errorf("ech: extension %#04x cannot be compressed", t)
		}
		want[t] = true
	}
	var exts []extension
	var refs []uint16
	for _, e := range h.exts {
		if !want[e.typ] {
			exts = append(exts, e)
			continue
		}
		if len(refs) == 0 {
			exts = append(exts, extension{typ: ExtOuterExtensions}) // filled below
		}
		refs = append(refs, e.typ)
	}
	if len(refs) != len(compress) {
		return nil, errors.New("ech: a compressed extension is not in the ClientHelloInner")
	}
	for i := range exts {
		if exts[i].typ == ExtOuterExtensions {
			exts[i].data = outerExtensionsBody(refs)
		}
	}
	unpadded, err := h.marshal(nil, exts, 0)
	if err != nil {
		return nil, err
	}
	return h.marshal(nil, exts, padding(h, len(unpadded), maxNameLength))
}

func outerExtensionsBody(refs []uint16) []byte {
	b := make([]byte, 1, 1+2*len(refs))
	b[0] = byte(2 * len(refs))
	for _, t := range refs {
		b = append(b, byte(t>>8), byte(t))
	}
	return b
}

// padding is RFC 9849, Section 6.1.3's: up to the config's maximum name
// length for the server_name (or that plus 9 without one), then to a
// multiple of 32 bytes.
func padding(h *helloBody, n int, maxNameLength uint8) int {
	pad := int(maxNameLength) + 9
	if e, ok := h.ext(extServerName); ok {
		// server_name_list(2) name_type(1) host_name<2>: the name after 5 bytes.
		pad = max(0, int(maxNameLength)-max(0, len(e.data)-5))
	}
	total := n + pad
	return pad + (32-total%32)%32
}

// DecodeInner rebuilds the ClientHelloInner body from the decrypted
// EncodedClientHelloInner and the ClientHelloOuter body it came in (RFC
// 9849, Section 7.1): the outer's legacy_session_id put back, every
// ech_outer_extensions reference replaced by the outer's extension, with
// the checks that section requires. Any failure is a reason for the
// illegal_parameter alert.
func DecodeInner(encoded, outerBody []byte) ([]byte, error) {
	h, err := parseHelloBody(encoded)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInnerIllegal, err)
	}
	for _, c := range h.trailing {
		if c != 0 {
			return nil, fmt.Errorf("%w: non-zero padding", ErrInnerIllegal)
		}
	}
	if len(h.sessionID) != 0 {
		return nil, fmt.Errorf("%w: EncodedClientHelloInner with a session id", ErrInnerIllegal)
	}
	outer, err := parseHelloBody(outerBody)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInnerIllegal, err)
	}
	exts, err := expandOuter(h.exts, outer.exts)
	if err != nil {
		return nil, err
	}
	inner := &helloBody{version: h.version, random: h.random, suites: h.suites, comp: h.comp, exts: exts}
	seen := map[uint16]bool{}
	for _, e := range exts {
		if seen[e.typ] {
			return nil, fmt.Errorf("%w: extension %#04x twice after expansion", ErrInnerIllegal, e.typ)
		}
		seen[e.typ] = true
	}
	if e, ok := inner.ext(ExtEncryptedClientHello); !ok || len(e.data) != 1 || e.data[0] != TypeInner {
		return nil, fmt.Errorf("%w: no inner encrypted_client_hello extension", ErrInnerIllegal)
	}
	return inner.marshal(outer.sessionID, exts, 0)
}

// ErrInnerIllegal marks an EncodedClientHelloInner the server must refuse
// with illegal_parameter (RFC 9849, Section 7.1).
var ErrInnerIllegal = errors.New("ech: illegal ClientHelloInner")

// expandOuter replaces the ech_outer_extensions extension by the outer
// extensions it names: each must be in the outer, never
// encrypted_client_hello, and at most one ech_outer_extensions. RFC 9849,
// Section 5.1 asks the client to reference them in the outer's relative
// order; the server does not insist (Go's client does not keep that order
// in its second ClientHelloOuter after a HelloRetryRequest), and a
// reference named twice is refused as a repeated extension.
func expandOuter(inner, outer []extension) ([]extension, error) {
	var out []extension
	expanded := false
	for _, e := range inner {
		if e.typ != ExtOuterExtensions {
			out = append(out, e)
			continue
		}
		if expanded {
			return nil, fmt.Errorf("%w: two ech_outer_extensions", ErrInnerIllegal)
		}
		expanded = true
		s := cryptobyte.String(e.data)
		var list cryptobyte.String
		if !s.ReadUint8LengthPrefixed(&list) || !s.Empty() || list.Empty() || len(list)%2 != 0 {
			return nil, fmt.Errorf("%w: malformed ech_outer_extensions", ErrInnerIllegal)
		}
		for !list.Empty() {
			var t uint16
			list.ReadUint16(&t)
			if t == ExtEncryptedClientHello || t == ExtOuterExtensions {
				return nil, fmt.Errorf("%w: ech_outer_extensions names %#04x", ErrInnerIllegal, t)
			}
			i := slices.IndexFunc(outer, func(e extension) bool { return e.typ == t })
			if i < 0 {
				return nil, fmt.Errorf("%w: ech_outer_extensions names %#04x, which the outer ClientHello lacks", ErrInnerIllegal, t)
			}
			out = append(out, outer[i])
		}
	}
	return out, nil
}
