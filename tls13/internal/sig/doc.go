// Package sig implements TLS 1.3 signature schemes (RFC 8446, Section 4.2.3)
// for CertificateVerify (Section 4.4.3), plus loading of certificates and
// private keys for servers and clients.
//
// A server signs its transcript with the key of its certificate:
//
//	cert, err := sig.LoadKeyPair("cert.pem", "key.pem")
//	scheme, err := sig.Select(cert.Public, peerSignatureAlgorithms)
//	signature, err := sig.Sign(cfg.Rand, cert.Key, scheme, sig.ServerContext, transcriptHash)
//
// and the client checks it against the public key of the verified leaf:
//
//	pub, err := sig.ParsePublicKey(leaf)
//	err = sig.Verify(pub, scheme, sig.ServerContext, transcriptHash, signature)
//
// Verification failures are *alert.Error values carrying the TLS alert to send:
// decrypt_error for a bad signature, illegal_parameter for a scheme that does
// not fit the key or is forbidden in TLS 1.3.
//
// Go's crypto/x509 cannot parse RSASSA-PSS (id-RSASSA-PSS) keys. This package
// parses them itself and represents them as PSSPublicKey and PSSPrivateKey,
// which sign only with the rsa_pss_pss_* schemes, while ordinary RSA keys use
// rsa_pss_rsae_*.
package sig
