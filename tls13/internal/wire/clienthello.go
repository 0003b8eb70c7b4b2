package wire

import (
	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// PSKIdentity is a PskIdentity (RFC 8446, Section 4.2.11):
// opaque identity<1..2^16-1>; uint32 obfuscated_ticket_age.
type PSKIdentity struct {
	Identity            []byte
	ObfuscatedTicketAge uint32
}

// ZTLSClientHello is the body of the ztls extension in a ClientHello
// (docs/ztls-spec.md, Section 2), with the fields in wire order.
type ZTLSClientHello struct {
	ZDataID          uint32   // uint32 zdata_id: lookup hint
	ZDataHash        [32]byte // opaque zdata_hash[32]: the exact record used
	EarlySuite       uint16   // CipherSuite early_suite
	ObfuscatedTimeMS uint64   // uint64 obfuscated_time_ms (docs/ztls-spec.md, Section 3)
	CertHash         []byte   // opaque cert_hash<0..32>: length 0 or 32, else decode_error
	Binder           []byte   // opaque binder<32..255>: computed last, see UpdateZTLSBinder
}

// ClientHello is the ClientHello message (RFC 8446, Section 4.1.2). The
// zero value of each extension field means the extension is absent unless
// its comment says otherwise.
type ClientHello struct {
	// Raw is exactly the bytes ParseClientHello read, header included.
	Raw []byte
	// ZTLSCodepoint is the ztls extension's codepoint on the wire; 0 means
	// ExtZTLS. Inside the struct (ZTLS, Order, Extra) the ztls extension
	// is always ExtZTLS; see ParseClientHelloZTLS.
	ZTLSCodepoint uint16

	// LegacyVersion is ProtocolVersion legacy_version. 0 stands for 0x0303,
	// which is what every TLS 1.3 client sends: Marshal writes 0x0303 for 0,
	// and ParseClientHello leaves 0 when it reads 0x0303. ParseClientHello
	// refuses 0x0300 and below (so a wire 0x0000 never reads as 0).
	LegacyVersion uint16
	// Random is opaque Random[32].
	Random [32]byte
	// SessionID is opaque legacy_session_id<0..32>.
	SessionID []byte
	// CipherSuites is CipherSuite cipher_suites<2..2^16-2>.
	CipherSuites []uint16
	// CompressionMethods is opaque legacy_compression_methods<1..2^8-1>;
	// Marshal writes []byte{0} when it is empty.
	CompressionMethods []byte

	// ServerName is the host_name of server_name (RFC 6066, Section 3); ""
	// means absent. A server_name of any other shape is kept in Extra.
	ServerName string
	// SupportedVersions is supported_versions (RFC 8446, Section 4.2.1):
	// ProtocolVersion versions<2..254>.
	SupportedVersions []uint16
	// SupportedGroups is supported_groups (RFC 8446, Section 4.2.7):
	// NamedGroup named_group_list<2..2^16-1>.
	SupportedGroups []uint16
	// SignatureAlgorithms is signature_algorithms (RFC 8446, Section 4.2.3):
	// SignatureScheme supported_signature_algorithms<2..2^16-2>.
	SignatureAlgorithms []uint16
	// SignatureAlgorithmsCert is signature_algorithms_cert, same syntax.
	SignatureAlgorithmsCert []uint16
	// KeyShares is key_share (RFC 8446, Section 4.2.8):
	// KeyShareEntry client_shares<0..2^16-1>. Two shares for one group are an
	// illegal_parameter.
	KeyShares []KeyShare
	// HasKeyShare says key_share is present; the list may be empty (a client
	// that wants the server to choose through HelloRetryRequest). Marshal also
	// writes key_share when KeyShares is not empty.
	HasKeyShare bool
	// PSKModes is psk_key_exchange_modes (RFC 8446, Section 4.2.9):
	// PskKeyExchangeMode ke_modes<1..255>.
	PSKModes []uint8
	// ALPN is application_layer_protocol_negotiation (RFC 7301, Section 3.1).
	ALPN []string
	// Cookie is cookie (RFC 8446, Section 4.2.2): opaque cookie<1..2^16-1>.
	Cookie []byte
	// EarlyData says early_data is present (RFC 8446, Section 4.2.10).
	EarlyData bool
	// RecordSizeLimit is record_size_limit (RFC 8449, Section 4); 0 means
	// absent. Values below 64 are an illegal_parameter.
	RecordSizeLimit uint16
	// StatusRequest says status_request asks for OCSP (RFC 6066, Section 8).
	// Marshal writes an OCSPStatusRequest with empty lists. A request of
	// another status_type is kept in Extra.
	StatusRequest bool
	// SCT says signed_certificate_timestamp is present (RFC 6962, Section 3.3.1).
	SCT bool
	// PostHandshakeAuth says post_handshake_auth is present (RFC 8446, Section 4.2.6).
	PostHandshakeAuth bool
	// CertificateAuthorities is certificate_authorities (RFC 8446,
	// Section 4.2.4), as in CertificateRequest; nil means absent.
	CertificateAuthorities [][]byte
	// PSKIdentities and PSKBinders are pre_shared_key (RFC 8446,
	// Section 4.2.11): PskIdentity identities<7..2^16-1>;
	// PskBinderEntry binders<33..2^16-1>, each opaque<32..255>. nil means
	// absent. pre_shared_key must be the last extension, and there must be
	// one binder per identity (else illegal_parameter).
	PSKIdentities []PSKIdentity
	PSKBinders    [][]byte
	// ZTLS is the ztls extension (docs/ztls-spec.md, Section 2); nil means absent. It
	// must be the last extension, so it never comes with pre_shared_key.
	ZTLS *ZTLSClientHello
	// ZTLSBFE is the bfe_ciphertext of the ztls_bfe extension
	// (docs/ztls-spec.md, Section 7.2: opaque bfe_ciphertext<1..2^16-1>);
	// nil means absent. Whether it came with ztls is the engine's check.
	ZTLSBFE []byte
	// ZTLSKEM is the kem_share of the ztls_kem extension
	// (docs/ztls-spec.md, Section 9.3: opaque kem_share<1..2^16-1>, for
	// X25519MLKEM768 the ML-KEM-768 ciphertext then an X25519 share); nil
	// means absent. Whether it came with ztls is the engine's check.
	ZTLSKEM []byte
	// Extra holds the other extensions, opaque; unknown ones land here on parse.
	Extra []Extension
	// Order lists extension types in wire order; ParseClientHello fills it.
	// When nil, Marshal uses the canonical order: server_name,
	// supported_versions, supported_groups, key_share, signature_algorithms,
	// signature_algorithms_cert, psk_key_exchange_modes, ALPN, cookie,
	// status_request, signed_certificate_timestamp, record_size_limit,
	// post_handshake_auth, Extra in its own order, ztls_bfe, early_data,
	// ztls, pre_shared_key. When set, Marshal writes exactly the extensions listed,
	// in that order: typed ones from their fields, others from Extra by type.
	Order []uint16
}

// ParseClientHello parses a whole ClientHello message, header included.
// A ClientHello without an extensions block comes from a client older than
// TLS 1.3 and fails with protocol_version.
func ParseClientHello(msg []byte) (*ClientHello, error) {
	return ParseClientHelloZTLS(msg, 0)
}

// ParseClientHelloZTLS is ParseClientHello with the ztls extension at
// codepoint cp (0: ExtZTLS); an extension at ExtZTLS's own value is then
// an unknown one, kept in Extra.
func ParseClientHelloZTLS(msg []byte, cp uint16) (*ClientHello, error) {
	raw, s, err := readHeader(msg, TypeClientHello, "ClientHello")
	if err != nil {
		return nil, err
	}
	m := &ClientHello{Raw: raw, ZTLSCodepoint: cp}
	var vers uint16
	var sid, suites, comp cryptobyte.String
	if !s.ReadUint16(&vers) || !s.CopyBytes(m.Random[:]) ||
		!s.ReadUint8LengthPrefixed(&sid) || !s.ReadUint16LengthPrefixed(&suites) ||
		!s.ReadUint8LengthPrefixed(&comp) {
		return nil, decodeErr("ClientHello: truncated")
	}
	if vers <= 0x0300 {
		// RFC 8446, Appendix D.5: a ClientHello.legacy_version of SSL 3.0
		// (0x0300) or lower is a protocol_version. Checked here, on the
		// wire value, because 0 in LegacyVersion means 0x0303.
		return nil, alert.Errorf(alert.ProtocolVersion, "wire: ClientHello legacy_version 0x%04x", vers)
	}
	if vers != VersionTLS12 {
		m.LegacyVersion = vers
	}
	if len(sid) > 32 {
		return nil, decodeErr("ClientHello: legacy_session_id of %d bytes", len(sid))
	}
	m.SessionID = bytesOf(sid)
	if m.CipherSuites, err = readUint16List(suites, true, "ClientHello: cipher_suites"); err != nil {
		return nil, err
	}
	if comp.Empty() {
		return nil, decodeErr("ClientHello: empty legacy_compression_methods")
	}
	m.CompressionMethods = bytesOf(comp)
	if s.Empty() {
		return nil, alert.Errorf(alert.ProtocolVersion, "wire: ClientHello without extensions is older than TLS 1.3")
	}
	exts, order, err := readLastExtensions(&s, "ClientHello", inCH)
	if err != nil {
		return nil, err
	}
	swapAll(exts, order, cp)
	m.Order = order
	for i, e := range exts {
		last := i == len(exts)-1
		if err := m.readExtension(e, last); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// readExtension fills the field of one ClientHello extension.
func (m *ClientHello) readExtension(e Extension, last bool) error {
	var err error
	d := cryptobyte.String(e.Data)
	switch e.Type {
	case ExtServerName:
		name, ok, err := readServerName(e.Data)
		if err != nil {
			return err
		}
		if !ok {
			m.Extra = append(m.Extra, e)
			return nil
		}
		m.ServerName = name
	case ExtSupportedVersions:
		m.SupportedVersions, err = readClientVersions(d)
	case ExtSupportedGroups:
		m.SupportedGroups, err = readUint16Vector(e.Data, "ClientHello: supported_groups")
	case ExtSignatureAlgorithms:
		m.SignatureAlgorithms, err = readUint16Vector(e.Data, "ClientHello: signature_algorithms")
	case ExtSignatureAlgorithmsCert:
		m.SignatureAlgorithmsCert, err = readUint16Vector(e.Data, "ClientHello: signature_algorithms_cert")
	case ExtKeyShare:
		m.HasKeyShare = true
		m.KeyShares, err = readClientShares(e.Data)
	case ExtPSKModes:
		m.PSKModes, err = readPSKModes(d)
	case ExtALPN:
		m.ALPN, err = readALPNList(e.Data, "ClientHello")
	case ExtCookie:
		m.Cookie, err = readClientCookie(d)
	case ExtStatusRequest:
		ok, err := readStatusRequest(e.Data)
		if err != nil {
			return err
		}
		if !ok {
			m.Extra = append(m.Extra, e)
			return nil
		}
		m.StatusRequest = true
	case ExtSCT:
		err = readEmpty(e.Data, "ClientHello: signed_certificate_timestamp")
		m.SCT = true
	case ExtRecordSizeLimit:
		m.RecordSizeLimit, err = readRecordSizeLimit(e.Data, "ClientHello")
	case ExtPostHandshakeAuth:
		err = readEmpty(e.Data, "ClientHello: post_handshake_auth")
		m.PostHandshakeAuth = true
	case ExtCertificateAuthorities:
		m.CertificateAuthorities, err = readAuthorities(e.Data, "ClientHello")
	case ExtEarlyData:
		err = readEmpty(e.Data, "ClientHello: early_data")
		m.EarlyData = true
	case ExtPreSharedKey:
		// RFC 8446, Section 4.2.11: pre_shared_key MUST be the last
		// extension; the binders cover everything before them.
		if !last {
			return illegalErr("ClientHello: pre_shared_key is not the last extension")
		}
		m.PSKIdentities, m.PSKBinders, err = readOfferedPSKs(e.Data)
	case ExtZTLSBFE:
		m.ZTLSBFE, err = readOpaque16(d, "ztls_bfe ciphertext")
	case ExtZTLSKEM:
		m.ZTLSKEM, err = readOpaque16(d, "ztls_kem kem_share")
	case ExtZTLS:
		// docs/ztls-spec.md, Section 2: ztls is the last extension.
		if !last {
			return illegalErr("ClientHello: ztls is not the last extension")
		}
		m.ZTLS, err = readZTLSClientHello(e.Data)
	default:
		m.Extra = append(m.Extra, e)
	}
	return err
}

// readClientVersions reads supported_versions in a ClientHello (RFC 8446,
// Section 4.2.1): ProtocolVersion versions<2..254>.
func readClientVersions(d cryptobyte.String) ([]uint16, error) {
	var v cryptobyte.String
	if !d.ReadUint8LengthPrefixed(&v) {
		return nil, decodeErr("ClientHello: truncated supported_versions")
	}
	if err := finish(d, "ClientHello: supported_versions"); err != nil {
		return nil, err
	}
	return readUint16List(v, true, "ClientHello: supported_versions")
}

// readPSKModes reads psk_key_exchange_modes (RFC 8446, Section 4.2.9):
// PskKeyExchangeMode ke_modes<1..255>.
func readPSKModes(d cryptobyte.String) ([]uint8, error) {
	var v cryptobyte.String
	if !d.ReadUint8LengthPrefixed(&v) || v.Empty() {
		return nil, decodeErr("ClientHello: malformed psk_key_exchange_modes")
	}
	if err := finish(d, "ClientHello: psk_key_exchange_modes"); err != nil {
		return nil, err
	}
	return bytesOf(v), nil
}

// readClientCookie reads the cookie a ClientHello echoes (RFC 8446,
// Section 4.2.2): opaque cookie<1..2^16-1>.
func readClientCookie(d cryptobyte.String) ([]byte, error) {
	var v cryptobyte.String
	if !d.ReadUint16LengthPrefixed(&v) || v.Empty() {
		return nil, decodeErr("ClientHello: malformed cookie")
	}
	if err := finish(d, "ClientHello: cookie"); err != nil {
		return nil, err
	}
	return bytesOf(v), nil
}

// readServerName reads ServerNameList (RFC 6066, Section 3):
// ServerName server_name_list<1..2^16-1>, each NameType name_type (0 =
// host_name) and opaque HostName<1..2^16-1>. ok is false for a well-formed
// list that is not exactly one host_name: the caller keeps it opaque.
func readServerName(data []byte) (name string, ok bool, err error) {
	s := cryptobyte.String(data)
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) || list.Empty() {
		return "", false, decodeErr("ClientHello: malformed server_name")
	}
	if err := finish(s, "ClientHello: server_name"); err != nil {
		return "", false, err
	}
	hostNames, others := 0, 0
	for !list.Empty() {
		var typ uint8
		var v cryptobyte.String
		if !list.ReadUint8(&typ) || !list.ReadUint16LengthPrefixed(&v) || v.Empty() {
			return "", false, decodeErr("ClientHello: malformed server_name entry")
		}
		if typ != 0 {
			others++
			continue
		}
		hostNames++
		name = string(v)
	}
	// RFC 6066, Section 3: no two names of the same name_type.
	if hostNames > 1 {
		return "", false, illegalErr("ClientHello: server_name lists %d host names", hostNames)
	}
	if hostNames != 1 || others != 0 {
		return "", false, nil
	}
	return name, true, nil
}

// readStatusRequest reads CertificateStatusRequest (RFC 6066, Section 8).
// ok is false for a status_type other than ocsp(1), which the caller keeps opaque.
func readStatusRequest(data []byte) (ok bool, err error) {
	s := cryptobyte.String(data)
	var typ uint8
	if !s.ReadUint8(&typ) {
		return false, decodeErr("ClientHello: empty status_request")
	}
	if typ != 1 {
		return false, nil
	}
	// OCSPStatusRequest: ResponderID responder_id_list<0..2^16-1>;
	// Extensions request_extensions<0..2^16-1>.
	var ids, reqExts cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&ids) || !s.ReadUint16LengthPrefixed(&reqExts) {
		return false, decodeErr("ClientHello: malformed status_request")
	}
	if err := finish(s, "ClientHello: status_request"); err != nil {
		return false, err
	}
	return true, nil
}

// readClientShares reads KeyShareClientHello (RFC 8446, Section 4.2.8).
func readClientShares(data []byte) ([]KeyShare, error) {
	s := cryptobyte.String(data)
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) {
		return nil, decodeErr("ClientHello: truncated key_share")
	}
	if err := finish(s, "ClientHello: key_share"); err != nil {
		return nil, err
	}
	var shares []KeyShare
	for !list.Empty() {
		ks, err := readKeyShareEntry(&list, "ClientHello")
		if err != nil {
			return nil, err
		}
		// RFC 8446, Section 4.2.8: one share per group at most; servers
		// MAY abort with illegal_parameter, and this parser does.
		for _, prev := range shares {
			if prev.Group == ks.Group {
				return nil, illegalErr("ClientHello: two key shares for group %d", ks.Group)
			}
		}
		shares = append(shares, ks)
	}
	return shares, nil
}

