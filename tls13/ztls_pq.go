package tls13

// Post-quantum Z-data (docs/ztls-spec.md, Section 9): a v3 record's key is
// X25519MLKEM768, the client encapsulates to its ML-KEM-768 half and
// answers its x25519 half in the ztls_kem extension, and ZS is the TLS
// hybrid's shared secret, ss_M || ss_X. Both sides run the engine's one
// X25519MLKEM768 implementation (internal/kex): the client the side a TLS
// server takes for that group (kex.ServerShare), the server's Z-data key
// the side of a TLS client's share (kex.StaticKey).

import (
	"fmt"
	"io"

	"github.com/ztls-project/ztls/tls13/internal/kex"
)

// ZDataKEMKeySize is the length of a ZDataKEMKey's private bytes: the
// 64-byte ML-KEM-768 seed (d || z, FIPS 203) then the 32-byte x25519
// scalar (docs/ztls-spec.md, Section 9.1).
const ZDataKEMKeySize = kex.StaticHybridSize

// ZDataKEMKey is the private side of a ztls v3 record's X25519MLKEM768
// key (docs/ztls-spec.md, Section 9.1). It is immutable and safe for
// concurrent use; the zero value is not usable.
type ZDataKEMKey struct{ k *kex.StaticKey }

// GenerateZDataKEMKey draws a new key's ZDataKEMKeySize private bytes
// from rand (nil: crypto/rand).
func GenerateZDataKEMKey(rand io.Reader) (*ZDataKEMKey, error) {
	k, err := kex.GenerateStaticKey(kex.X25519MLKEM768, rand)
	if err != nil {
		return nil, fmt.Errorf("tls13: %w", err)
	}
	return &ZDataKEMKey{k: k}, nil
}

// NewZDataKEMKey loads a key from its private bytes (Bytes).
func NewZDataKEMKey(private []byte) (*ZDataKEMKey, error) {
	k, err := kex.NewStaticKey(kex.X25519MLKEM768, private)
	if err != nil {
		return nil, fmt.Errorf("tls13: %w", err)
	}
	return &ZDataKEMKey{k: k}, nil
}

// Public returns the record's key share: the ML-KEM-768 encapsulation key
// (1184 bytes) then the x25519 public key (32 bytes).
func (k *ZDataKEMKey) Public() []byte { return k.k.Public() }

// Bytes returns the private bytes. They are secret: never log them.
func (k *ZDataKEMKey) Bytes() []byte { return k.k.Private() }

// Shared returns ZS for a client's ztls_kem value (the ML-KEM-768
// ciphertext then the client's x25519 share, 1120 bytes): the
// decapsulated ML-KEM key then the x25519 secret. A value of another
// length, or an x25519 share with an all-zero result, is an error that
// carries illegal_parameter; a mauled ciphertext is not an error (FIPS
// 203's implicit rejection gives an unrelated key, and the binder then
// fails). It is what ZDataKey.ECDH does for an X25519MLKEM768 key.
func (k *ZDataKEMKey) Shared(kemShare []byte) ([]byte, error) { return k.k.Shared(kemShare) }

// ztlsKEM is ZS for an X25519MLKEM768 offer (docs/ztls-spec.md, Section
// 9.4): the encapsulation to the Z-data share made ahead (PrepareZData)
// or now, its ztls_kem value put in the ClientHello.
func (e *engine) ztlsKEM(p *clientHelloParams, z *ZDataOffer) ([]byte, error) {
	if zp := p.zprepared; zp != nil && zp.kemShare != nil {
		p.hello.ZTLSKEM = zp.kemShare
		return zp.zs, nil
	}
	kemShare, zs, err := kex.ServerShare(kex.X25519MLKEM768, z.Share, e.cfg.rand())
	if err != nil {
		return nil, fmt.Errorf("invalid Z-data key share: %v", err)
	}
	p.hello.ZTLSKEM = kemShare
	return zs, nil
}
