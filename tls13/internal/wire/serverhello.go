package wire

import (
	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// ServerHello is the ServerHello message (RFC 8446, Section 4.1.3), which is
// also the HelloRetryRequest when Random equals HelloRetryRequestRandom.
type ServerHello struct {
	// Raw is exactly the bytes ParseServerHello read, header included.
	Raw []byte
	// ZTLSCodepoint is the ztls extension's codepoint on the wire; 0 means
	// ExtZTLS (see ParseServerHelloZTLS).
	ZTLSCodepoint uint16

	// Random is opaque Random[32]. legacy_version is always 0x0303 and
	// legacy_compression_method always 0; other values fail to parse
	// (protocol_version and illegal_parameter).
	Random [32]byte
	// SessionID is opaque legacy_session_id_echo<0..32>.
	SessionID []byte
	// CipherSuite is CipherSuite cipher_suite.
	CipherSuite uint16

	// SupportedVersion is supported_versions' selected_version (RFC 8446,
	// Section 4.2.1); 0 means absent (and 0 on the wire is illegal_parameter).
	SupportedVersion uint16
	// KeyShare is a ServerHello's key_share, KeyShareEntry server_share
	// (RFC 8446, Section 4.2.8); HasKeyShare tells presence. Marshal also
	// writes it when KeyShare is not the zero value.
	KeyShare    KeyShare
	HasKeyShare bool
	// SelectedGroup is a HelloRetryRequest's key_share, NamedGroup
	// selected_group; 0 means absent.
	SelectedGroup uint16
	// Cookie is a HelloRetryRequest's cookie (RFC 8446, Section 4.2.2):
	// opaque cookie<1..2^16-1>; nil means absent.
	Cookie []byte
	// PSKIdentity is pre_shared_key's uint16 selected_identity
	// (RFC 8446, Section 4.2.11); HasPSK tells presence.
	PSKIdentity uint16
	HasPSK      bool
	// ZTLSID is the ztls echo, uint32 zdata_id (docs/ztls-spec.md, Section 2); HasZTLS
	// tells presence. Marshal also writes it when ZTLSID is not 0.
	ZTLSID  uint32
	HasZTLS bool
	// Extra holds unknown extensions, opaque; the engine rejects them with
	// unsupported_extension (RFC 8446, Section 4.1.3). Known extensions that
	// do not belong in a ServerHello or HelloRetryRequest fail to parse with
	// illegal_parameter.
	Extra []Extension
	// Order lists extension types in wire order; ParseServerHello fills it.
	// When nil, Marshal writes supported_versions, key_share, pre_shared_key,
	// cookie, ztls, then Extra. When set, see ClientHello.Order.
	Order []uint16
}

// IsHelloRetryRequest reports whether m is a HelloRetryRequest
// (RFC 8446, Section 4.1.3: its Random is HelloRetryRequestRandom).
func (m *ServerHello) IsHelloRetryRequest() bool {
	return m.Random == HelloRetryRequestRandom
}

func (m *ServerHello) name() string {
	if m.IsHelloRetryRequest() {
		return "HelloRetryRequest"
	}
	return "ServerHello"
}

// ParseServerHello parses a whole ServerHello or HelloRetryRequest message,
// header included. key_share holds a KeyShareEntry in a ServerHello and a
// bare selected_group in a HelloRetryRequest.
func ParseServerHello(msg []byte) (*ServerHello, error) {
	return ParseServerHelloZTLS(msg, 0)
}

// ParseServerHelloZTLS is ParseServerHello with the ztls extension at
// codepoint cp (0: ExtZTLS), as ParseClientHelloZTLS.
func ParseServerHelloZTLS(msg []byte, cp uint16) (*ServerHello, error) {
	raw, s, err := readHeader(msg, TypeServerHello, "ServerHello")
	if err != nil {
		return nil, err
	}
	m := &ServerHello{Raw: raw, ZTLSCodepoint: cp}
	var vers uint16
	var sid cryptobyte.String
	var comp uint8
	if !s.ReadUint16(&vers) || !s.CopyBytes(m.Random[:]) || !s.ReadUint8LengthPrefixed(&sid) ||
		!s.ReadUint16(&m.CipherSuite) || !s.ReadUint8(&comp) {
		return nil, decodeErr("ServerHello: truncated")
	}
	name := m.name()
	if vers != VersionTLS12 {
		return nil, alert.Errorf(alert.ProtocolVersion, "wire: %s legacy_version 0x%04x", name, vers)
	}
	if len(sid) > 32 {
		return nil, decodeErr("%s: legacy_session_id_echo of %d bytes", name, len(sid))
	}
	m.SessionID = bytesOf(sid)
	if comp != 0 {
		return nil, illegalErr("%s: legacy_compression_method %d", name, comp)
	}
	if s.Empty() {
		// A TLS 1.2 or older server: no supported_versions, so no TLS 1.3.
		return nil, alert.Errorf(alert.ProtocolVersion, "wire: %s without extensions is older than TLS 1.3", name)
	}
	where := inSH
	if m.IsHelloRetryRequest() {
		where = inHRR
	}
	exts, order, err := readLastExtensions(&s, name, where)
	if err != nil {
		return nil, err
	}
	swapAll(exts, order, cp)
	m.Order = order
	for _, e := range exts {
		if err := m.readExtension(e, name); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *ServerHello) readExtension(e Extension, name string) error {
	d := cryptobyte.String(e.Data)
	switch e.Type {
	case ExtSupportedVersions:
		if !d.ReadUint16(&m.SupportedVersion) || !d.Empty() {
			return decodeErr("%s: malformed supported_versions", name)
		}
		if m.SupportedVersion == 0 {
			return illegalErr("%s: selected_version 0", name)
		}
	case ExtKeyShare:
		if m.IsHelloRetryRequest() {
			if !d.ReadUint16(&m.SelectedGroup) || !d.Empty() {
				return decodeErr("%s: malformed key_share", name)
			}
			if m.SelectedGroup == 0 {
				return illegalErr("%s: selected_group 0", name)
			}
			return nil
		}
		ks, err := readKeyShareEntry(&d, name)
		if err != nil {
			return err
		}
		if err := finish(d, name+": key_share"); err != nil {
			return err
		}
		m.KeyShare, m.HasKeyShare = ks, true
	case ExtCookie:
		var v cryptobyte.String
		if !d.ReadUint16LengthPrefixed(&v) || v.Empty() || !d.Empty() {
			return decodeErr("%s: malformed cookie", name)
		}
		m.Cookie = bytesOf(v)
	case ExtPreSharedKey:
		if !d.ReadUint16(&m.PSKIdentity) || !d.Empty() {
			return decodeErr("%s: malformed pre_shared_key", name)
		}
		m.HasPSK = true
	case ExtZTLS:
		if !d.ReadUint32(&m.ZTLSID) || !d.Empty() {
			return decodeErr("%s: malformed ztls", name)
		}
		m.HasZTLS = true
	default:
		m.Extra = append(m.Extra, e)
	}
	return nil
}

// Marshal encodes the ServerHello or HelloRetryRequest, header included.
// Fields that belong only to the other kind of message are an error.
func (m *ServerHello) Marshal() ([]byte, error) {
	name := m.name()
	if len(m.SessionID) > 32 {
		return nil, internalErr("%s: legacy_session_id_echo of %d bytes", name, len(m.SessionID))
	}
	hasKS := m.HasKeyShare || m.KeyShare.Group != 0 || len(m.KeyShare.Data) > 0
	hasZTLS := m.HasZTLS || m.ZTLSID != 0
	hasPSK := m.HasPSK || m.PSKIdentity != 0
	hrr := m.IsHelloRetryRequest()
	if hrr && (hasKS || hasPSK || hasZTLS) {
		return nil, internalErr("HelloRetryRequest: carries a key share, pre_shared_key or ztls")
	}
	if !hrr && (m.SelectedGroup != 0 || len(m.Cookie) > 0) {
		return nil, internalErr("ServerHello: carries selected_group or cookie")
	}
	var t []extBody
	add := func(typ uint16, w func(b *Builder)) { t = append(t, extBody{typ, w}) }
	if m.SupportedVersion != 0 {
		add(ExtSupportedVersions, func(b *Builder) { b.AddUint16(m.SupportedVersion) })
	}
	if hasKS {
		add(ExtKeyShare, func(b *Builder) { addKeyShareEntry(b, m.KeyShare, name) })
	}
	if m.SelectedGroup != 0 {
		add(ExtKeyShare, func(b *Builder) { b.AddUint16(m.SelectedGroup) })
	}
	if hasPSK {
		add(ExtPreSharedKey, func(b *Builder) { b.AddUint16(m.PSKIdentity) })
	}
	if len(m.Cookie) > 0 {
		add(ExtCookie, func(b *Builder) {
			b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(m.Cookie) })
		})
	}
	if hasZTLS {
		add(ExtZTLS, func(b *Builder) { b.AddUint32(m.ZTLSID) })
	}
	exts, err := arrangeExtensions(name, t, len(t), m.Extra, m.Order)
	if err != nil {
		return nil, err
	}
	return marshalMsg(TypeServerHello, name, func(b *Builder) {
		b.AddUint16(VersionTLS12)
		b.AddBytes(m.Random[:])
		b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(m.SessionID) })
		b.AddUint16(m.CipherSuite)
		b.AddUint8(0)
		addExtensionsZTLS(b, exts, m.ZTLSCodepoint)
	})
}