// readKeyShareEntry reads one KeyShareEntry: NamedGroup group;
// opaque key_exchange<1..2^16-1>.
func readKeyShareEntry(s *cryptobyte.String, name string) (KeyShare, error) {
	var ks KeyShare
	var v cryptobyte.String
	if !s.ReadUint16(&ks.Group) || !s.ReadUint16LengthPrefixed(&v) || v.Empty() {
		return ks, decodeErr("%s: malformed key share entry", name)
	}
	ks.Data = bytesOf(v)
	return ks, nil
}

func addKeyShareEntry(b *Builder, ks KeyShare, name string) {
	if len(ks.Data) == 0 {
		b.SetError(internalErr("%s: key share for group %d has no key_exchange", name, ks.Group))
		return
	}
	b.AddUint16(ks.Group)
	b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(ks.Data) })
}

// readOfferedPSKs reads OfferedPsks (RFC 8446, Section 4.2.11).
func readOfferedPSKs(data []byte) ([]PSKIdentity, [][]byte, error) {
	s := cryptobyte.String(data)
	var ids, binders cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&ids) || !s.ReadUint16LengthPrefixed(&binders) {
		return nil, nil, decodeErr("ClientHello: truncated pre_shared_key")
	}
	if err := finish(s, "ClientHello: pre_shared_key"); err != nil {
		return nil, nil, err
	}
	if ids.Empty() || binders.Empty() {
		return nil, nil, decodeErr("ClientHello: pre_shared_key without identities or binders")
	}
	var identities []PSKIdentity
	for !ids.Empty() {
		var id PSKIdentity
		var v cryptobyte.String
		if !ids.ReadUint16LengthPrefixed(&v) || v.Empty() || !ids.ReadUint32(&id.ObfuscatedTicketAge) {
			return nil, nil, decodeErr("ClientHello: malformed PSK identity")
		}
		id.Identity = bytesOf(v)
		identities = append(identities, id)
	}
	var list [][]byte
	for !binders.Empty() {
		var v cryptobyte.String
		if !binders.ReadUint8LengthPrefixed(&v) || len(v) < 32 {
			return nil, nil, decodeErr("ClientHello: malformed PSK binder")
		}
		list = append(list, bytesOf(v))
	}
	if len(list) != len(identities) {
		return nil, nil, illegalErr("ClientHello: %d PSK identities but %d binders", len(identities), len(list))
	}
	return identities, list, nil
}

