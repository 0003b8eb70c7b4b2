package ech

import (
	"crypto/ecdh"
	"crypto/subtle"
	"errors"

	"github.com/ztls-project/ztls/tls13/internal/field25519"
)

// ladderKey is a server's X25519 ECH key as crypto/hpke's decapsulation
// uses it (an ecdh.KeyExchanger): the shared secret comes from
// field25519's ladder (MULX/ADX assembly) where the CPU has it, which
// costs a fraction of crypto/ecdh's x25519 and is the one public-key
// operation ECH adds to a server's handshake (docs/bench/
// ech-cpu-2026-11-28.txt). Elsewhere it is crypto/ecdh's. The bytes are
// the same: both are RFC 7748's X25519, which field25519's tests check
// against crypto/ecdh. Safe for concurrent use (it is never modified).
type ladderKey struct {
	priv   *ecdh.PrivateKey
	pub    *ecdh.PublicKey
	scalar [32]byte
}

func newLadderKey(priv *ecdh.PrivateKey) ecdh.KeyExchanger {
	if !field25519.Accelerated() {
		return priv
	}
	k := &ladderKey{priv: priv, pub: priv.PublicKey()}
	copy(k.scalar[:], priv.Bytes())
	return k
}

func (k *ladderKey) PublicKey() *ecdh.PublicKey { return k.pub }
func (k *ladderKey) Curve() ecdh.Curve          { return ecdh.X25519() }

// ECDH refuses a peer key of another curve and an all-zero result (a
// low-order point), as crypto/ecdh's X25519 does (RFC 9180, Section 7.1.4
// asks DHKEM to).
func (k *ladderKey) ECDH(peer *ecdh.PublicKey) ([]byte, error) {
	if peer.Curve() != ecdh.X25519() {
		return nil, errors.New("ech: the peer's key is not an X25519 key")
	}
	var out [32]byte
	field25519.ScalarMult(&out, &k.scalar, (*[32]byte)(peer.Bytes()))
	if subtle.ConstantTimeCompare(out[:], make([]byte, 32)) == 1 {
		return nil, errors.New("ech: the X25519 shared secret is all zeros (a low-order point)")
	}
	return out[:], nil
}
