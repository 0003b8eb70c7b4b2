// Package kex implements the TLS 1.3 key exchange groups ztls speaks: x25519,
// secp256r1, secp384r1 (RFC 8446, Section 4.2.7 and 7.4) and the hybrid
// X25519MLKEM768 (draft-ietf-tls-ecdhe-mlkem).
//
// A client makes one ClientShare per group it offers and puts Public() into its
// key_share extension. The server answers with ServerShare, which returns the
// bytes for its own KeyShareEntry and the shared secret. The client then calls
// Shared on the server's bytes and gets the same secret:
//
//	cs, err := kex.GenerateClientShare(kex.X25519, cfg.Rand)
//	// ... ClientHello carries cs.Public() ...
//	serverPub, secret, err := kex.ServerShare(kex.X25519, cs.Public(), cfg.Rand) // on the server
//	secret2, err := cs.Shared(serverPub)                                       // on the client
//
// All key material comes from the io.Reader the caller passes, never from
// crypto/rand directly, so tests with fixed randomness reproduce every byte.
//
// x25519 public keys come from a fixed-base multiplication on edwards25519
// (field25519.ScalarBaseMult with BMI2/ADX, else edwards25519's own) and
// shared secrets from one Montgomery ladder (x25519.go), so a share the server
// does not pick costs only the former. On amd64 with BMI2 and ADX the ladder
// runs on package field25519's generated MULX/ADCX/ADOX arithmetic; elsewhere
// (and with the purego build tag) on filippo.io/edwards25519/field. A Pool makes keys ahead of need, off
// the handshake's path, for handshakes that do not take randomness from a
// fixed reader.
//
// ML-KEM-768 (the hybrid's first half) is package mlkem768's: circl's AVX2
// code on amd64, crypto/mlkem elsewhere and with purego; both give the same
// bytes (mlkem768's differential fuzz targets and ACVP vectors).
//
// StaticKey is the long-lived key a ZTLS server publishes in its Z-data; it
// computes the same kind of secret as an ephemeral share. An X25519MLKEM768
// static key (docs/ztls-spec.md, Section 9) is a client's hybrid share that
// lives on: the ZTLS client answers it with ServerShare.
//
// Errors caused by the peer's bytes are *alert.Error values that carry the TLS alert
// to send (illegal_parameter for a malformed or weak share).
package kex