// readOpaque16 reads the one field of ZTLSBFEClientHello
// (docs/ztls-spec.md, Section 7.2: opaque bfe_ciphertext<1..2^16-1>) and
// of ZTLSKEMClientHello (Section 9.3: opaque kem_share<1..2^16-1>): a
// non-empty uint16-prefixed value and nothing after it.
func readOpaque16(d cryptobyte.String, what string) ([]byte, error) {
	var v cryptobyte.String
	if !d.ReadUint16LengthPrefixed(&v) {
		return nil, decodeErr("ClientHello: truncated %s", what)
	}
	if err := finish(d, "ClientHello: "+what); err != nil {
		return nil, err
	}
	if len(v) == 0 {
		return nil, decodeErr("ClientHello: empty %s", what)
	}
	return bytesOf(v), nil
}

// addOpaque16 writes what readOpaque16 reads.
func addOpaque16(v []byte, what string) func(b *Builder) {
	return func(b *Builder) {
		if len(v) > 0xffff {
			b.SetError(internalErr("ClientHello: %s of %d bytes", what, len(v)))
			return
		}
		b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(v) })
	}
}

// readZTLSClientHello reads ZTLSClientHello (docs/ztls-spec.md, Section 2).
func readZTLSClientHello(data []byte) (*ZTLSClientHello, error) {
	s := cryptobyte.String(data)
	z := &ZTLSClientHello{}
	var certHash, binder cryptobyte.String
	if !s.ReadUint32(&z.ZDataID) || !s.CopyBytes(z.ZDataHash[:]) || !s.ReadUint16(&z.EarlySuite) ||
		!s.ReadUint64(&z.ObfuscatedTimeMS) || !s.ReadUint8LengthPrefixed(&certHash) ||
		!s.ReadUint8LengthPrefixed(&binder) {
		return nil, decodeErr("ClientHello: truncated ztls")
	}
	if err := finish(s, "ClientHello: ztls"); err != nil {
		return nil, err
	}
	if len(certHash) != 0 && len(certHash) != 32 {
		return nil, decodeErr("ClientHello: ztls cert_hash of %d bytes", len(certHash))
	}
	if len(binder) < 32 {
		return nil, decodeErr("ClientHello: ztls binder of %d bytes", len(binder))
	}
	z.CertHash = bytesOf(certHash)
	z.Binder = bytesOf(binder)
	return z, nil
}

