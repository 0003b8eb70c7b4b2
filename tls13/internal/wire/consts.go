package wire

import "fmt"

// Handshake message types (RFC 8446, Section 4: HandshakeType).
const (
	TypeClientHello         uint8 = 1
	TypeServerHello         uint8 = 2
	TypeNewSessionTicket    uint8 = 4
	TypeEndOfEarlyData      uint8 = 5
	TypeEncryptedExtensions uint8 = 8
	TypeCertificate         uint8 = 11
	TypeCertificateRequest  uint8 = 13
	TypeCertificateVerify   uint8 = 15
	TypeFinished            uint8 = 20
	TypeKeyUpdate           uint8 = 24
	// TypeCompressedCertificate replaces Certificate (RFC 8879, Section 4).
	TypeCompressedCertificate uint8 = 25
	// TypeMessageHash never travels on the wire: it replaces ClientHello1 in
	// the transcript after a HelloRetryRequest (RFC 8446, Section 4.4.1).
	TypeMessageHash uint8 = 254
)

var typeNames = map[uint8]string{
	TypeClientHello:           "ClientHello",
	TypeServerHello:           "ServerHello",
	TypeNewSessionTicket:      "NewSessionTicket",
	TypeEndOfEarlyData:        "EndOfEarlyData",
	TypeEncryptedExtensions:   "EncryptedExtensions",
	TypeCertificate:           "Certificate",
	TypeCertificateRequest:    "CertificateRequest",
	TypeCertificateVerify:     "CertificateVerify",
	TypeFinished:              "Finished",
	TypeKeyUpdate:             "KeyUpdate",
	TypeCompressedCertificate: "CompressedCertificate",
	TypeMessageHash:           "message_hash",
}

// TypeName returns the name of a handshake message type as the RFCs write
// it in prose ("EncryptedExtensions"), or "handshake type N" for a type
// this package does not know.
func TypeName(typ uint8) string {
	if name, ok := typeNames[typ]; ok {
		return name
	}
	return fmt.Sprintf("handshake type %d", typ)
}

// Extension types (RFC 8446, Section 4.2; RFC 6066; RFC 6962; RFC 7301;
// RFC 7685; RFC 8449; RFC 5746; docs/ztls-spec.md, Section 2).
const (
	ExtServerName              uint16 = 0
	ExtStatusRequest           uint16 = 5
	ExtSupportedGroups         uint16 = 10
	ExtSignatureAlgorithms     uint16 = 13
	ExtALPN                    uint16 = 16
	ExtSCT                     uint16 = 18
	ExtPadding                 uint16 = 21
	ExtCompressCertificate     uint16 = 27 // RFC 8879, Section 3
	ExtRecordSizeLimit         uint16 = 28
	ExtPreSharedKey            uint16 = 41
	ExtEarlyData               uint16 = 42
	ExtSupportedVersions       uint16 = 43
	ExtCookie                  uint16 = 44
	ExtPSKModes                uint16 = 45
	ExtCertificateAuthorities  uint16 = 47
	ExtPostHandshakeAuth       uint16 = 49
	ExtSignatureAlgorithmsCert uint16 = 50
	ExtKeyShare                uint16 = 51
	ExtRenegotiationInfo       uint16 = 0xff01
	// ExtZTLS is the private-use codepoint of the ztls extension (docs/ztls-spec.md, Section 2).
	ExtZTLS uint16 = 0xff5a
	// ExtZTLSBFE is the private-use codepoint of the ztls_bfe extension
	// (docs/ztls-spec.md, Section 7.2).
	ExtZTLSBFE uint16 = 0xff5b
	// ExtZTLSKEM is the private-use codepoint of the ztls_kem extension
	// (docs/ztls-spec.md, Section 9.3).
	ExtZTLSKEM uint16 = 0xff5c
)

// Protocol versions (RFC 8446, Section 4.2.1).
const (
	VersionTLS13 uint16 = 0x0304
	VersionTLS12 uint16 = 0x0303
)

// PSK key exchange modes (RFC 8446, Section 4.2.9).
const (
	PSKModeKE    uint8 = 0
	PSKModeDHEKE uint8 = 1
)

// HelloRetryRequestRandom is the Random of a ServerHello that is really a
// HelloRetryRequest: SHA-256("HelloRetryRequest") (RFC 8446, Section 4.1.3).
var HelloRetryRequestRandom = [32]byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
	0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
	0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// MaxHandshakeSize is HandshakeBuffer's default limit on one handshake
// message's body. Certificate chains beyond it need a larger HandshakeBuffer.Max.
const MaxHandshakeSize = 1 << 17

// placement says in which messages an extension this package knows may
// appear (RFC 8446, Section 4.2 table; RFC 8449; docs/ztls-spec.md, Section 2).
// RFC 8446, Section 4.2: a recognised extension in a message it is not
// specified for is an illegal_parameter; unknown ones are kept opaque.
type placement uint16

const (
	inCH placement = 1 << iota
	inSH
	inHRR
	inEE
	inCT
	inCR
	inNST
)

var extPlacement = map[uint16]placement{
	ExtServerName:              inCH | inEE,
	ExtStatusRequest:           inCH | inCR | inCT,
	ExtSupportedGroups:         inCH | inEE,
	ExtSignatureAlgorithms:     inCH | inCR,
	ExtALPN:                    inCH | inEE,
	ExtSCT:                     inCH | inCR | inCT,
	ExtPadding:                 inCH,
	ExtCompressCertificate:     inCH | inCR,
	ExtRecordSizeLimit:         inCH | inEE,
	ExtPreSharedKey:            inCH | inSH,
	ExtEarlyData:               inCH | inEE | inNST,
	ExtSupportedVersions:       inCH | inSH | inHRR,
	ExtCookie:                  inCH | inHRR,
	ExtPSKModes:                inCH,
	ExtCertificateAuthorities:  inCH | inCR,
	ExtPostHandshakeAuth:       inCH,
	ExtSignatureAlgorithmsCert: inCH | inCR,
	ExtKeyShare:                inCH | inSH | inHRR,
	ExtRenegotiationInfo:       inCH,
	ExtZTLS:                    inCH | inSH,
	ExtZTLSBFE:                 inCH,
	ExtZTLSKEM:                 inCH,
}
