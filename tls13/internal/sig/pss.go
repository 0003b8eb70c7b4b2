package sig

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/subtle"
	"crypto/x509"
	encasn1 "encoding/asn1"
	"errors"
	"fmt"
	"io"
	"math/big"

	"golang.org/x/crypto/cryptobyte"
	"golang.org/x/crypto/cryptobyte/asn1"
)

// oidRSASSAPSS is id-RSASSA-PSS (RFC 8017, Appendix A.2.3; RFC 4055,
// Section 3.1), the algorithm of keys restricted to PSS signatures.
var oidRSASSAPSS = encasn1.ObjectIdentifier{1, 2, 840, 113549, 1, 1, 10}

// maxRSABits caps moduli parsed from the wire, so a hostile certificate cannot
// make us do huge modular exponentiations.
const maxRSABits = 16384

// PSSPublicKey marks an RSA public key whose certificate names id-RSASSA-PSS
// in its SubjectPublicKeyInfo. Such a key verifies only rsa_pss_pss_*
// schemes (RFC 8446, Section 4.2.3), never rsa_pss_rsae_*.
type PSSPublicKey struct{ *rsa.PublicKey }

// Equal reports whether x is a PSS public key with the same modulus and
// exponent.
func (k PSSPublicKey) Equal(x crypto.PublicKey) bool {
	other, pss := rsaPublic(x)
	return pss && other != nil && k.PublicKey != nil && k.PublicKey.Equal(other)
}

// PSSPrivateKey is an RSA private key restricted to RSASSA-PSS, loaded from a
// PKCS#8 id-RSASSA-PSS key (which crypto/x509 cannot parse). It implements
// crypto.Signer; Public returns a PSSPublicKey, and Sign refuses anything but
// *rsa.PSSOptions.
type PSSPrivateKey struct{ *rsa.PrivateKey }

// Public returns the PSSPublicKey of k.
func (k PSSPrivateKey) Public() crypto.PublicKey {
	return PSSPublicKey{&k.PrivateKey.PublicKey}
}

// Sign signs digest with RSASSA-PSS; opts must be *rsa.PSSOptions.
func (k PSSPrivateKey) Sign(rand io.Reader, digest []byte, opts crypto.SignerOpts) ([]byte, error) {
	pssOpts, ok := opts.(*rsa.PSSOptions)
	if !ok {
		return nil, errors.New("sig: an RSASSA-PSS key signs only with PSS (pass *rsa.PSSOptions)")
	}
	return rsa.SignPSS(rand, k.PrivateKey, pssOpts.HashFunc(), digest, pssOpts)
}

// Equal reports whether x is a PSS private key with the same value.
func (k PSSPrivateKey) Equal(x crypto.PrivateKey) bool {
	switch o := x.(type) {
	case PSSPrivateKey:
		return k.PrivateKey.Equal(o.PrivateKey)
	case *PSSPrivateKey:
		return o != nil && k.PrivateKey.Equal(o.PrivateKey)
	}
	return false
}

// ParsePublicKey returns the public key of cert: cert.PublicKey when Go's
// crypto/x509 understood it, or a PSSPublicKey parsed from the raw
// SubjectPublicKeyInfo for an id-RSASSA-PSS key.
func ParsePublicKey(cert *x509.Certificate) (crypto.PublicKey, error) {
	if cert == nil {
		return nil, errors.New("sig: no certificate")
	}
	if cert.PublicKey != nil {
		return cert.PublicKey, nil
	}
	pub, err := parsePSSSPKI(cert.RawSubjectPublicKeyInfo)
	if err != nil {
		return nil, fmt.Errorf("sig: certificate %q: unsupported public key: %w", cert.Subject.CommonName, err)
	}
	return pub, nil
}

// readPSSAlgorithm reads an AlgorithmIdentifier and checks it is
// id-RSASSA-PSS with absent or SEQUENCE parameters (RFC 4055, Section 3.1).
// Parameters that restrict the hash are accepted but not enforced.
func readPSSAlgorithm(s *cryptobyte.String) error {
	var algo cryptobyte.String
	var oid encasn1.ObjectIdentifier
	if !s.ReadASN1(&algo, asn1.SEQUENCE) || !algo.ReadASN1ObjectIdentifier(&oid) {
		return errors.New("malformed AlgorithmIdentifier")
	}
	if !oid.Equal(oidRSASSAPSS) {
		return fmt.Errorf("algorithm %v is not id-RSASSA-PSS", oid)
	}
	if algo.Empty() {
		return nil
	}
	var params cryptobyte.String
	if !algo.ReadASN1(&params, asn1.SEQUENCE) || !algo.Empty() {
		return errors.New("malformed RSASSA-PSS parameters")
	}
	return nil
}