func (z *ZTLSClientHello) add(b *Builder) {
	if len(z.CertHash) != 0 && len(z.CertHash) != 32 {
		b.SetError(internalErr("ClientHello: ztls cert_hash of %d bytes", len(z.CertHash)))
		return
	}
	if len(z.Binder) < 32 || len(z.Binder) > 255 {
		b.SetError(internalErr("ClientHello: ztls binder of %d bytes", len(z.Binder)))
		return
	}
	b.AddUint32(z.ZDataID)
	b.AddBytes(z.ZDataHash[:])
	b.AddUint16(z.EarlySuite)
	b.AddUint64(z.ObfuscatedTimeMS)
	b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(z.CertHash) })
	b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(z.Binder) })
}

// extensions lists the ClientHello's present typed extensions in canonical
// order, and where Extra goes among them.
func (m *ClientHello) extensions() ([]extBody, int) {
	var t []extBody
	add := func(typ uint16, w func(b *Builder)) { t = append(t, extBody{typ, w}) }
	if m.ServerName != "" {
		add(ExtServerName, m.addServerName)
	}
	if len(m.SupportedVersions) > 0 {
		add(ExtSupportedVersions, m.addSupportedVersions)
	}
	if len(m.SupportedGroups) > 0 {
		add(ExtSupportedGroups, func(b *Builder) { addUint16Vector(b, m.SupportedGroups) })
	}
	if m.HasKeyShare || len(m.KeyShares) > 0 {
		add(ExtKeyShare, m.addKeyShares)
	}
	if len(m.SignatureAlgorithms) > 0 {
		add(ExtSignatureAlgorithms, func(b *Builder) { addUint16Vector(b, m.SignatureAlgorithms) })
	}
	if len(m.SignatureAlgorithmsCert) > 0 {
		add(ExtSignatureAlgorithmsCert, func(b *Builder) { addUint16Vector(b, m.SignatureAlgorithmsCert) })
	}
	if len(m.PSKModes) > 0 {
		add(ExtPSKModes, func(b *Builder) {
			b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(m.PSKModes) })
		})
	}
	if len(m.ALPN) > 0 {
		add(ExtALPN, func(b *Builder) { addALPNList(b, m.ALPN, "ClientHello") })
	}
	if len(m.Cookie) > 0 {
		add(ExtCookie, func(b *Builder) {
			b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(m.Cookie) })
		})
	}
	if m.StatusRequest {
		add(ExtStatusRequest, addOCSPStatusRequest)
	}
	if m.SCT {
		add(ExtSCT, func(*Builder) {})
	}
	if m.RecordSizeLimit != 0 {
		add(ExtRecordSizeLimit, func(b *Builder) { b.AddUint16(m.RecordSizeLimit) })
	}
	if m.PostHandshakeAuth {
		add(ExtPostHandshakeAuth, func(*Builder) {})
	}
	if len(m.CertificateAuthorities) > 0 {
		add(ExtCertificateAuthorities, func(b *Builder) { addAuthorities(b, m.CertificateAuthorities, "ClientHello") })
	}
	extraAt := len(t)
	if len(m.ZTLSKEM) > 0 {
		add(ExtZTLSKEM, addOpaque16(m.ZTLSKEM, "ztls_kem kem_share"))
	}
	if len(m.ZTLSBFE) > 0 {
		add(ExtZTLSBFE, addOpaque16(m.ZTLSBFE, "ztls_bfe ciphertext"))
	}
	if m.EarlyData {
		add(ExtEarlyData, func(*Builder) {})
	}
	if m.ZTLS != nil {
		add(ExtZTLS, m.ZTLS.add)
	}
	if len(m.PSKIdentities) > 0 {
		add(ExtPreSharedKey, m.addPreSharedKey)
	}
	return t, extraAt
}

