package wire

import (
	"errors"
	"fmt"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// Extension is an extension this package keeps opaque: its type and the
// bytes of its extension_data (RFC 8446, Section 4.2).
type Extension struct {
	Type uint16
	Data []byte // extension_data<0..2^16-1>; nil when empty
}

// KeyShare is a KeyShareEntry (RFC 8446, Section 4.2.8):
// NamedGroup group; opaque key_exchange<1..2^16-1>.
type KeyShare struct {
	Group uint16
	Data  []byte
}

// readHeader checks the 4-byte handshake header (RFC 8446, Section 4:
// HandshakeType msg_type; uint24 length) and returns a private copy of msg,
// which becomes the parsed message's Raw, and the body inside that copy.
func readHeader(msg []byte, typ uint8, name string) ([]byte, cryptobyte.String, error) {
	if len(msg) < 4 {
		return nil, nil, decodeErr("%s: %d bytes cannot hold a handshake header", name, len(msg))
	}
	if msg[0] != typ {
		return nil, nil, alert.Errorf(alert.UnexpectedMessage, "wire: unexpected message: got %s, want %s", TypeName(msg[0]), name)
	}
	n := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
	if n != len(msg)-4 {
		return nil, nil, decodeErr("%s: header says %d body bytes, message has %d", name, n, len(msg)-4)
	}
	raw := append([]byte(nil), msg...)
	return raw, cryptobyte.String(raw[4:]), nil
}

// finish rejects bytes left over after a structure was read completely.
func finish(s cryptobyte.String, what string) error {
	if !s.Empty() {
		return decodeErr("%s: %d trailing bytes", what, len(s))
	}
	return nil
}

// bytesOf returns s as a slice that cannot grow into the bytes after it,
// or nil when s is empty, so parsed values compare equal to built ones.
func bytesOf(s cryptobyte.String) []byte {
	if len(s) == 0 {
		return nil
	}
	return s[:len(s):len(s)]
}

// swapZTLS maps an extension type between the wire and this package when
// the ztls extension is configured at codepoint cp instead of ExtZTLS
// (docs/ztls-spec.md, Section 2: the codepoint is configurable): cp and ExtZTLS
// trade places, so inside the package the ztls extension is always
// ExtZTLS and an extension arriving at ExtZTLS's value is an unknown one.
// The swap is its own inverse, so parsing and marshalling use it alike.
func swapZTLS(typ, cp uint16) uint16 {
	if cp == 0 || cp == ExtZTLS {
		return typ
	}
	switch typ {
	case cp:
		return ExtZTLS
	case ExtZTLS:
		return cp
	}
	return typ
}

// swapAll applies swapZTLS to parsed extensions and their order.
func swapAll(exts []Extension, order []uint16, cp uint16) {
	for i := range exts {
		exts[i].Type = swapZTLS(exts[i].Type, cp)
	}
	for i := range order {
		order[i] = swapZTLS(order[i], cp)
	}
}

// KnownExtension reports whether this package gives typ a meaning (a
// codepoint the ztls extension must not be configured at).
func KnownExtension(typ uint16) bool {
	_, ok := extPlacement[typ]
	return ok
}

// extNames are the IANA names of the extensions this package knows
// (docs/ztls-spec.md, Sections 2 and 7.2, for the two of ztls).
var extNames = map[uint16]string{
	ExtServerName: "server_name", ExtStatusRequest: "status_request",
	ExtSupportedGroups: "supported_groups", ExtSignatureAlgorithms: "signature_algorithms",
	ExtALPN: "application_layer_protocol_negotiation", ExtSCT: "signed_certificate_timestamp",
	ExtPadding: "padding", ExtCompressCertificate: "compress_certificate",
	ExtRecordSizeLimit: "record_size_limit", ExtPreSharedKey: "pre_shared_key",
	ExtEarlyData: "early_data", ExtSupportedVersions: "supported_versions", ExtCookie: "cookie",
	ExtPSKModes: "psk_key_exchange_modes", ExtCertificateAuthorities: "certificate_authorities",
	ExtPostHandshakeAuth: "post_handshake_auth", ExtSignatureAlgorithmsCert: "signature_algorithms_cert",
	ExtKeyShare: "key_share", ExtRenegotiationInfo: "renegotiation_info",
	ExtZTLS: "ztls", ExtZTLSBFE: "ztls_bfe", ExtZTLSKEM: "ztls_kem",
}

// ExtensionName returns the name of an extension this package knows
// ("key_share", "ztls_bfe"), or "extension 0xNNNN" for another.
func ExtensionName(typ uint16) string {
	if n, ok := extNames[typ]; ok {
		return n
	}
	return fmt.Sprintf("extension %#04x", typ)
}

// readLastExtensions reads the extensions block that ends a message: the
// extensions, their wire order (nil when there are none), and an error if
// bytes follow.
func readLastExtensions(s *cryptobyte.String, name string, where placement) ([]Extension, []uint16, error) {
	exts, err := readExtensions(s, name, where)
	if err != nil {
		return nil, nil, err
	}
	if err := finish(*s, name); err != nil {
		return nil, nil, err
	}
	var order []uint16
	if len(exts) > 0 {
		order = make([]uint16, len(exts))
		for i, e := range exts {
			order[i] = e.Type
		}
	}
	return exts, order, nil
}

// readExtensions reads an extensions<0..2^16-1> block and checks, for every
// message that carries one, the rules RFC 8446, Section 4.2 sets for all of
// them: no two extensions of one type (illegal_parameter), and no extension
// this package knows inside a message it is not defined for
// (illegal_parameter). It returns the extensions in wire order; Data aliases s.
func readExtensions(s *cryptobyte.String, name string, where placement) ([]Extension, error) {
	var block cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&block) {
		return nil, decodeErr("%s: truncated extensions", name)
	}
	var exts []Extension
	seen := make(map[uint16]bool)
	for !block.Empty() {
		var typ uint16
		var data cryptobyte.String
		if !block.ReadUint16(&typ) || !block.ReadUint16LengthPrefixed(&data) {
			return nil, decodeErr("%s: truncated extension", name)
		}
		if seen[typ] {
			return nil, illegalErr("%s: duplicate extension %d", name, typ)
		}
		seen[typ] = true
		if p, known := extPlacement[typ]; known && p&where == 0 {
			return nil, illegalErr("%s: extension %d is not allowed in this message", name, typ)
		}
		exts = append(exts, Extension{Type: typ, Data: bytesOf(data)})
	}
	return exts, nil
}

