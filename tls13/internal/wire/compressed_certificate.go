package wire

import (
	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// Certificate compression (RFC 8879). The extension travels in
// ClientHello.Extra and CertificateRequest.Extra (type
// ExtCompressCertificate); ReadCompressCertificate and
// CompressCertificateExtension convert it.

// CompressedCertificate is the CompressedCertificate message (RFC 8879,
// Section 4). It replaces a Certificate message, and the transcript takes
// it as sent, compressed.
type CompressedCertificate struct {
	// Raw is exactly the bytes ParseCompressedCertificate read, header included.
	Raw []byte
	// Algorithm is CertificateCompressionAlgorithm algorithm.
	Algorithm uint16
	// UncompressedLength is uint24 uncompressed_length: the length of the
	// Certificate message once uncompressed. As BoringSSL, OpenSSL, GnuTLS
	// and rustls read it, that is the message's body, without the 4-byte
	// handshake header.
	UncompressedLength uint32
	// Compressed is opaque compressed_certificate_message<1..2^24-1>: the
	// Certificate message's body, compressed.
	Compressed []byte
}

// ParseCompressedCertificate parses a whole CompressedCertificate message,
// header included. It checks the syntax only; whether the algorithm was
// offered and the data decompresses is the caller's to check.
func ParseCompressedCertificate(msg []byte) (*CompressedCertificate, error) {
	const name = "CompressedCertificate"
	raw, s, err := readHeader(msg, TypeCompressedCertificate, name)
	if err != nil {
		return nil, err
	}
	m := &CompressedCertificate{Raw: raw}
	var data cryptobyte.String
	if !s.ReadUint16(&m.Algorithm) || !s.ReadUint24(&m.UncompressedLength) ||
		!s.ReadUint24LengthPrefixed(&data) {
		return nil, decodeErr("%s: truncated", name)
	}
	if err := finish(s, name); err != nil {
		return nil, err
	}
	if data.Empty() {
		return nil, decodeErr("%s: empty compressed_certificate_message", name)
	}
	if m.UncompressedLength == 0 {
		// A Certificate body has at least its context and list lengths.
		return nil, alert.Errorf(alert.BadCertificate, "wire: %s: uncompressed_length 0", name)
	}
	m.Compressed = bytesOf(data)
	return m, nil
}

// Marshal encodes the CompressedCertificate message, header included.
func (m *CompressedCertificate) Marshal() ([]byte, error) {
	const name = "CompressedCertificate"
	if len(m.Compressed) == 0 {
		return nil, internalErr("%s: empty compressed data", name)
	}
	if m.UncompressedLength >= 1<<24 {
		return nil, internalErr("%s: uncompressed_length %d does not fit 24 bits", name, m.UncompressedLength)
	}
	return marshalMsg(TypeCompressedCertificate, name, func(b *Builder) {
		b.AddUint16(m.Algorithm)
		b.AddUint24(m.UncompressedLength)
		b.AddUint24LengthPrefixed(func(b *Builder) { b.AddBytes(m.Compressed) })
	})
}

// ReadCompressCertificate reads the compress_certificate extension's data
// (RFC 8879, Section 3): CertificateCompressionAlgorithm
// algorithms<2..2^8-2>. An empty or odd-length list is a decode_error; an
// algorithm listed twice is an illegal_parameter.
func ReadCompressCertificate(data []byte) ([]uint16, error) {
	const what = "compress_certificate"
	s := cryptobyte.String(data)
	var v cryptobyte.String
	if !s.ReadUint8LengthPrefixed(&v) {
		return nil, decodeErr("%s: truncated", what)
	}
	if err := finish(s, what); err != nil {
		return nil, err
	}
	algs, err := readUint16List(v, true, what)
	if err != nil {
		return nil, err
	}
	for i, a := range algs {
		for _, b := range algs[:i] {
			if a == b {
				return nil, illegalErr("%s: algorithm %d listed twice", what, a)
			}
		}
	}
	return algs, nil
}

// CompressCertificateExtension builds the compress_certificate extension
// offering algs, in preference order, for a ClientHello's or a
// CertificateRequest's Extra.
func CompressCertificateExtension(algs []uint16) (Extension, error) {
	const what = "compress_certificate"
	if len(algs) == 0 || len(algs) > 127 {
		return Extension{}, internalErr("%s: %d algorithms", what, len(algs))
	}
	var b Builder
	b.AddUint8LengthPrefixed(func(b *Builder) {
		for _, a := range algs {
			b.AddUint16(a)
		}
	})
	data, err := b.Bytes()
	if err != nil {
		return Extension{}, internalErr("%s: %v", what, err)
	}
	return Extension{Type: ExtCompressCertificate, Data: data}, nil
}

// FindCompressCertificate returns the algorithms of the
// compress_certificate extension in extra, or nil when it is absent. The
// parsers already rejected a second copy of the extension.
func FindCompressCertificate(extra []Extension) ([]uint16, error) {
	for _, e := range extra {
		if e.Type == ExtCompressCertificate {
			return ReadCompressCertificate(e.Data)
		}
	}
	return nil, nil
}