// addServerName writes ServerNameList (RFC 6066, Section 3) with one
// host_name.
func (m *ClientHello) addServerName(b *Builder) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		b.AddUint8(0) // host_name
		b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes([]byte(m.ServerName)) })
	})
}

// addSupportedVersions writes ProtocolVersion versions<2..254> (RFC 8446,
// Section 4.2.1).
func (m *ClientHello) addSupportedVersions(b *Builder) {
	b.AddUint8LengthPrefixed(func(b *Builder) {
		for _, v := range m.SupportedVersions {
			b.AddUint16(v)
		}
	})
}

// addKeyShares writes KeyShareEntry client_shares<0..2^16-1> (RFC 8446,
// Section 4.2.8).
func (m *ClientHello) addKeyShares(b *Builder) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, ks := range m.KeyShares {
			addKeyShareEntry(b, ks, "ClientHello")
		}
	})
}

// addOCSPStatusRequest writes CertificateStatusRequest (RFC 6066, Section
// 8) for OCSP with no responder IDs and no request extensions.
func addOCSPStatusRequest(b *Builder) {
	b.AddUint8(1)  // ocsp
	b.AddUint16(0) // responder_id_list
	b.AddUint16(0) // request_extensions
}

// addPreSharedKey writes OfferedPsks (RFC 8446, Section 4.2.11):
// PskIdentity identities<7..2^16-1>, PskBinderEntry binders<33..2^16-1>.
func (m *ClientHello) addPreSharedKey(b *Builder) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, id := range m.PSKIdentities {
			if len(id.Identity) == 0 {
				b.SetError(internalErr("ClientHello: empty PSK identity"))
				return
			}
			b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(id.Identity) })
			b.AddUint32(id.ObfuscatedTicketAge)
		}
	})
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, bd := range m.PSKBinders {
			b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(bd) })
		}
	})
}

