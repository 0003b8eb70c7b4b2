package sig

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// Signature schemes (RFC 8446, Section 4.2.3: enum SignatureScheme).
const (
	ECDSAWithP256AndSHA256 uint16 = 0x0403
	ECDSAWithP384AndSHA384 uint16 = 0x0503
	ECDSAWithP521AndSHA512 uint16 = 0x0603
	Ed25519                uint16 = 0x0807
	PSSWithSHA256          uint16 = 0x0804 // rsa_pss_rsae_sha256
	PSSWithSHA384          uint16 = 0x0805 // rsa_pss_rsae_sha384
	PSSWithSHA512          uint16 = 0x0806 // rsa_pss_rsae_sha512
	PSSPSSWithSHA256       uint16 = 0x0809 // rsa_pss_pss_sha256
	PSSPSSWithSHA384       uint16 = 0x080a // rsa_pss_pss_sha384
	PSSPSSWithSHA512       uint16 = 0x080b // rsa_pss_pss_sha512
	PKCS1WithSHA256        uint16 = 0x0401
	PKCS1WithSHA384        uint16 = 0x0501
	PKCS1WithSHA512        uint16 = 0x0601
	PKCS1WithSHA1          uint16 = 0x0201
	ECDSAWithSHA1          uint16 = 0x0203
)

// Context strings of CertificateVerify (RFC 8446, Section 4.4.3).
const (
	ServerContext = "TLS 1.3, server CertificateVerify"
	ClientContext = "TLS 1.3, client CertificateVerify"
)

// minRSABits is the smallest RSA modulus Verify and Sign accept. RFC 8448's
// example server key has 1024 bits, so the floor is 1024, not 2048.
const minRSABits = 1024

// alertf is a signature failure the peer caused, with the alert to send:
// decrypt_error for a signature that does not verify, illegal_parameter
// for a scheme that does not match the key or is not allowed in TLS 1.3,
// handshake_failure when no common scheme exists, bad_certificate for an
// RSA key below 1024 bits, unsupported_certificate for a key type this
// package does not know.
func alertf(a alert.Alert, format string, args ...any) error {
	return alert.Errorf(a, format, args...)
}

type kind uint8

const (
	kindECDSA kind = iota + 1
	kindEd25519
	kindRSAE   // RSASSA-PSS with an rsaEncryption key
	kindPSSPSS // RSASSA-PSS with an id-RSASSA-PSS key
	kindPKCS1  // RSASSA-PKCS1-v1_5: certificates only in TLS 1.3
)

type schemeInfo struct {
	name  string
	kind  kind
	hash  crypto.Hash
	curve elliptic.Curve // ECDSA schemes bind the curve in TLS 1.3; nil for ecdsa_sha1
}

var schemes = map[uint16]schemeInfo{
	ECDSAWithP256AndSHA256: {"ecdsa_secp256r1_sha256", kindECDSA, crypto.SHA256, elliptic.P256()},
	ECDSAWithP384AndSHA384: {"ecdsa_secp384r1_sha384", kindECDSA, crypto.SHA384, elliptic.P384()},
	ECDSAWithP521AndSHA512: {"ecdsa_secp521r1_sha512", kindECDSA, crypto.SHA512, elliptic.P521()},
	Ed25519:                {"ed25519", kindEd25519, 0, nil},
	PSSWithSHA256:          {"rsa_pss_rsae_sha256", kindRSAE, crypto.SHA256, nil},
	PSSWithSHA384:          {"rsa_pss_rsae_sha384", kindRSAE, crypto.SHA384, nil},
	PSSWithSHA512:          {"rsa_pss_rsae_sha512", kindRSAE, crypto.SHA512, nil},
	PSSPSSWithSHA256:       {"rsa_pss_pss_sha256", kindPSSPSS, crypto.SHA256, nil},
	PSSPSSWithSHA384:       {"rsa_pss_pss_sha384", kindPSSPSS, crypto.SHA384, nil},
	PSSPSSWithSHA512:       {"rsa_pss_pss_sha512", kindPSSPSS, crypto.SHA512, nil},
	PKCS1WithSHA256:        {"rsa_pkcs1_sha256", kindPKCS1, crypto.SHA256, nil},
	PKCS1WithSHA384:        {"rsa_pkcs1_sha384", kindPKCS1, crypto.SHA384, nil},
	PKCS1WithSHA512:        {"rsa_pkcs1_sha512", kindPKCS1, crypto.SHA512, nil},
	PKCS1WithSHA1:          {"rsa_pkcs1_sha1", kindPKCS1, crypto.SHA1, nil},
	ECDSAWithSHA1:          {"ecdsa_sha1", kindECDSA, crypto.SHA1, nil},
}

// Name returns the IANA name of a scheme ("rsa_pss_rsae_sha256"), or its hex
// codepoint ("0x0807" style) when unknown.
func Name(s uint16) string {
	if info, ok := schemes[s]; ok {
		return info.name
	}
	return fmt.Sprintf("0x%04x", s)
}

func names(list []uint16) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = Name(s)
	}
	return strings.Join(out, ",")
}

