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
// Everything here is for tests only: keys are not protected, and failures
// call t.Fatal.
package testpki