// Marshal encodes the ClientHello, header included. It refuses values the
// wire syntax cannot carry (such as a 33-byte session ID, a binder shorter
// than 32 bytes, or ztls together with pre_shared_key).
func (m *ClientHello) Marshal() ([]byte, error) {
	if len(m.SessionID) > 32 {
		return nil, internalErr("ClientHello: legacy_session_id of %d bytes", len(m.SessionID))
	}
	if len(m.CipherSuites) == 0 {
		return nil, internalErr("ClientHello: no cipher suites")
	}
	if len(m.PSKIdentities) > 0 {
		if m.ZTLS != nil {
			return nil, internalErr("ClientHello: ztls and pre_shared_key cannot both be last")
		}
		if err := checkBinders(m.PSKBinders, len(m.PSKIdentities)); err != nil {
			return nil, err
		}
	}
	typed, extraAt := m.extensions()
	exts, err := arrangeExtensions("ClientHello", typed, extraAt, m.Extra, m.Order)
	if err != nil {
		return nil, err
	}
	return marshalMsg(TypeClientHello, "ClientHello", func(b *Builder) {
		vers := m.LegacyVersion
		if vers == 0 {
			vers = VersionTLS12
		}
		b.AddUint16(vers)
		b.AddBytes(m.Random[:])
		b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(m.SessionID) })
		addUint16Vector(b, m.CipherSuites)
		b.AddUint8LengthPrefixed(func(b *Builder) {
			if len(m.CompressionMethods) == 0 {
				b.AddUint8(0)
				return
			}
			b.AddBytes(m.CompressionMethods)
		})
		addExtensionsZTLS(b, exts, m.ZTLSCodepoint)
	})
}