// extBody is one extension to write: its type and a writer of its extension_data.
type extBody struct {
	typ   uint16
	write func(b *Builder)
}

// arrangeExtensions decides which extensions a message writes and in what
// order. typed holds the message's present typed extensions in canonical
// order; Extra goes before typed[extraAt]. With order set, exactly the listed
// types are written in that order: each from its typed field if present, else
// from the next unused Extra entry of that type; anything present but not
// listed is an error, so a field is never dropped silently. Extra is not
// checked against the typed fields, so tests can build duplicate or
// misplaced extensions on purpose.
func arrangeExtensions(name string, typed []extBody, extraAt int, extra []Extension, order []uint16) ([]extBody, error) {
	fromExtra := func(e Extension) extBody {
		return extBody{e.Type, func(b *Builder) { b.AddBytes(e.Data) }}
	}
	if order == nil {
		out := make([]extBody, 0, len(typed)+len(extra))
		out = append(out, typed[:extraAt]...)
		for _, e := range extra {
			out = append(out, fromExtra(e))
		}
		return append(out, typed[extraAt:]...), nil
	}
	usedTyped := make([]bool, len(typed))
	usedExtra := make([]bool, len(extra))
	out := make([]extBody, 0, len(order))
next:
	for _, t := range order {
		for i, x := range typed {
			if x.typ == t && !usedTyped[i] {
				usedTyped[i] = true
				out = append(out, x)
				continue next
			}
		}
		for i, e := range extra {
			if e.Type == t && !usedExtra[i] {
				usedExtra[i] = true
				out = append(out, fromExtra(e))
				continue next
			}
		}
		return nil, internalErr("%s: Order lists extension %d, which the message does not carry", name, t)
	}
	for i, x := range typed {
		if !usedTyped[i] {
			return nil, internalErr("%s: extension %d is set but missing from Order", name, x.typ)
		}
	}
	for i, e := range extra {
		if !usedExtra[i] {
			return nil, internalErr("%s: Extra extension %d is missing from Order", name, e.Type)
		}
	}
	return out, nil
}

// addExtensions writes the extensions<0..2^16-1> block.
func addExtensions(b *Builder, exts []extBody) {
	addExtensionsZTLS(b, exts, 0)
}

// addExtensionsZTLS writes exts with the ztls extension at codepoint cp.
func addExtensionsZTLS(b *Builder, exts []extBody, cp uint16) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, e := range exts {
			b.AddUint16(swapZTLS(e.typ, cp))
			b.AddUint16LengthPrefixed(e.write)
		}
	})
}

