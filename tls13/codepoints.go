package tls13

import (
	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/suite"
)

// The codepoints a Config chooses among and a ConnectionState reports.
// For now the type names are aliases of uint16, so that callers can move
// to them before they become named types with a String method.

// CipherSuite is a TLS 1.3 cipher suite (RFC 8446, Appendix B.4).
type CipherSuite = uint16

// Cipher suites (RFC 8446, Appendix B.4).
const (
	TLS_AES_128_GCM_SHA256       CipherSuite = 0x1301
	TLS_AES_256_GCM_SHA384       CipherSuite = 0x1302
	TLS_CHACHA20_POLY1305_SHA256 CipherSuite = 0x1303
)

// CurveID is a named group for the key exchange (RFC 8446, Section 4.2.7:
// enum NamedGroup), elliptic curve or not.
type CurveID = uint16

// Named groups (RFC 8446, Section 4.2.7; X25519MLKEM768 from the IETF
// hybrid draft, draft-ietf-tls-ecdhe-mlkem).
const (
	X25519         CurveID = 0x001d
	P256           CurveID = 0x0017
	P384           CurveID = 0x0018
	P521           CurveID = 0x0019
	X25519MLKEM768 CurveID = 0x11ec
)

// SignatureScheme is a signature algorithm of CertificateVerify and of
// certificates (RFC 8446, Section 4.2.3: enum SignatureScheme).
type SignatureScheme = uint16

// CipherSuiteName returns the IANA name of a TLS 1.3 cipher suite.
func CipherSuiteName[T ~uint16](id T) string { return suite.Name(uint16(id)) }

// GroupName returns the IANA name of a named group.
func GroupName[T ~uint16](id T) string { return kex.Name(uint16(id)) }

// SignatureSchemeName returns the IANA name of a signature scheme.
func SignatureSchemeName[T ~uint16](id T) string { return sig.Name(uint16(id)) }