func checkBinders(binders [][]byte, n int) error {
	if len(binders) != n {
		return internalErr("ClientHello: %d PSK identities but %d binders", n, len(binders))
	}
	for _, bd := range binders {
		if len(bd) < 32 || len(bd) > 255 {
			return internalErr("ClientHello: PSK binder of %d bytes", len(bd))
		}
	}
	return nil
}

// BindersLen returns how many bytes at the end of the marshalled ClientHello
// the binders take: with pre_shared_key, the 2-byte length of the binders
// list plus each binder with its 1-byte length (RFC 8446, Section 4.2.11.2);
// with ztls, the binder with its 1-byte length (docs/ztls-spec.md, Section 3); else 0.
// The truncated ClientHello the binders cover is msg[:len(msg)-m.BindersLen()].
func (m *ClientHello) BindersLen() int {
	if len(m.PSKIdentities) > 0 {
		n := 2
		for _, bd := range m.PSKBinders {
			n += 1 + len(bd)
		}
		return n
	}
	if m.ZTLS != nil {
		return 1 + len(m.ZTLS.Binder)
	}
	return 0
}

// UpdateBinders overwrites, in place, the PSK binders at the end of msg, the
// output of m.Marshal made with placeholder binders of the final lengths,
// and records them in m.PSKBinders. It fails, leaving msg alone, if the
// count or a length differs from m's or msg does not end in m's binders list.
func (m *ClientHello) UpdateBinders(msg []byte, binders [][]byte) error {
	if len(m.PSKIdentities) == 0 {
		return internalErr("ClientHello: UpdateBinders without pre_shared_key")
	}
	if len(binders) != len(m.PSKBinders) {
		return internalErr("ClientHello: %d binders given for %d", len(binders), len(m.PSKBinders))
	}
	for i := range binders {
		if len(binders[i]) != len(m.PSKBinders[i]) {
			return internalErr("ClientHello: binder %d has %d bytes, placeholder %d", i, len(binders[i]), len(m.PSKBinders[i]))
		}
	}
	tail, err := m.binderTail(msg)
	if err != nil {
		return err
	}
	if int(tail[0])<<8|int(tail[1]) != len(tail)-2 {
		return internalErr("ClientHello: message does not end in its binders list")
	}
	off := 2
	for _, bd := range binders {
		if int(tail[off]) != len(bd) {
			return internalErr("ClientHello: message does not end in its binders list")
		}
		off += 1 + len(bd)
	}
	off = 2
	for i, bd := range binders {
		copy(tail[off+1:], bd)
		m.PSKBinders[i] = append([]byte(nil), bd...)
		off += 1 + len(bd)
	}
	return nil
}

