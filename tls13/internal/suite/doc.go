// Package suite describes the TLS 1.3 cipher suites ztls supports
// (RFC 8446, Section B.4): AES-128-GCM and AES-256-GCM with their hashes, and
// ChaCha20-Poly1305.
//
// A TLS 1.3 cipher suite names only the record AEAD and the hash used by the
// key schedule; key exchange and signatures are negotiated separately. Look a
// suite up by its codepoint and use its fields:
//
//	s := suite.Lookup(suite.TLS_AES_128_GCM_SHA256)
//	if s == nil {
//		// not supported: skip the peer's offer
//	}
//	aead, err := s.NewAEAD(key) // key is s.KeyLen bytes long
//
// All returns the suites in ztls's default order of preference, which puts
// AES-GCM first only where the CPU accelerates it. Suite values are shared
// and must not be modified.
package suite
