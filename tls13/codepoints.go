package tls13

import (
	"fmt"

	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// The codepoints a Config chooses among and a ConnectionState reports are
// named types whose String method gives the IANA name, so logs and errors
// print "x25519", not 29 (as crypto/tls's CurveID and SignatureScheme do).

// CipherSuite is a TLS 1.3 cipher suite (RFC 8446, Appendix B.4).
type CipherSuite uint16

// Cipher suites (RFC 8446, Appendix B.4).
const (
	TLS_AES_128_GCM_SHA256       CipherSuite = 0x1301
	TLS_AES_256_GCM_SHA384       CipherSuite = 0x1302
	TLS_CHACHA20_POLY1305_SHA256 CipherSuite = 0x1303
)

// String returns the suite's IANA name ("TLS_AES_128_GCM_SHA256"), or its
// codepoint in hex for a suite this package does not implement.
func (s CipherSuite) String() string { return suite.Name(uint16(s)) }

// CurveID is a named group for the key exchange (RFC 8446, Section 4.2.7:
// enum NamedGroup), elliptic curve or not.
type CurveID uint16

// Named groups (RFC 8446, Section 4.2.7; X25519MLKEM768 from the IETF
// hybrid draft, draft-ietf-tls-ecdhe-mlkem).
const (
	X25519         CurveID = 0x001d
	P256           CurveID = 0x0017
	P384           CurveID = 0x0018
	P521           CurveID = 0x0019
	X25519MLKEM768 CurveID = 0x11ec
)

// String returns the group's IANA name ("x25519", "secp256r1"), or its
// codepoint in hex for a group this package does not implement.
func (g CurveID) String() string { return kex.Name(uint16(g)) }

// SignatureScheme is a signature algorithm of CertificateVerify and of
// certificates (RFC 8446, Section 4.2.3: enum SignatureScheme).
type SignatureScheme uint16

// Signature schemes this package implements (RFC 8446, Section 4.2.3).
// The PKCS1 ones are for certificates only; TLS 1.3 forbids them in
// CertificateVerify.
const (
	ECDSAWithP256AndSHA256 SignatureScheme = SignatureScheme(sig.ECDSAWithP256AndSHA256)
	ECDSAWithP384AndSHA384 SignatureScheme = SignatureScheme(sig.ECDSAWithP384AndSHA384)
	ECDSAWithP521AndSHA512 SignatureScheme = SignatureScheme(sig.ECDSAWithP521AndSHA512)
	Ed25519                SignatureScheme = SignatureScheme(sig.Ed25519)
	PSSWithSHA256          SignatureScheme = SignatureScheme(sig.PSSWithSHA256)    // rsa_pss_rsae_sha256
	PSSWithSHA384          SignatureScheme = SignatureScheme(sig.PSSWithSHA384)    // rsa_pss_rsae_sha384
	PSSWithSHA512          SignatureScheme = SignatureScheme(sig.PSSWithSHA512)    // rsa_pss_rsae_sha512
	PSSPSSWithSHA256       SignatureScheme = SignatureScheme(sig.PSSPSSWithSHA256) // rsa_pss_pss_sha256
	PSSPSSWithSHA384       SignatureScheme = SignatureScheme(sig.PSSPSSWithSHA384) // rsa_pss_pss_sha384
	PSSPSSWithSHA512       SignatureScheme = SignatureScheme(sig.PSSPSSWithSHA512) // rsa_pss_pss_sha512
	PKCS1WithSHA256        SignatureScheme = SignatureScheme(sig.PKCS1WithSHA256)
	PKCS1WithSHA384        SignatureScheme = SignatureScheme(sig.PKCS1WithSHA384)
	PKCS1WithSHA512        SignatureScheme = SignatureScheme(sig.PKCS1WithSHA512)
)

// String returns the scheme's IANA name ("ecdsa_secp256r1_sha256"), or
// its codepoint in hex for a scheme this package does not implement.
func (s SignatureScheme) String() string { return sig.Name(uint16(s)) }

// PSKMode is a PSK key exchange mode (RFC 8446, Section 4.2.9: enum
// PskKeyExchangeMode).
type PSKMode uint8

// PSK key exchange modes (RFC 8446, Section 4.2.9).
const (
	PSKModeKE    PSKMode = 0 // psk_ke: resumption without (EC)DHE, no forward secrecy
	PSKModeDHEKE PSKMode = 1 // psk_dhe_ke: resumption with (EC)DHE
)

// String returns the mode's IANA name ("psk_dhe_ke"), or its codepoint in
// hex for another.
func (m PSKMode) String() string {
	switch m {
	case PSKModeKE:
		return "psk_ke"
	case PSKModeDHEKE:
		return "psk_dhe_ke"
	}
	return fmt.Sprintf("0x%02x", uint8(m))
}

// offersMode reports whether a psk_key_exchange_modes list of the wire
// holds m.
func offersMode(modes []uint8, m PSKMode) bool { return contains(modes, uint8(m)) }

// ExtensionType is a TLS extension's codepoint (RFC 8446, Section 4.2:
// enum ExtensionType).
type ExtensionType uint16

// ExtensionZTLS is the ztls extension's codepoint unless
// Config.ZTLSExtension moves it (docs/ztls-spec.md, Section 2): 0xFF5A, a
// private-use value.
const ExtensionZTLS ExtensionType = ExtensionType(wire.ExtZTLS)

// String returns the name of an extension this package knows ("ztls",
// "key_share"), or the codepoint in hex for another.
func (t ExtensionType) String() string {
	if wire.KnownExtension(uint16(t)) {
		return wire.ExtensionName(uint16(t))
	}
	return fmt.Sprintf("0x%04x", uint16(t))
}

// wireModes converts PSK modes to the values of the wire.
func wireModes(list []PSKMode) []uint8 {
	out := make([]uint8, len(list))
	for i, m := range list {
		out[i] = uint8(m)
	}
	return out
}

// codepoints converts a list of named codepoints to the uint16 values of
// the wire.
func codepoints[T ~uint16](list []T) []uint16 {
	out := make([]uint16, len(list))
	for i, v := range list {
		out[i] = uint16(v)
	}
	return out
}
