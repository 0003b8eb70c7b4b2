package bench

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// pki is the benchmark's throwaway CA and server certificate.
type pki struct {
	ca                        *testpki.CA
	cert                      tls.Certificate
	pool                      *x509.CertPool
	caFile, certFile, keyFile string
}

// makePKI creates an ECDSA P-256 CA and a certificate for name signed by
// it (internal/testsupport/testpki), naming the OCSP responder at ocspURL if not "",
// and writes them as PEM into dir for programs such as openssl.
func makePKI(dir, name, ocspURL string) (*pki, error) {
	ca, err := testpki.MakeCA("ecdsa-p256")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	o := testpki.LeafOpts{DNSNames: []string{name}}
	if ocspURL != "" {
		o.OCSPServer = []string{ocspURL}
	}
	leaf, err := ca.Make(o)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	certPEM, keyPEM, err := leaf.PEM()
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	p := &pki{
		ca:       ca,
		pool:     ca.Pool(),
		caFile:   filepath.Join(dir, "ca.pem"),
		certFile: filepath.Join(dir, "server.pem"),
		keyFile:  filepath.Join(dir, "server.key"),
	}
	for path, data := range map[string][]byte{p.caFile: ca.PEM(), p.certFile: certPEM, p.keyFile: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	if p.cert, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return p, nil
}
