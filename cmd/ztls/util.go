package main

import (
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ztls-project/ztls/tls13"
)

type rootsPool = *x509.CertPool

// tlsRoots loads --ca; "" means the system roots (nil).
func tlsRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pool, err := tls13.LoadCertPool(file)
	if err != nil {
		return nil, fmt.Errorf("--ca: %w", err)
	}
	return pool, nil
}

func absPath(p string) (string, error) { return filepath.Abs(p) }

// isTerminal reports whether f is a terminal: a character device other
// than the null device (which is one too, e.g. a command run from cron).
func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return false
	}
	null, err := os.Stat(os.DevNull)
	return err != nil || !os.SameFile(st, null)
}
