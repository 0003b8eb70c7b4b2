package main

import (
	"crypto/rand"
	"crypto/x509"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// TestZTLSCodepointFlag: --ztls-codepoint reaches the TLS configuration
// in hex or decimal; a value that is no 16-bit extension number is an
// error that says what to pass.
func TestZTLSCodepointFlag(t *testing.T) {
	for in, want := range map[string]uint16{"0xfe77": 0xfe77, "65000": 65000, "": 0} {
		var f tlsFlags
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		f.register(fs, false)
		if in != "" {
			if err := fs.Parse([]string{"--ztls-codepoint", in}); err != nil {
				t.Fatal(err)
			}
		}
		cfg, err := f.config(false)
		if err != nil || uint16(cfg.ZTLSExtension) != want {
			t.Fatalf("--ztls-codepoint %q: %v, %#x", in, err, cfg.ZTLSExtension)
		}
	}
	for _, bad := range []string{"70000", "0", "ff5a", "-1"} {
		f := tlsFlags{ztlsExt: bad}
		if _, err := f.config(false); err == nil || !strings.Contains(err.Error(), "e.g. 0xff5a") {
			t.Errorf("--ztls-codepoint %q: %v", bad, err)
		}
	}
}

// TestCRLFlag: --crl loads the files into the configuration; a file that
// holds no CRL is an error naming the flag.
func TestCRLFlag(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	tmpl := &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: clock.Now(), NextUpdate: clock.Now().Add(time.Hour)}
	der, err := x509.CreateRevocationList(rand.Reader, tmpl, ca.Cert, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "ca.crl")
	os.WriteFile(good, der, 0o600)
	f := tlsFlags{crls: []string{good}}
	cfg, err := f.config(false)
	if err != nil || cfg.Revocation.Len() != 1 {
		t.Fatalf("--crl %s: %v", good, err)
	}
	f = tlsFlags{crls: []string{good, filepath.Join(dir, "missing.crl")}}
	if _, err := f.config(false); err == nil || !strings.Contains(err.Error(), "--crl") {
		t.Fatalf("missing CRL file: %v", err)
	}
}