// parseRSAPublicKey parses PKCS#1 RSAPublicKey (RFC 8017, Appendix A.1.1).
func parseRSAPublicKey(der []byte) (*rsa.PublicKey, error) {
	input := cryptobyte.String(der)
	var seq cryptobyte.String
	n := new(big.Int)
	var e int64
	if !input.ReadASN1(&seq, asn1.SEQUENCE) || !input.Empty() ||
		!seq.ReadASN1Integer(n) || !seq.ReadASN1Integer(&e) || !seq.Empty() {
		return nil, errors.New("malformed RSAPublicKey")
	}
	if n.Sign() <= 0 || n.Bit(0) == 0 {
		return nil, errors.New("RSA modulus is not a positive odd number")
	}
	if n.BitLen() > maxRSABits {
		return nil, fmt.Errorf("RSA modulus has %d bits, more than %d", n.BitLen(), maxRSABits)
	}
	if e < 3 || e > 1<<31-1 || e%2 == 0 {
		return nil, fmt.Errorf("RSA public exponent %d is not an odd number in [3, 2^31)", e)
	}
	return &rsa.PublicKey{N: n, E: int(e)}, nil
}

// parsePSSSPKI parses a SubjectPublicKeyInfo (RFC 5280, Section 4.1.2.7)
// whose algorithm is id-RSASSA-PSS.
func parsePSSSPKI(der []byte) (PSSPublicKey, error) {
	input := cryptobyte.String(der)
	var spki cryptobyte.String
	if !input.ReadASN1(&spki, asn1.SEQUENCE) || !input.Empty() {
		return PSSPublicKey{}, errors.New("malformed SubjectPublicKeyInfo")
	}
	if err := readPSSAlgorithm(&spki); err != nil {
		return PSSPublicKey{}, err
	}
	var bits encasn1.BitString
	if !spki.ReadASN1BitString(&bits) || !spki.Empty() || bits.BitLength%8 != 0 {
		return PSSPublicKey{}, errors.New("malformed subjectPublicKey BIT STRING")
	}
	k, err := parseRSAPublicKey(bits.Bytes)
	if err != nil {
		return PSSPublicKey{}, err
	}
	return PSSPublicKey{k}, nil
}

// ParsePSSPrivateKey parses a PKCS#8 PrivateKeyInfo (RFC 5208, Section 5;
// RFC 5958 OneAsymmetricKey) whose algorithm is id-RSASSA-PSS, as written by
// `openssl genpkey -algorithm RSA-PSS`.
func ParsePSSPrivateKey(der []byte) (PSSPrivateKey, error) {
	input := cryptobyte.String(der)
	var info cryptobyte.String
	var version int64
	if !input.ReadASN1(&info, asn1.SEQUENCE) || !input.Empty() || !info.ReadASN1Integer(&version) {
		return PSSPrivateKey{}, errors.New("sig: malformed PKCS#8 PrivateKeyInfo")
	}
	if version != 0 && version != 1 {
		return PSSPrivateKey{}, fmt.Errorf("sig: unknown PKCS#8 version %d", version)
	}
	if err := readPSSAlgorithm(&info); err != nil {
		return PSSPrivateKey{}, fmt.Errorf("sig: PKCS#8 key: %w", err)
	}
	var inner cryptobyte.String
	if !info.ReadASN1(&inner, asn1.OCTET_STRING) {
		return PSSPrivateKey{}, errors.New("sig: malformed PKCS#8 privateKey OCTET STRING")
	}
	// attributes [0] and publicKey [1] may follow; neither matters here.
	if !info.SkipOptionalASN1(asn1.Tag(0).Constructed().ContextSpecific()) ||
		!info.SkipOptionalASN1(asn1.Tag(1).ContextSpecific()) || !info.Empty() {
		return PSSPrivateKey{}, errors.New("sig: trailing data in PKCS#8 PrivateKeyInfo")
	}
	if n, ok := rsaModulusBits(inner); ok && n > maxRSABits {
		return PSSPrivateKey{}, fmt.Errorf("sig: RSA-PSS key has %d bits, more than %d", n, maxRSABits)
	}
	k, err := x509.ParsePKCS1PrivateKey(inner)
	if err != nil {
		return PSSPrivateKey{}, fmt.Errorf("sig: RSA-PSS key: %w", err)
	}
	return PSSPrivateKey{k}, nil
}

