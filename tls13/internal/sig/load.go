package sig

import (
	"crypto"
	"crypto/ecdh"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Certified is a certificate chain with its private key, ready for a server
// or a client that authenticates. Chain holds DER certificates, leaf first,
// then intermediates in file order. Public is the leaf's public key as
// ParsePublicKey returns it (a PSSPublicKey for id-RSASSA-PSS certificates),
// and Key's public half equals it.
type Certified struct {
	Chain  [][]byte
	Leaf   *x509.Certificate
	Key    crypto.Signer
	Public crypto.PublicKey
}

// LoadKeyPair reads a PEM certificate chain (leaf first) and a PEM private
// key: PKCS#8 ("PRIVATE KEY", including id-RSASSA-PSS keys), PKCS#1 ("RSA
// PRIVATE KEY") or SEC1 ("EC PRIVATE KEY"). It checks that the key belongs to
// the leaf. Error messages name the file and say how to fix it; they name
// no command-line flag, which is the caller's to add.
func LoadKeyPair(certFile, keyFile string) (*Certified, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("sig: read certificate chain: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("sig: read private key: %w", err)
	}
	return parseKeyPair(certPEM, keyPEM, certFile, keyFile)
}

// ParseKeyPair is LoadKeyPair for PEM bytes already in memory.
func ParseKeyPair(certPEM, keyPEM []byte) (*Certified, error) {
	return parseKeyPair(certPEM, keyPEM, "the certificate PEM", "the key PEM")
}

func parseKeyPair(certPEM, keyPEM []byte, certName, keyFileName string) (*Certified, error) {
	certs, err := parseCertificates(certPEM, certName)
	if err != nil {
		return nil, err
	}
	leaf := certs[0]
	chain := make([][]byte, len(certs))
	for i, c := range certs {
		chain[i] = c.Raw
	}
	pub, err := ParsePublicKey(leaf)
	if err != nil {
		return nil, fmt.Errorf("sig: %s: %w", certName, err)
	}
	key, err := parsePrivateKey(keyPEM, keyFileName)
	if err != nil {
		return nil, err
	}
	key = adaptRSAKind(key, pub)
	eq, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !eq.Equal(pub) {
		return nil, fmt.Errorf("sig: the private key in %s does not match the certificate in %s (subject %q): pass the key that belongs to this certificate",
			keyFileName, certName, leaf.Subject.String())
	}
	if SchemesForKey(pub) == nil {
		return nil, fmt.Errorf("sig: the %s key in %s cannot sign a TLS 1.3 CertificateVerify: use an ECDSA P-256/P-384/P-521, Ed25519 or RSA (>= %d bits) key", keyName(pub), certName, minRSABits)
	}
	return &Certified{Chain: chain, Leaf: leaf, Key: key, Public: pub}, nil
}

// adaptRSAKind makes the private key's kind follow the certificate: an RSA
// key in rsaEncryption form paired with an id-RSASSA-PSS certificate becomes
// a PSSPrivateKey, and a PSS key under an rsaEncryption certificate is used
// as a plain RSA key (rsa_pss_rsae_* schemes are PSS signatures too).
func adaptRSAKind(key crypto.Signer, pub crypto.PublicKey) crypto.Signer {
	_, certPSS := rsaPublic(pub)
	switch k := key.(type) {
	case *rsa.PrivateKey:
		if certPSS {
			return PSSPrivateKey{k}
		}
	case PSSPrivateKey:
		if _, ok := pub.(*rsa.PublicKey); ok {
			return k.PrivateKey
		}
	}
	return key
}

// parseCertificates parses every CERTIFICATE block of data, in order.
func parseCertificates(data []byte, name string) ([]*x509.Certificate, error) {
	var chain []*x509.Certificate
	sawKey := false
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		switch {
		case block.Type == "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, fmt.Errorf("sig: certificate %d in %s: %w", len(chain)+1, name, err)
			}
			chain = append(chain, c)
		case strings.HasSuffix(block.Type, "PRIVATE KEY"):
			sawKey = true
		}
	}
	if len(chain) > 0 {
		return chain, nil
	}
	if sawKey {
		return nil, fmt.Errorf("sig: %s holds a private key but no certificate: are the certificate and key files swapped?", name)
	}
	return nil, fmt.Errorf("sig: no CERTIFICATE block in %s%s: want a PEM file of certificates", name, derHint(data, "x509"))
}

// derHint recognises binary DER input and tells how to convert it.
func derHint(data []byte, tool string) string {
	if len(data) > 0 && data[0] == 0x30 {
		return fmt.Sprintf(" (it looks like binary DER; convert it with `openssl %s -inform der -outform pem`)", tool)
	}
	if len(data) == 0 {
		return " (the file is empty)"
	}
	return ""
}

// parsePrivateKey decodes the first private key block of data.
func parsePrivateKey(data []byte, name string) (crypto.Signer, error) {
	rest := data
	sawCert := false
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type == "CERTIFICATE" {
			sawCert = true
			continue
		}
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue // e.g. EC PARAMETERS
		}
		if block.Type == "ENCRYPTED PRIVATE KEY" || block.Headers["Proc-Type"] != "" {
			return nil, fmt.Errorf("sig: the private key in %s is encrypted: decrypt it with `openssl pkey -in KEY -out plain-key.pem` and load that file", name)
		}
		key, err := decodeKey(block)
		if err != nil {
			return nil, fmt.Errorf("sig: %s block in %s: %w", block.Type, name, err)
		}
		return key, nil
	}
	if sawCert {
		return nil, fmt.Errorf("sig: %s holds a certificate but no private key: are the certificate and key files swapped?", name)
	}
	return nil, fmt.Errorf("sig: no PRIVATE KEY block in %s%s: want a PEM file with the private key", name, derHint(data, "pkey"))
}

func decodeKey(block *pem.Block) (crypto.Signer, error) {
	var (
		key any
		err error
	)
	switch block.Type {
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			if pss, pssErr := ParsePSSPrivateKey(block.Bytes); pssErr == nil {
				return pss, nil
			}
		}
	default:
		return nil, fmt.Errorf("unknown key type %q (want PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY)", block.Type)
	}
	if err != nil {
		return nil, err
	}
	if _, ok := key.(*ecdh.PrivateKey); ok {
		return nil, errors.New("an X25519 key cannot sign; TLS certificates need a signing key")
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T cannot sign", key)
	}
	return signer, nil
}

// LoadCertPool reads every CERTIFICATE block of a PEM file of trusted CA
// certificates into a new pool.
func LoadCertPool(pemFile string) (*x509.CertPool, error) {
	data, err := os.ReadFile(pemFile)
	if err != nil {
		return nil, fmt.Errorf("sig: read CA certificates: %w", err)
	}
	certs, err := parseCertificates(data, pemFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}
