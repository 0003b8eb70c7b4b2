package wire

import (
	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// CertificateEntry is one CertificateEntry of a Certificate message
// (RFC 8446, Section 4.4.2) holding an X.509 certificate.
type CertificateEntry struct {
	// Data is opaque cert_data<1..2^24-1>: the DER certificate.
	Data []byte
	// OCSPStaple is the entry's status_request extension, a CertificateStatus
	// of type ocsp holding OCSPResponse ocsp_response<1..2^24-1>
	// (RFC 8446, Section 4.4.2.1; RFC 6066, Section 8); nil means absent.
	OCSPStaple []byte
	// SCTs is the entry's signed_certificate_timestamp extension,
	// SerializedSCT sct_list<1..2^16-1>, each opaque<1..2^16-1>
	// (RFC 6962, Section 3.3); nil means absent.
	SCTs [][]byte
	// Extra holds the entry's unknown extensions, opaque. Marshal writes
	// status_request, signed_certificate_timestamp, then Extra.
	Extra []Extension
}

// Certificate is the Certificate message (RFC 8446, Section 4.4.2).
type Certificate struct {
	// Raw is exactly the bytes ParseCertificate read, header included.
	Raw []byte
	// RequestContext is opaque certificate_request_context<0..2^8-1>.
	RequestContext []byte
	// Entries is CertificateEntry certificate_list<0..2^24-1>, leaf first.
	Entries []CertificateEntry
}

// ParseCertificate parses a whole Certificate message, header included.
func ParseCertificate(msg []byte) (*Certificate, error) {
	const name = "Certificate"
	raw, s, err := readHeader(msg, TypeCertificate, name)
	if err != nil {
		return nil, err
	}
	m := &Certificate{Raw: raw}
	var ctx, list cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&ctx) || !s.ReadUint24LengthPrefixed(&list) {
		return nil, decodeErr("%s: truncated", name)
	}
	if err := finish(s, name); err != nil {
		return nil, err
	}
	m.RequestContext = bytesOf(ctx)
	for !list.Empty() {
		var data cryptobyte.String
		if !list.ReadUint24LengthPrefixed(&data) || data.Empty() {
			return nil, decodeErr("%s: malformed cert_data", name)
		}
		entry := CertificateEntry{Data: bytesOf(data)}
		exts, err := readExtensions(&list, name, inCT)
		if err != nil {
			return nil, err
		}
		for _, e := range exts {
			if err := entry.readExtension(e); err != nil {
				return nil, err
			}
		}
		m.Entries = append(m.Entries, entry)
	}
	return m, nil
}

func (c *CertificateEntry) readExtension(e Extension) error {
	const name = "Certificate"
	d := cryptobyte.String(e.Data)
	switch e.Type {
	case ExtStatusRequest:
		var typ uint8
		var resp cryptobyte.String
		if !d.ReadUint8(&typ) {
			return decodeErr("%s: empty status_request", name)
		}
		if typ != 1 {
			return illegalErr("%s: status_request of type %d", name, typ)
		}
		if !d.ReadUint24LengthPrefixed(&resp) || resp.Empty() || !d.Empty() {
			return decodeErr("%s: malformed OCSP response", name)
		}
		c.OCSPStaple = bytesOf(resp)
	case ExtSCT:
		var list cryptobyte.String
		if !d.ReadUint16LengthPrefixed(&list) || list.Empty() || !d.Empty() {
			return decodeErr("%s: malformed SCT list", name)
		}
		for !list.Empty() {
			var sct cryptobyte.String
			if !list.ReadUint16LengthPrefixed(&sct) || sct.Empty() {
				return decodeErr("%s: malformed SCT", name)
			}
			c.SCTs = append(c.SCTs, bytesOf(sct))
		}
	default:
		c.Extra = append(c.Extra, e)
	}
	return nil
}