// rsaModulusBits peeks at the modulus size of a PKCS#1 RSAPrivateKey so that
// oversized keys are refused before any expensive validation.
func rsaModulusBits(der []byte) (int, bool) {
	s := cryptobyte.String(der)
	var seq cryptobyte.String
	var version int64
	n := new(big.Int)
	if !s.ReadASN1(&seq, asn1.SEQUENCE) || !seq.ReadASN1Integer(&version) || !seq.ReadASN1Integer(n) {
		return 0, false
	}
	return n.BitLen(), true
}

// RecoverPSSSalt is a test aid: it opens an RSASSA-PSS signature with the
// public key (RFC 8017, Section 8.1.2) and decodes the encoded message
// (EMSA-PSS-VERIFY, RFC 8017, Section 9.1.2) to return the salt the signer
// used. Feeding that salt to Sign as its random input reproduces the
// signature byte for byte, which known-answer tests such as RFC 8448 need.
// digest is the hash of the signed content under h. It fails unless the
// signature is valid.
func RecoverPSSSalt(pub *rsa.PublicKey, h crypto.Hash, digest, sig []byte) ([]byte, error) {
	if pub == nil || pub.N == nil || pub.N.Sign() <= 0 || pub.E < 2 {
		return nil, errors.New("sig: RecoverPSSSalt: invalid public key")
	}
	if !h.Available() || len(digest) != h.Size() {
		return nil, errors.New("sig: RecoverPSSSalt: digest does not match the hash")
	}
	k := (pub.N.BitLen() + 7) / 8
	if len(sig) != k {
		return nil, fmt.Errorf("sig: RecoverPSSSalt: signature is %d bytes, want %d", len(sig), k)
	}
	s := new(big.Int).SetBytes(sig)
	if s.Cmp(pub.N) >= 0 {
		return nil, errors.New("sig: RecoverPSSSalt: signature representative out of range")
	}
	m := new(big.Int).Exp(s, big.NewInt(int64(pub.E)), pub.N)

	emBits := pub.N.BitLen() - 1
	emLen := (emBits + 7) / 8
	hLen := h.Size()
	if emLen < hLen+2 {
		return nil, errors.New("sig: RecoverPSSSalt: key too small for the hash")
	}
	full := m.FillBytes(make([]byte, k))
	if k > emLen && full[0] != 0 { // the top byte is empty when emBits is a multiple of 8
		return nil, errors.New("sig: RecoverPSSSalt: inconsistent encoded message")
	}
	em := full[k-emLen:]
	if em[emLen-1] != 0xbc {
		return nil, errors.New("sig: RecoverPSSSalt: encoded message does not end in 0xbc")
	}
	maskedDB := em[:emLen-hLen-1]
	hashH := em[emLen-hLen-1 : emLen-1]
	topMask := byte(0xff >> (8*emLen - emBits))
	if maskedDB[0]&^topMask != 0 {
		return nil, errors.New("sig: RecoverPSSSalt: leftmost bits of the encoded message are set")
	}
	db := mgf1XOR(h, maskedDB, hashH)
	db[0] &= topMask
	i := 0
	for i < len(db) && db[i] == 0 {
		i++
	}
	if i == len(db) || db[i] != 0x01 {
		return nil, errors.New("sig: RecoverPSSSalt: no 0x01 separator in the decoded block")
	}
	salt := db[i+1:]
	hh := h.New()
	hh.Write(make([]byte, 8))
	hh.Write(digest)
	hh.Write(salt)
	if subtle.ConstantTimeCompare(hh.Sum(nil), hashH) != 1 {
		return nil, errors.New("sig: RecoverPSSSalt: signature does not match the digest")
	}
	return bytes.Clone(salt), nil
}

// mgf1XOR returns data XOR MGF1(seed, len(data)) (RFC 8017, Appendix B.2.1).
func mgf1XOR(h crypto.Hash, data, seed []byte) []byte {
	out := bytes.Clone(data)
	var counter [4]byte
	done := 0
	for done < len(out) {
		hh := h.New()
		hh.Write(seed)
		hh.Write(counter[:])
		for _, b := range hh.Sum(nil) {
			if done == len(out) {
				break
			}
			out[done] ^= b
			done++
		}
		for j := 3; j >= 0; j-- {
			counter[j]++
			if counter[j] != 0 {
				break
			}
		}
	}
	return out
}
