// Package testpki makes throwaway certificate authorities and leaf
// certificates for tests, in memory with crypto/x509, and writes them as PEM
// files for external tools (openssl, gnutls-cli, BIND).
//
//	ca := testpki.NewCA(t, "ecdsa-p256")
//	leaf := ca.Issue(t, testpki.LeafOpts{})            // localhost, server.test, 127.0.0.1, ::1
//	certFile, keyFile := leaf.WritePEM(t, t.TempDir()) // for `ztls serve --cert --key`
//	caFile := ca.WritePEM(t, t.TempDir())              // for --ca / openssl -CAfile
//	pool := ca.Pool()                                  // for in-process clients
//
// Key types are "ecdsa-p256", "ecdsa-p384", "ecdsa-p521", "ed25519" and
// "rsa2048". RSA keys are slow to make, so each process generates a few and
// reuses them. IssuePSS makes an RSASSA-PSS leaf with the openssl command,
// since Go cannot create such keys.
//
// Everything here is for tests and the testbed only: keys are not
// protected. The functions that take a testing.TB call t.Fatal on failure;
// MakeCA, CA.Make and the PEM methods return errors, for the testbed's
// throwaway PKIs (testbed/bench, internal/testsupport/lab).
package testpki