// Marshal encodes the Certificate message, header included.
func (m *Certificate) Marshal() ([]byte, error) {
	const name = "Certificate"
	return marshalMsg(TypeCertificate, name, func(b *Builder) {
		b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(m.RequestContext) })
		b.AddUint24LengthPrefixed(func(b *Builder) {
			for _, c := range m.Entries {
				if len(c.Data) == 0 {
					b.SetError(internalErr("%s: empty cert_data", name))
					return
				}
				b.AddUint24LengthPrefixed(func(b *Builder) { b.AddBytes(c.Data) })
				addExtensions(b, c.extensions(b))
			}
		})
	})
}

func (c *CertificateEntry) extensions(b *Builder) []extBody {
	const name = "Certificate"
	var t []extBody
	if len(c.OCSPStaple) > 0 {
		t = append(t, extBody{ExtStatusRequest, func(b *Builder) {
			b.AddUint8(1) // ocsp
			b.AddUint24LengthPrefixed(func(b *Builder) { b.AddBytes(c.OCSPStaple) })
		}})
	}
	if len(c.SCTs) > 0 {
		t = append(t, extBody{ExtSCT, func(b *Builder) {
			b.AddUint16LengthPrefixed(func(b *Builder) {
				for _, sct := range c.SCTs {
					if len(sct) == 0 {
						b.SetError(internalErr("%s: empty SCT", name))
						return
					}
					b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(sct) })
				}
			})
		}})
	}
	exts, err := arrangeExtensions(name, t, len(t), c.Extra, nil)
	if err != nil {
		b.SetError(err)
	}
	return exts
}

// CertificateRequest is the CertificateRequest message (RFC 8446, Section 4.3.2).
type CertificateRequest struct {
	// Raw is exactly the bytes ParseCertificateRequest read, header included.
	Raw []byte
	// RequestContext is opaque certificate_request_context<0..2^8-1>.
	RequestContext []byte
	// SignatureAlgorithms is signature_algorithms (RFC 8446, Section 4.2.3),
	// which a CertificateRequest must carry (else missing_extension).
	SignatureAlgorithms []uint16
	// SignatureAlgorithmsCert is signature_algorithms_cert; nil means absent.
	SignatureAlgorithmsCert []uint16
	// CertificateAuthorities is certificate_authorities (RFC 8446,
	// Section 4.2.4): DistinguishedName authorities<3..2^16-1>, each a DER
	// Name, opaque<1..2^16-1>; nil means absent.
	CertificateAuthorities [][]byte
	// Extra holds other extensions, opaque (including status_request,
	// signed_certificate_timestamp and oid_filters).
	Extra []Extension
	// Order lists extension types in wire order; ParseCertificateRequest
	// fills it. When nil, Marshal writes signature_algorithms,
	// signature_algorithms_cert, certificate_authorities, then Extra. When
	// set, see ClientHello.Order.
	Order []uint16
}

// ParseCertificateRequest parses a whole CertificateRequest message, header included.
func ParseCertificateRequest(msg []byte) (*CertificateRequest, error) {
	const name = "CertificateRequest"
	raw, s, err := readHeader(msg, TypeCertificateRequest, name)
	if err != nil {
		return nil, err
	}
	m := &CertificateRequest{Raw: raw}
	var ctx cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&ctx) {
		return nil, decodeErr("%s: truncated", name)
	}
	m.RequestContext = bytesOf(ctx)
	exts, order, err := readLastExtensions(&s, name, inCR)
	if err != nil {
		return nil, err
	}
	m.Order = order
	for _, e := range exts {
		switch e.Type {
		case ExtSignatureAlgorithms:
			m.SignatureAlgorithms, err = readUint16Vector(e.Data, name+": signature_algorithms")
		case ExtSignatureAlgorithmsCert:
			m.SignatureAlgorithmsCert, err = readUint16Vector(e.Data, name+": signature_algorithms_cert")
		case ExtCertificateAuthorities:
			m.CertificateAuthorities, err = readAuthorities(e.Data, name)
		default:
			m.Extra = append(m.Extra, e)
		}
		if err != nil {
			return nil, err
		}
	}
	if m.SignatureAlgorithms == nil {
		return nil, alert.Errorf(alert.MissingExtension, "wire: %s without signature_algorithms", name)
	}
	return m, nil
}

