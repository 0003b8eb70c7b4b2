package main

import (
	"crypto/x509"
	"path/filepath"

	"github.com/ztls-project/ztls/tls13"
)

type rootsPool = *x509.CertPool

// tlsRoots loads --ca; "" means the system roots (nil).
func tlsRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	return tls13.LoadCertPool(file)
}

func absPath(p string) (string, error) { return filepath.Abs(p) }
