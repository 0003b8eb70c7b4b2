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
	return newKey(t, keyType, slotLeaf)
}

func newKey(t testing.TB, keyType string, slot int) crypto.Signer {
	t.Helper()
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
		t.Fatalf("testpki: unknown key type %q (want one of %v)", keyType, KeyTypes)
	}
	if err != nil {
		t.Fatalf("testpki: generate %s key: %v", keyType, err)
	}
	return k
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

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("testpki: serial: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}

func create(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) (*x509.Certificate, []byte) {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatalf("testpki: create certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testpki: parse certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return c, der
}

func caTemplate(t testing.TB, cn string, pathLen int) *x509.Certificate {
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: cn, Organization: []string{"ztls tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            pathLen,
		MaxPathLenZero:        pathLen == 0,
	}
}

// NewCA makes a self-signed root CA with a key of keyType (see KeyTypes),
// valid from an hour ago for ten days.
func NewCA(t testing.TB, keyType string) *CA {
	t.Helper()
	key := newKey(t, keyType, slotCA)
	tmpl := caTemplate(t, "ztls test CA ("+keyType+")", maxIntermediates)
	cert, der := create(t, tmpl, tmpl, key.Public(), key)
	return &CA{Cert: cert, Key: key, DER: der}
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
	if o.KeyType == "" {
		o.KeyType = "ecdsa-p256"
	}
	if o.DNSNames == nil && o.IPs == nil {
		o.DNSNames = []string{"localhost", "server.test"}
		o.IPs = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	now := time.Now()
	if o.NotBefore.IsZero() {
		o.NotBefore = now.Add(-time.Hour)
	}
	if o.NotAfter.IsZero() {
		o.NotAfter = now.Add(24 * time.Hour)
	}

	issuer, issuerKey := ca.Cert, ca.Key
	n := o.Intermediates
	if n == 0 && o.Intermediate {
		n = 1
	}
	if n < 0 || n > maxIntermediates {
		t.Fatalf("testpki: %d intermediates (at most %d)", n, maxIntermediates)
	}
	ikt := o.IntermediateKeyType
	if ikt == "" {
		ikt = "ecdsa-p256"
	}
	var intermediates [][]byte // root side first
	for i := range n {
		ikey := newKey(t, ikt, slotIntermediate+i)
		cn := "ztls test intermediate CA"
		if i > 0 {
			cn = fmt.Sprintf("ztls test intermediate CA %d", i+1)
		}
		itmpl := caTemplate(t, cn, n-1-i)
		var der []byte
		issuer, der = create(t, itmpl, issuer, ikey.Public(), issuerKey)
		issuerKey = ikey
		intermediates = append(intermediates, der)
	}

	key := newKey(t, o.KeyType, slotLeaf)
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
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
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
	cert, der := create(t, tmpl, issuer, key.Public(), issuerKey)
	chain := [][]byte{der}
	for i := len(intermediates) - 1; i >= 0; i-- {
		chain = append(chain, intermediates[i])
	}
	return &Leaf{Chain: chain, Key: key, Cert: cert}
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

func keyPEM(t testing.TB, key crypto.Signer) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testpki: marshal key: %v", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// WritePEM writes the chain (leaf first) and the PKCS#8 private key (mode
// 0600) to new files in dir and returns their paths.
func (l *Leaf) WritePEM(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	certFile = writeFile(t, dir, "leaf-*.crt", certPEM(l.Chain...))
	keyFile = writeFile(t, dir, "leaf-*.key", keyPEM(t, l.Key))
	return certFile, keyFile
}

// WritePEM writes the CA certificate to a new file in dir and returns its
// path (for --ca, openssl -CAfile, gnutls-cli --x509cafile).
func (ca *CA) WritePEM(t testing.TB, dir string) string {
	t.Helper()
	return writeFile(t, dir, "ca-*.crt", certPEM(ca.DER))
}

// writeKeyPEM writes the CA's private key (PKCS#8) for openssl to sign with.
func (ca *CA) writeKeyPEM(t testing.TB, dir string) string {
	t.Helper()
	return writeFile(t, dir, "ca-*.key", keyPEM(t, ca.Key))
}

func abs(t testing.TB, p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	return a
}
