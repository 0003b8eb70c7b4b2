package tls13

import "github.com/ztls-project/ztls/tls13/internal/kex"

// X25519SharedSecret returns X25519(private, peer) (RFC 7748, Section 5)
// computed as the engine computes its own x25519 secrets (on amd64 with
// BMI2 and ADX, a Montgomery ladder on generated MULX/ADCX/ADOX field
// arithmetic; elsewhere on filippo.io/edwards25519's field), for x25519
// keys held outside the engine: a Z-data server's static key (package
// zdata) answers each accepted ztls flight with it. private is the 32-byte
// scalar (crypto/ecdh's PrivateKey.Bytes); peer must be 32 bytes. An
// all-zero result, from a low-order peer point, is refused (RFC 8446,
// Section 7.4.2), as crypto/ecdh refuses it. The result equals
// crypto/ecdh's for every input, low-order and non-canonical ones included.
func X25519SharedSecret(private, peer []byte) ([]byte, error) {
	return kex.X25519Shared(private, peer)
}