// msgBufSize is the room marshalMsg starts with: every message of a
// full x25519 handshake but a Certificate fits.
const msgBufSize = 512

// marshalMsg builds a handshake message: the header (type, uint24 length)
// around the body that fill writes. fill reports its own errors through
// b.SetError; cryptobyte's length overflows become internal_error.
func marshalMsg(typ uint8, name string, fill func(b *Builder)) ([]byte, error) {
	// The Builder escapes (fill is a closure), so it comes with room for
	// a typical message in the same allocation; the result is a slice of it.
	m := new(struct {
		b   Builder
		buf [msgBufSize]byte
	})
	b := &m.b
	b.buf = m.buf[:0]
	b.AddUint8(typ)
	b.AddUint24LengthPrefixed(fill)
	out, err := b.Bytes()
	if err != nil {
		var we *alert.Error
		if errors.As(err, &we) {
			return nil, we
		}
		return nil, internalErr("%s: %v", name, err)
	}
	return out[:len(out):len(out)], nil
}

// readUint16List reads the contents of a vector of uint16 values.
// nonEmpty enforces a <2..> lower bound.
func readUint16List(v cryptobyte.String, nonEmpty bool, what string) ([]uint16, error) {
	if len(v)%2 != 0 {
		return nil, decodeErr("%s: odd length %d", what, len(v))
	}
	if nonEmpty && len(v) == 0 {
		return nil, decodeErr("%s: empty list", what)
	}
	if len(v) == 0 {
		return nil, nil
	}
	out := make([]uint16, 0, len(v)/2)
	for !v.Empty() {
		var x uint16
		v.ReadUint16(&x)
		out = append(out, x)
	}
	return out, nil
}

// readUint16Vector reads a uint16-length-prefixed list of uint16 values that
// must fill the whole extension_data, such as NamedGroupList (RFC 8446,
// Section 4.2.7) or SignatureSchemeList (Section 4.2.3), both <2..2^16-2>.
func readUint16Vector(data []byte, what string) ([]uint16, error) {
	s := cryptobyte.String(data)
	var v cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&v) {
		return nil, decodeErr("%s: truncated", what)
	}
	if err := finish(s, what); err != nil {
		return nil, err
	}
	return readUint16List(v, true, what)
}

func addUint16Vector(b *Builder, list []uint16) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, x := range list {
			b.AddUint16(x)
		}
	})
}

// readEmpty checks extension_data that must be empty (RFC 8446, Section 4.2.10
// early_data in ClientHello and EncryptedExtensions, and similar flags).
func readEmpty(data []byte, what string) error {
	if len(data) != 0 {
		return decodeErr("%s: %d bytes where none belong", what, len(data))
	}
	return nil
}

// readRecordSizeLimit reads RecordSizeLimit (RFC 8449, Section 4): a uint16
// that must be at least 64, else illegal_parameter.
func readRecordSizeLimit(data []byte, what string) (uint16, error) {
	s := cryptobyte.String(data)
	var v uint16
	if !s.ReadUint16(&v) {
		return 0, decodeErr("%s: truncated record_size_limit", what)
	}
	if err := finish(s, what+": record_size_limit"); err != nil {
		return 0, err
	}
	if v < 64 {
		return 0, illegalErr("%s: record_size_limit %d is below 64", what, v)
	}
	return v, nil
}

// readALPNList reads ProtocolNameList (RFC 7301, Section 3.1):
// ProtocolName protocol_name_list<2..2^16-1>; opaque ProtocolName<1..2^8-1>.
func readALPNList(data []byte, what string) ([]string, error) {
	s := cryptobyte.String(data)
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) || list.Empty() {
		return nil, decodeErr("%s: malformed ALPN list", what)
	}
	if err := finish(s, what+": ALPN"); err != nil {
		return nil, err
	}
	var out []string
	for !list.Empty() {
		var name cryptobyte.String
		if !list.ReadUint8LengthPrefixed(&name) || name.Empty() {
			return nil, decodeErr("%s: malformed ALPN protocol name", what)
		}
		out = append(out, string(name))
	}
	return out, nil
}

func addALPNList(b *Builder, names []string, what string) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, p := range names {
			if len(p) == 0 || len(p) > 255 {
				b.SetError(internalErr("%s: ALPN protocol name of %d bytes", what, len(p)))
				return
			}
			b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes([]byte(p)) })
		}
	})
}

func hasExtra(extra []Extension, typ uint16) bool {
	for _, e := range extra {
		if e.Type == typ {
			return true
		}
	}
	return false
}
