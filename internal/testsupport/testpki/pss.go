package testpki

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pssKey caches one RSA-PSS private key (PEM, PKCS#8 id-RSASSA-PSS) per
// process: generating it with openssl costs a noticeable fraction of a
// second.
var pssKey struct {
	once sync.Once
	pem  []byte
	err  error
}

// opensslTimeout bounds each openssl run so a wedged tool fails the test
// rather than hanging it.
const opensslTimeout = 2 * time.Minute

func openssl(t testing.TB, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opensslTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "openssl", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("testpki: openssl %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// IssuePSS makes an RSASSA-PSS (id-RSASSA-PSS, 2048-bit) leaf key with
// `openssl genpkey -algorithm RSA-PSS` and a certificate for it signed by the
// CA, valid for localhost, server.test, 127.0.0.1 and ::1 with the serverAuth
// and clientAuth usages. It writes the certificate and the PKCS#8 key to new
// files in dir and returns their paths. Go's crypto/x509 cannot create such
// certificates, so this needs the openssl command; without it the test is
// skipped. The PSS key is shared by every call in the process.
func (ca *CA) IssuePSS(t testing.TB, dir string) (certFile, keyFile string) {
	t.Helper()
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("testpki: openssl not installed; cannot make an RSA-PSS certificate")
	}
	dir = abs(t, dir)
	pssKey.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), opensslTimeout)
		defer cancel()
		var stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, "openssl", "genpkey", "-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:2048")
		cmd.Stderr = &stderr
		pssKey.pem, pssKey.err = cmd.Output()
		if pssKey.err != nil {
			pssKey.err = &opensslError{err: pssKey.err, stderr: stderr.String()}
		}
	})
	if pssKey.err != nil {
		t.Fatalf("testpki: openssl genpkey -algorithm RSA-PSS: %v", pssKey.err)
	}
	keyFile = writeFile(t, dir, "pss-*.key", pssKey.pem)

	work, err := os.MkdirTemp(dir, "pss-work-")
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	defer os.RemoveAll(work)
	caCert := ca.WritePEM(t, work)
	caKey := ca.writeKeyPEM(t, work)
	ext := writeFile(t, work, "ext-*.cnf", []byte(strings.Join([]string{
		"[v3]",
		"basicConstraints = critical, CA:FALSE",
		"keyUsage = critical, digitalSignature",
		"extendedKeyUsage = serverAuth, clientAuth",
		"subjectAltName = DNS:localhost, DNS:server.test, IP:127.0.0.1, IP:::1",
		"",
	}, "\n")))
	csr := filepath.Join(work, "leaf.csr")
	openssl(t, work, "req", "-new", "-key", keyFile, "-subj", "/O=ztls tests/CN=localhost", "-out", csr)
	certPath := filepath.Join(work, "leaf.crt")
	openssl(t, work, "x509", "-req", "-in", csr, "-CA", caCert, "-CAkey", caKey,
		"-set_serial", "0x"+must(t, serial).Text(16), "-days", "2",
		"-extfile", ext, "-extensions", "v3", "-out", certPath)
	cert, err := os.ReadFile(certPath)
	if err != nil {
		t.Fatalf("testpki: %v", err)
	}
	certFile = writeFile(t, dir, "pss-*.crt", cert)
	return certFile, keyFile
}

type opensslError struct {
	err    error
	stderr string
}

func (e *opensslError) Error() string { return e.err.Error() + ": " + e.stderr }