// UpdateZTLSBinder overwrites, in place, the ztls binder at the end of msg
// (see UpdateBinders) and records it in m.ZTLS.Binder.
func (m *ClientHello) UpdateZTLSBinder(msg []byte, binder []byte) error {
	if m.ZTLS == nil || len(m.PSKIdentities) > 0 {
		return internalErr("ClientHello: UpdateZTLSBinder without a trailing ztls extension")
	}
	if len(binder) != len(m.ZTLS.Binder) {
		return internalErr("ClientHello: ztls binder has %d bytes, placeholder %d", len(binder), len(m.ZTLS.Binder))
	}
	tail, err := m.binderTail(msg)
	if err != nil {
		return err
	}
	if int(tail[0]) != len(binder) {
		return internalErr("ClientHello: message does not end in its ztls binder")
	}
	copy(tail[1:], binder)
	m.ZTLS.Binder = append([]byte(nil), binder...)
	return nil
}

// binderTail returns the last BindersLen bytes of msg after checking msg's header.
func (m *ClientHello) binderTail(msg []byte) ([]byte, error) {
	n := m.BindersLen()
	if len(msg) < 4 || msg[0] != TypeClientHello ||
		int(msg[1])<<16|int(msg[2])<<8|int(msg[3]) != len(msg)-4 || len(msg)-4 < n {
		return nil, internalErr("ClientHello: binders given a message that is not a whole ClientHello")
	}
	return msg[len(msg)-n:], nil
}