// SupportedForCertificateVerify returns the schemes this engine accepts in
// CertificateVerify, in preference order. The slice is fresh on each call.
func SupportedForCertificateVerify() []uint16 {
	return []uint16{
		Ed25519,
		ECDSAWithP256AndSHA256, ECDSAWithP384AndSHA384, ECDSAWithP521AndSHA512,
		PSSWithSHA256, PSSWithSHA384, PSSWithSHA512,
		PSSPSSWithSHA256, PSSPSSWithSHA384, PSSPSSWithSHA512,
	}
}

// SupportedForCertificates returns the schemes for signature_algorithms_cert
// (RFC 8446, Section 4.2.3): those of CertificateVerify plus rsa_pkcs1_sha256,
// _sha384 and _sha512, which certificates still use widely.
func SupportedForCertificates() []uint16 {
	return append(SupportedForCertificateVerify(), PKCS1WithSHA256, PKCS1WithSHA384, PKCS1WithSHA512)
}

// allowedInCertificateVerify: RFC 8446, Section 4.4.3 forbids PKCS#1 v1.5 and
// SHA-1 in CertificateVerify.
func allowedInCertificateVerify(info schemeInfo) bool {
	return info.kind != kindPKCS1 && info.hash != crypto.SHA1
}

// SignedContent returns the bytes a CertificateVerify signature covers
// (RFC 8446, Section 4.4.3): 64 spaces, the context string, a zero byte, and
// the transcript hash.
func SignedContent(context string, transcriptHash []byte) []byte {
	out := make([]byte, 0, 64+len(context)+1+len(transcriptHash))
	for range 64 {
		out = append(out, 0x20)
	}
	out = append(out, context...)
	out = append(out, 0)
	return append(out, transcriptHash...)
}

// rsaPublic returns the RSA key inside an RSA or PSS public key and whether
// it is an id-RSASSA-PSS key.
func rsaPublic(pub crypto.PublicKey) (k *rsa.PublicKey, pss bool) {
	switch p := pub.(type) {
	case *rsa.PublicKey:
		return p, false
	case PSSPublicKey:
		return p.PublicKey, true
	case *PSSPublicKey:
		if p == nil {
			return nil, true
		}
		return p.PublicKey, true
	}
	return nil, false
}

// pssFits reports whether an RSA key of this size can carry a PSS signature
// with salt length = hash length (RFC 8017, Section 9.1.1: emLen >= 2hLen+2).
func pssFits(k *rsa.PublicKey, h crypto.Hash) bool {
	emLen := (k.N.BitLen() - 1 + 7) / 8
	return emLen >= 2*h.Size()+2
}

// SchemesForKey returns the CertificateVerify schemes a key can produce, in
// preference order: ECDSA for the key's curve; Ed25519; rsa_pss_rsae_* for an
// RSA key; rsa_pss_pss_* for a PSSPublicKey. RSA schemes whose hash does not
// fit the modulus (SHA-512 with a 1024-bit key) and RSA keys below 1024 bits
// are left out. Unknown key types give nil.
func SchemesForKey(pub crypto.PublicKey) []uint16 {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		for _, s := range []uint16{ECDSAWithP256AndSHA256, ECDSAWithP384AndSHA384, ECDSAWithP521AndSHA512} {
			if p != nil && p.Curve == schemes[s].curve {
				return []uint16{s}
			}
		}
		return nil
	case ed25519.PublicKey:
		if len(p) != ed25519.PublicKeySize {
			return nil
		}
		return []uint16{Ed25519}
	}
	k, pss := rsaPublic(pub)
	if k == nil || k.N == nil || k.N.BitLen() < minRSABits {
		return nil
	}
	list := []uint16{PSSWithSHA256, PSSWithSHA384, PSSWithSHA512}
	if pss {
		list = []uint16{PSSPSSWithSHA256, PSSPSSWithSHA384, PSSPSSWithSHA512}
	}
	var out []uint16
	for _, s := range list {
		if pssFits(k, schemes[s].hash) {
			out = append(out, s)
		}
	}
	return out
}

// keyName describes a public key for error messages.
func keyName(pub crypto.PublicKey) string {
	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		if p != nil && p.Curve != nil {
			return "ECDSA " + p.Curve.Params().Name
		}
		return "ECDSA"
	case ed25519.PublicKey:
		return "Ed25519"
	}
	if k, pss := rsaPublic(pub); k != nil && k.N != nil {
		if pss {
			return fmt.Sprintf("RSASSA-PSS %d-bit", k.N.BitLen())
		}
		return fmt.Sprintf("RSA %d-bit", k.N.BitLen())
	}
	return fmt.Sprintf("%T", pub)
}

// Select picks our most preferred scheme for pub among those the peer offered
// in signature_algorithms. With no overlap it returns an *alert.Error with alert
// handshake_failure.
func Select(pub crypto.PublicKey, peer []uint16) (uint16, error) {
	ours := SchemesForKey(pub)
	for _, s := range ours {
		if slices.Contains(peer, s) {
			return s, nil
		}
	}
	return 0, alertf(alert.HandshakeFailure, "peer offered no signature scheme our %s key can make (peer: %s; key: %s)",
		keyName(pub), names(peer), names(ours))
}

