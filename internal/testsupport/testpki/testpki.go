package testpki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// KeyTypes lists the key types NewKey, NewCA and Issue accept.
var KeyTypes = []string{"ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "ed25519", "rsa2048"}

// rsaSlots caches RSA-2048 keys per process: slot 0 for CAs, slot 1 for
// leaves, slots 2 and up for intermediates (one per level), so a chain
// never reuses one key twice.
var rsaSlots [2 + maxIntermediates]struct {
	once sync.Once
	key  *rsa.PrivateKey
	err  error
}

const (
	slotCA = iota
	slotLeaf
	slotIntermediate
)

func cachedRSA(slot int) (*rsa.PrivateKey, error) {
	s := &rsaSlots[slot]
	s.once.Do(func() { s.key, s.err = rsa.GenerateKey(rand.Reader, 2048) })
	return s.key, s.err
}

// NewKey returns a private key of keyType (see KeyTypes). ECDSA and Ed25519
// keys are fresh; RSA keys come from a small per-process cache.
func NewKey(t testing.TB, keyType string) crypto.Signer {
	t.Helper()
	return must(t, func() (crypto.Signer, error) { return newKey(keyType, slotLeaf) })
}

func newKey(keyType string, slot int) (crypto.Signer, error) {
	var (
		k   crypto.Signer
		err error
	)
	switch keyType {
	case "ecdsa-p256":
		k, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ecdsa-p384":
		k, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ecdsa-p521":
		k, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	case "ed25519":
		_, k, err = ed25519.GenerateKey(rand.Reader)
	case "rsa2048":
		k, err = cachedRSA(slot)
	default:
		return nil, fmt.Errorf("testpki: unknown key type %q (want one of %v)", keyType, KeyTypes)
	}
	if err != nil {
		return nil, fmt.Errorf("testpki: generate %s key: %w", keyType, err)
	}
	return k, nil
}

// must calls make and fails the test on its error: the tests' form of
// the functions that return errors (MakeCA, CA.Make) for the testbed.
func must[T any](t testing.TB, make func() (T, error)) T {
	t.Helper()
	v, err := make()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// CA is a self-signed certificate authority. DER is Cert's encoding.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	DER  []byte
}

// Leaf is an issued certificate. Chain holds DER certificates: the leaf first,
// then any intermediate; the root CA is not included.
type Leaf struct {
	Chain [][]byte
	Key   crypto.Signer
	Cert  *x509.Certificate
}

// LeafOpts chooses what Issue makes. The zero value gives an ECDSA P-256
// server certificate for localhost, server.test, 127.0.0.1 and ::1, valid from
// an hour ago for a day, signed directly by the CA.
type LeafOpts struct {
	KeyType      string
	DNSNames     []string
	IPs          []net.IP
	NotBefore    time.Time
	NotAfter     time.Time
	Client       bool // add the clientAuth extended key usage
	Intermediate bool // sign through an intermediate CA that goes into Chain
	// Intermediates is how many intermediate CAs (at most 3) sign the
	// leaf, each signed by the one before it, the first by the root; all
	// go into Chain, nearest the leaf first. 0 means one if Intermediate
	// is set, else none.
	Intermediates int
	// IntermediateKeyType is the intermediates' key type; "" means ecdsa-p256.
	IntermediateKeyType string
	// OCSPServer are the OCSP responder URLs put in the leaf's authority
	// information access (RFC 5280, Section 4.2.2.1); nil means none.
	OCSPServer []string
}

// maxIntermediates bounds LeafOpts.Intermediates; NewCA's root allows
// that many below it (its path length constraint).
const maxIntermediates = 3

func serial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("testpki: serial: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func create(tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("testpki: parse certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	return c, der, nil
}

func caTemplate(cn string, pathLen int) (*x509.Certificate, error) {
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	now := clock.Now()
	return &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"ztls tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            pathLen,
		MaxPathLenZero:        pathLen == 0,
	}, nil
}

// NewCA makes a self-signed root CA with a key of keyType (see KeyTypes),
// valid from an hour ago for ten days.
func NewCA(t testing.TB, keyType string) *CA {
	t.Helper()
	return must(t, func() (*CA, error) { return MakeCA(keyType) })
}

// MakeCA is NewCA for code outside tests (the testbed): it returns its
// error.
func MakeCA(keyType string) (*CA, error) {
	key, err := newKey(keyType, slotCA)
	if err != nil {
		return nil, err
	}
	tmpl, err := caTemplate("ztls test CA ("+keyType+")", maxIntermediates)
	if err != nil {
		return nil, err
	}
	cert, der, err := create(tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key, DER: der}, nil
}

// Pool returns a new pool holding only the CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue signs a leaf certificate as o describes, with the serverAuth
// extended key usage (and clientAuth if o.Client).
func (ca *CA) Issue(t testing.TB, o LeafOpts) *Leaf {
	t.Helper()
	return must(t, func() (*Leaf, error) { return ca.Make(o) })
}

