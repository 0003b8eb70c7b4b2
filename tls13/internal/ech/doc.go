// Package ech holds the parts of Encrypted ClientHello (RFC 9849) that do
// not depend on the handshake engine: the ECHConfig and ECHConfigList
// codec (Section 4), server keys and their configs, the HPKE contexts of
// both roles (Section 6.1, through crypto/hpke: DHKEM(X25519,
// HKDF-SHA256) with HKDF-SHA256 and AES-128-GCM, AES-256-GCM or
// ChaCha20-Poly1305), the encrypted_client_hello extension (Section 5),
// the EncodedClientHelloInner with ech_outer_extensions compression and
// padding (Sections 5.1 and 6.1.3), its decoding with Section 7.1's
// checks, and the acceptance signals (Section 7.2).
//
// The engine (package tls13) builds the inner and outer ClientHellos and
// decides what goes where; docs/ztls-spec.md says what a ZTLS first
// flight may carry in the outer one.
package ech
