package zdata

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// SchemeFor picks the signature scheme for a leaf public key: ECDSA P-256
// and P-384, Ed25519, and RSA keys with RSA-PSS (never rsa_pkcs1).
func SchemeFor(pub crypto.PublicKey) (tls13.SignatureScheme, error) {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return SchemeECDSAP256SHA256, nil
		case elliptic.P384():
			return SchemeECDSAP384SHA384, nil
		}
		return 0, fmt.Errorf("zdata: ECDSA curve %s not supported for Z-data", k.Curve.Params().Name)
	case ed25519.PublicKey:
		return SchemeEd25519, nil
	case *rsa.PublicKey:
		return SchemeRSAPSSSHA256, nil
	}
	return 0, fmt.Errorf("zdata: leaf key type %T not supported for Z-data", pub)
}

// KnownScheme reports whether ztls v1 allows scheme.
func KnownScheme(scheme tls13.SignatureScheme) bool {
	switch scheme {
	case SchemeRSAPSSSHA256, SchemeECDSAP256SHA256, SchemeECDSAP384SHA384, SchemeEd25519:
		return true
	}
	return false
}

// KnownGroup reports whether ztls allows group: x25519 and secp256r1
// (v1, v2), X25519MLKEM768 (v3, docs/ztls-spec.md, Section 9).
func KnownGroup(group tls13.CurveID) bool { return rawShareLen(group) != 0 }

// knownGroup reports whether the record's group is one its version
// allows: X25519MLKEM768 in v3 records and nowhere else.
func (r *Record) knownGroup() bool {
	return KnownGroup(r.Group) && (r.Group == GroupX25519MLKEM768) == r.V3
}

func digest(scheme tls13.SignatureScheme, msg []byte) (crypto.Hash, []byte) {
	switch scheme {
	case SchemeECDSAP384SHA384:
		h := sha512.Sum384(msg)
		return crypto.SHA384, h[:]
	case SchemeEd25519:
		return 0, msg
	}
	h := sha256.Sum256(msg)
	return crypto.SHA256, h[:]
}

// check validates the fields Sign is about to sign.
func (r *Record) check() error {
	if r.Host == "" || r.Port <= 0 || r.Port > 65535 {
		return errNoHost
	}
	if _, err := CanonicalHost(r.Host); err != nil {
		return err
	}
	if w := r.NotAfter.Sub(r.NotBefore); w <= 0 || w > MaxValidity {
		return ErrWindowTooLong
	}
	if !r.NotBefore.Equal(r.NotBefore.Truncate(time.Second)) || !r.NotAfter.Equal(r.NotAfter.Truncate(time.Second)) {
		return errors.New("zdata: not-before and not-after must be whole seconds")
	}
	if len(r.KeyShare) == 0 {
		return errors.New("zdata: empty key share")
	}
	if n := rawShareLen(r.Group); n != 0 && len(r.KeyShare) != n {
		return fmt.Errorf("zdata: key share is %d bytes, group %d needs %d", len(r.KeyShare), r.Group, n)
	}
	if (r.Group == GroupX25519MLKEM768) != r.V3 || (r.V2 && r.V3) {
		return fmt.Errorf("zdata: group %s goes in v3 records only, and v3 records take no other (docs/ztls-spec.md, Section 9.2)", r.Group)
	}
	if r.ALPN != "" {
		if err := checkALPN(r.ALPN); err != nil {
			return err
		}
		if len("alpn=")+len(r.ALPN) > maxString {
			return errors.New("zdata: alpn too long for one character-string")
		}
	}
	if len(formatNSC(r.NSC)) > maxString {
		return errors.New("zdata: nsc list too long for one character-string")
	}
	return nil
}

// Sign signs the record with the leaf's private key: it picks Scheme from
// the key type, sets LeafHash to the SHA-256 of leafDER and fills
// Signature. Host and Port must be set. ECDSA signatures with an
// *ecdsa.PrivateKey are deterministic (RFC 6979) and Ed25519 always is, so
// fleet members holding the same key and seed publish identical records;
// RSA-PSS uses a random salt (the zdata_hash never covers the signature).
func (r *Record) Sign(key crypto.Signer, leafDER []byte) error {
	leaf, err := x509.ParseCertificate(leafDER)
	if err != nil {
		return fmt.Errorf("zdata: parse leaf: %v", err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return errors.New("zdata: private key does not match the leaf certificate")
	}
	scheme, err := SchemeFor(leaf.PublicKey)
	if err != nil {
		return err
	}
	r.Host = hostOrLower(r.Host)
	r.Scheme = scheme
	r.LeafHash = sha256.Sum256(leafDER)
	if err := r.check(); err != nil {
		return err
	}
	h, d := digest(scheme, r.SignatureInput(r.Host, r.Port))
	var sig []byte
	switch key.Public().(type) {
	case *rsa.PublicKey:
		sig, err = key.Sign(rand.Reader, d, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: h})
	case *ecdsa.PublicKey:
		if _, isGo := key.(*ecdsa.PrivateKey); isGo {
			sig, err = key.Sign(nil, d, h) // RFC 6979: deterministic
		} else {
			sig, err = key.Sign(rand.Reader, d, h)
		}
	default:
		sig, err = key.Sign(rand.Reader, d, h)
	}
	if err != nil {
		return fmt.Errorf("zdata: sign: %v", err)
	}
	r.Signature = sig
	return nil
}

// Verify checks the signature with leaf's key over the signature input for
// host and port, with LeafHash taken from leaf. On success it sets Host
// (canonical), Port and LeafHash. It checks neither the validity window
// nor the leaf's chain and name (Select does both).
func (r *Record) Verify(leaf *x509.Certificate, host string, port int) error {
	if leaf == nil {
		return reasonErr(ReasonNoLeaf, errors.New("zdata: no leaf"))
	}
	if !KnownScheme(r.Scheme) {
		return reasonErr(ReasonUnknownScheme, fmt.Errorf("%w %d", ErrUnknownScheme, r.Scheme))
	}
	if s, err := SchemeFor(leaf.PublicKey); err != nil || s != r.Scheme {
		return reasonErr(ReasonBadSignature, fmt.Errorf("%w: scheme %d does not fit the leaf's key", ErrBadSignature, r.Scheme))
	}
	chost, err := CanonicalHost(host)
	if err != nil {
		return reasonErr(ReasonWrongService, err)
	}
	saved := r.LeafHash
	r.LeafHash = sha256.Sum256(leaf.Raw)
	if !r.verifyWith(leaf.PublicKey, chost, port) {
		r.LeafHash = saved
		return reasonErr(ReasonBadSignature, ErrBadSignature)
	}
	r.Host, r.Port = chost, port
	return nil
}

func (r *Record) verifyWith(pub crypto.PublicKey, host string, port int) bool {
	h, d := digest(r.Scheme, r.SignatureInput(host, port))
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, d, r.Signature)
	case ed25519.PublicKey:
		return ed25519.Verify(k, d, r.Signature)
	case *rsa.PublicKey:
		return rsa.VerifyPSS(k, h, d, r.Signature, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: h}) == nil
	}
	return false
}