// readAuthorities reads certificate_authorities (RFC 8446, Section 4.2.4):
// DistinguishedName authorities<3..2^16-1>, each opaque<1..2^16-1>.
func readAuthorities(data []byte, name string) ([][]byte, error) {
	s := cryptobyte.String(data)
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) || list.Empty() || !s.Empty() {
		return nil, decodeErr("%s: malformed certificate_authorities", name)
	}
	var out [][]byte
	for !list.Empty() {
		var dn cryptobyte.String
		if !list.ReadUint16LengthPrefixed(&dn) || dn.Empty() {
			return nil, decodeErr("%s: malformed distinguished name", name)
		}
		out = append(out, bytesOf(dn))
	}
	return out, nil
}

// addAuthorities writes certificate_authorities' body.
func addAuthorities(b *Builder, dns [][]byte, name string) {
	b.AddUint16LengthPrefixed(func(b *Builder) {
		for _, dn := range dns {
			if len(dn) == 0 {
				b.SetError(internalErr("%s: empty distinguished name", name))
				return
			}
			b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(dn) })
		}
	})
}

// Marshal encodes the CertificateRequest message, header included.
func (m *CertificateRequest) Marshal() ([]byte, error) {
	const name = "CertificateRequest"
	if len(m.SignatureAlgorithms) == 0 && !hasExtra(m.Extra, ExtSignatureAlgorithms) {
		return nil, internalErr("%s: no signature algorithms", name)
	}
	var t []extBody
	add := func(typ uint16, w func(b *Builder)) { t = append(t, extBody{typ, w}) }
	if len(m.SignatureAlgorithms) > 0 {
		add(ExtSignatureAlgorithms, func(b *Builder) { addUint16Vector(b, m.SignatureAlgorithms) })
	}
	if len(m.SignatureAlgorithmsCert) > 0 {
		add(ExtSignatureAlgorithmsCert, func(b *Builder) { addUint16Vector(b, m.SignatureAlgorithmsCert) })
	}
	if len(m.CertificateAuthorities) > 0 {
		add(ExtCertificateAuthorities, func(b *Builder) { addAuthorities(b, m.CertificateAuthorities, name) })
	}
	exts, err := arrangeExtensions(name, t, len(t), m.Extra, m.Order)
	if err != nil {
		return nil, err
	}
	return marshalMsg(TypeCertificateRequest, name, func(b *Builder) {
		b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(m.RequestContext) })
		addExtensions(b, exts)
	})
}

// CertificateVerify is the CertificateVerify message (RFC 8446, Section 4.4.3).
type CertificateVerify struct {
	// Raw is exactly the bytes ParseCertificateVerify read, header included.
	Raw []byte
	// Scheme is SignatureScheme algorithm.
	Scheme uint16
	// Signature is opaque signature<0..2^16-1>.
	Signature []byte
}

// ParseCertificateVerify parses a whole CertificateVerify message, header included.
func ParseCertificateVerify(msg []byte) (*CertificateVerify, error) {
	const name = "CertificateVerify"
	raw, s, err := readHeader(msg, TypeCertificateVerify, name)
	if err != nil {
		return nil, err
	}
	m := &CertificateVerify{Raw: raw}
	var sig cryptobyte.String
	if !s.ReadUint16(&m.Scheme) || !s.ReadUint16LengthPrefixed(&sig) {
		return nil, decodeErr("%s: truncated", name)
	}
	if err := finish(s, name); err != nil {
		return nil, err
	}
	m.Signature = bytesOf(sig)
	return m, nil
}

// Marshal encodes the CertificateVerify message, header included.
func (m *CertificateVerify) Marshal() ([]byte, error) {
	return marshalMsg(TypeCertificateVerify, "CertificateVerify", func(b *Builder) {
		b.AddUint16(m.Scheme)
		b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(m.Signature) })
	})
}
