package wire

import (
	"bytes"

	"golang.org/x/crypto/cryptobyte"
)

// retryMayChange lists the extensions a ClientHello that answers a
// HelloRetryRequest may add, drop or change (RFC 8446, Section 4.1.2):
// key_share (the share the server asked for), early_data (removed),
// cookie (added), pre_shared_key (incompatible identities dropped, ages
// and binders updated) and padding. ztls, ztls_bfe and ztls_kem go too
// (docs/ztls-spec.md, Sections 2, 7.2 and 9.3: refused after a
// HelloRetryRequest).
var retryMayChange = map[uint16]bool{
	ExtKeyShare: true, ExtEarlyData: true, ExtCookie: true,
	ExtPreSharedKey: true, ExtPadding: true, ExtZTLS: true, ExtZTLSBFE: true, ExtZTLSKEM: true,
	// encrypted_client_hello: the second ClientHelloOuter's has an empty
	// enc and a payload sealed anew (RFC 9849, Section 6.1.5); an inner
	// ClientHello's is one fixed byte.
	extEncryptedClientHello: true,
}

// extEncryptedClientHello is RFC 9849's encrypted_client_hello (Section 5).
const extEncryptedClientHello uint16 = 0xfe0d

// CheckRetryClientHello enforces RFC 8446, Section 4.1.2 on second, the
// ClientHello that answers a HelloRetryRequest sent for first: the client
// sends the same ClientHello except for the extensions retryMayChange
// lists. The fixed fields (legacy_version, random, legacy_session_id,
// cipher_suites, legacy_compression_methods) and every other extension,
// in order and byte for byte, must be unchanged, else illegal_parameter.
// Both messages must have been parsed (their Raw is used).
func CheckRetryClientHello(first, second *ClientHello) error {
	f1, x1, err := splitClientHello(first)
	if err != nil {
		return err
	}
	f2, x2, err := splitClientHello(second)
	if err != nil {
		return err
	}
	if !bytes.Equal(f1, f2) {
		return illegalErr("ClientHello: second ClientHello changed its fixed fields after HelloRetryRequest")
	}
	x1, x2 = keptExtensions(x1), keptExtensions(x2)
	for i := range max(len(x1), len(x2)) {
		switch {
		case i >= len(x1):
			return illegalErr("ClientHello: second ClientHello added extension %d after HelloRetryRequest", x2[i].Type)
		case i >= len(x2):
			return illegalErr("ClientHello: second ClientHello dropped extension %d after HelloRetryRequest", x1[i].Type)
		case x1[i].Type != x2[i].Type || !bytes.Equal(x1[i].Data, x2[i].Data):
			return illegalErr("ClientHello: second ClientHello changed extension %d after HelloRetryRequest", x1[i].Type)
		}
	}
	return nil
}

// splitClientHello returns the bytes of a parsed ClientHello's fixed
// fields and its extensions (ztls at ExtZTLS whatever its codepoint).
func splitClientHello(m *ClientHello) ([]byte, []Extension, error) {
	if len(m.Raw) < 4 {
		return nil, nil, decodeErr("ClientHello: not parsed")
	}
	body := cryptobyte.String(m.Raw[4:])
	s := body
	var vers uint16
	var sid, suites, comp cryptobyte.String
	if !s.ReadUint16(&vers) || !s.Skip(32) || !s.ReadUint8LengthPrefixed(&sid) ||
		!s.ReadUint16LengthPrefixed(&suites) || !s.ReadUint8LengthPrefixed(&comp) {
		return nil, nil, decodeErr("ClientHello: truncated")
	}
	fixed := body[:len(body)-len(s)]
	exts, err := readExtensions(&s, "ClientHello", inCH)
	if err != nil {
		return nil, nil, err
	}
	for i := range exts {
		exts[i].Type = swapZTLS(exts[i].Type, m.ZTLSCodepoint)
	}
	return fixed, exts, nil
}

func keptExtensions(exts []Extension) []Extension {
	var out []Extension
	for _, e := range exts {
		if !retryMayChange[e.Type] {
			out = append(out, e)
		}
	}
	return out
}