// Make is Issue for code outside tests (the testbed): it returns its
// error.
func (ca *CA) Make(o LeafOpts) (*Leaf, error) {
	if o.KeyType == "" {
		o.KeyType = "ecdsa-p256"
	}
	if o.DNSNames == nil && o.IPs == nil {
		o.DNSNames = []string{"localhost", "server.test"}
		o.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	now := clock.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(24 * time.Hour)
	}
	issuer, issuerKey, intermediates, err := ca.intermediates(o)
	if err != nil {
		return nil, err
	}
	key, err := newKey(o.KeyType, slotLeaf)
	if err != nil {
		return nil, err
	}
	cn := "ztls test leaf"
	if len(o.DNSNames) > 0 {
		cn = o.DNSNames[0]
	}
	eku := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	if o.Client {
		eku = append(eku, x509.ExtKeyUsageClientAuth)
	}
	usage := x509.KeyUsageDigitalSignature
	if _, ok := key.(*rsa.PrivateKey); ok {
		usage |= x509.KeyUsageKeyEncipherment // for TLS 1.2 peers that insist
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"ztls tests"}},
		NotBefore:             o.NotBefore,
		NotAfter:              o.NotAfter,
		KeyUsage:              usage,
		ExtKeyUsage:           eku,
		BasicConstraintsValid: true,
		DNSNames:              o.DNSNames,
		IPAddresses:           o.IPs,
		OCSPServer:            o.OCSPServer,
	}
	cert, der, err := create(tmpl, issuer, key.Public(), issuerKey)
	if err != nil {
		return nil, err
	}
	chain := [][]byte{der}
	for i := len(intermediates) - 1; i >= 0; i-- {
		chain = append(chain, intermediates[i])
	}
	return &Leaf{Chain: chain, Key: key, Cert: cert}, nil
}

// intermediates makes the intermediate CAs o asks for, each signed by the
// one before it (the first by ca), and returns the last with its key (ca
// itself when there are none) and their DER, root side first.
func (ca *CA) intermediates(o LeafOpts) (*x509.Certificate, crypto.Signer, [][]byte, error) {
	issuer, issuerKey := ca.Cert, ca.Key
	n := o.Intermediates
	if n == 0 && o.Intermediate {
		n = 1
	}
	if n < 0 || n > maxIntermediates {
		return nil, nil, nil, fmt.Errorf("testpki: %d intermediates (at most %d)", n, maxIntermediates)
	}
	ikt := o.IntermediateKeyType
	if ikt == "" {
		ikt = "ecdsa-p256"
	}
	var ders [][]byte
	for i := range n {
		ikey, err := newKey(ikt, slotIntermediate+i)
		if err != nil {
			return nil, nil, nil, err
		}
		cn := "ztls test intermediate CA"
		if i > 0 {
			cn = fmt.Sprintf("ztls test intermediate CA %d", i+1)
		}
		itmpl, err := caTemplate(cn, n-1-i)
		if err != nil {
			return nil, nil, nil, err
		}
		var der []byte
		if issuer, der, err = create(itmpl, issuer, ikey.Public(), issuerKey); err != nil {
			return nil, nil, nil, err
		}
		issuerKey = ikey
		ders = append(ders, der)
	}
	return issuer, issuerKey, ders, nil
}

// writeFile writes data to a new file in dir whose name starts with prefix.
func writeFile(t testing.TB, dir, pattern string, data []byte) string {
	t.Helper()
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	_, werr := f.Write(data)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		t.Fatalf("testpki: write %s: %v", f.Name(), werr)
	}
	return f.Name()
}

func certPEM(ders ...[]byte) []byte {
	var out []byte
	for _, d := range ders {
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})...)
	}
	return out
}

func keyPEM(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("testpki: marshal key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// PEM returns the chain (leaf first) and the PKCS#8 private key as PEM.
func (l *Leaf) PEM() (certs, key []byte, err error) {
	key, err = keyPEM(l.Key)
	return certPEM(l.Chain...), key, err
}

// PEM returns the CA certificate as PEM.
func (ca *CA) PEM() []byte { return certPEM(ca.DER) }

// WritePEM writes the chain (leaf first) and the PKCS#8 private key (mode
// 0600) to new files in dir and returns their paths.
func (l *Leaf) WritePEM(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certs, key, err := l.PEM()
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, "leaf-*.crt", certs), writeFile(t, dir, "leaf-*.key", key)
}

// WritePEM writes the CA certificate to a new file in dir and returns its
// path (for --ca, openssl -CAfile, gnutls-cli --x509cafile).
func (ca *CA) WritePEM(t testing.TB, dir string) string {
	t.Helper()
	return writeFile(t, dir, "ca-*.crt", ca.PEM())
}

// writeKeyPEM writes the CA's private key (PKCS#8) for openssl to sign with.
func (ca *CA) writeKeyPEM(t testing.TB, dir string) string {
	t.Helper()
	return writeFile(t, dir, "ca-*.key", must(t, func() ([]byte, error) { return keyPEM(ca.Key) }))
}

func abs(t testing.TB, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return a
}