// Sign makes a CertificateVerify signature over SignedContent(context,
// transcriptHash) with key and scheme. RSA-PSS signatures use salt length =
// hash length and read the salt from rand (nil means crypto/rand.Reader), so
// fixed randomness gives fixed signatures; ECDSA and Ed25519 ignore rand where
// crypto/ecdsa does. The scheme must be one of SchemesForKey(key.Public()).
func Sign(rand io.Reader, key crypto.Signer, scheme uint16, context string, transcriptHash []byte) ([]byte, error) {
	if key == nil {
		return nil, errors.New("sig: no signing key")
	}
	if rand == nil {
		rand = cryptorand.Reader
	}
	info, ok := schemes[scheme]
	if !ok || !allowedInCertificateVerify(info) {
		return nil, fmt.Errorf("sig: scheme %s cannot sign a TLS 1.3 CertificateVerify", Name(scheme))
	}
	if !slices.Contains(SchemesForKey(key.Public()), scheme) {
		return nil, fmt.Errorf("sig: a %s key cannot sign with %s", keyName(key.Public()), Name(scheme))
	}
	content := SignedContent(context, transcriptHash)
	if info.kind == kindEd25519 {
		s, err := key.Sign(rand, content, crypto.Hash(0))
		if err != nil {
			return nil, fmt.Errorf("sig: ed25519 signing: %w", err)
		}
		return s, nil
	}
	h := info.hash.New()
	h.Write(content)
	digest := h.Sum(nil)
	var (
		s   []byte
		err error
	)
	switch info.kind {
	case kindECDSA:
		s, err = signECDSA(rand, key, info.hash, digest)
	case kindRSAE, kindPSSPSS:
		opts := &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: info.hash}
		switch k := key.(type) {
		case *rsa.PrivateKey:
			s, err = rsa.SignPSS(rand, k, info.hash, digest, opts)
		case PSSPrivateKey:
			s, err = rsa.SignPSS(rand, k.PrivateKey, info.hash, digest, opts)
		case *PSSPrivateKey:
			s, err = rsa.SignPSS(rand, k.PrivateKey, info.hash, digest, opts)
		default: // hardware or remote signers
			s, err = key.Sign(rand, digest, opts)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("sig: %s signing: %w", Name(scheme), err)
	}
	return s, nil
}

// Verify checks a CertificateVerify signature made with scheme over
// SignedContent(context, transcriptHash) by the holder of pub. It refuses
// schemes TLS 1.3 forbids there (rsa_pkcs1_*, SHA-1) and schemes that do not
// fit the key (a P-384 scheme with a P-256 key, rsae with a PSS key and the
// reverse) with illegal_parameter, and a bad signature with decrypt_error. RSA
// keys need at least 1024 bits.
func Verify(pub crypto.PublicKey, scheme uint16, context string, transcriptHash, signature []byte) error {
	info, ok := schemes[scheme]
	if !ok {
		return alertf(alert.IllegalParameter, "CertificateVerify uses unknown signature scheme %s", Name(scheme))
	}
	if !allowedInCertificateVerify(info) {
		return alertf(alert.IllegalParameter, "CertificateVerify uses %s, which TLS 1.3 forbids there (RFC 8446, Section 4.4.3)", info.name)
	}
	content := SignedContent(context, transcriptHash)
	mismatch := func() error {
		return alertf(alert.IllegalParameter, "CertificateVerify scheme %s does not match the certificate's %s key", info.name, keyName(pub))
	}
	bad := func() error {
		return alertf(alert.DecryptError, "invalid %s signature in CertificateVerify", info.name)
	}

	switch p := pub.(type) {
	case *ecdsa.PublicKey:
		if info.kind != kindECDSA {
			return mismatch()
		}
		if p == nil || p.Curve != info.curve {
			return mismatch()
		}
		h := info.hash.New()
		h.Write(content)
		if !verifyECDSA(p, h.Sum(nil), signature) {
			return bad()
		}
		return nil
	case ed25519.PublicKey:
		if info.kind != kindEd25519 {
			return mismatch()
		}
		if len(p) != ed25519.PublicKeySize {
			return alertf(alert.BadCertificate, "Ed25519 public key is %d bytes, want %d", len(p), ed25519.PublicKeySize)
		}
		if !ed25519.Verify(p, content, signature) {
			return bad()
		}
		return nil
	}

	k, pss := rsaPublic(pub)
	if k == nil || k.N == nil {
		return alertf(alert.UnsupportedCertificate, "cannot verify CertificateVerify with a %s public key", keyName(pub))
	}
	if (pss && info.kind != kindPSSPSS) || (!pss && info.kind != kindRSAE) {
		return mismatch()
	}
	if k.N.BitLen() < minRSABits {
		return alertf(alert.BadCertificate, "certificate's RSA key has %d bits, fewer than the %d required", k.N.BitLen(), minRSABits)
	}
	h := info.hash.New()
	h.Write(content)
	if err := rsa.VerifyPSS(k, info.hash, h.Sum(nil), signature, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}); err != nil {
		return bad()
	}
	return nil
}
