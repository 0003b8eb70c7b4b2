package kex

import (
	"crypto/ecdh"
	"errors"
	"fmt"
	"io"

	"filippo.io/edwards25519"
)

// x25519PublicKey sets pub to X25519(scalar, 9), the public key of an x25519
// private key (RFC 7748, Section 6.1), without a Montgomery ladder: the
// clamped scalar multiplies the base point of edwards25519, the Edwards curve
// birationally equivalent to Curve25519, with the library's precomputed
// tables, and the result's Montgomery u-coordinate u = (1+y)/(1-y)
// (RFC 7748, Section 4.1) is the public key. Both steps run in constant
// time. The base points correspond (u = 9), the scalar is clamped exactly as
// X25519 clamps it, and reducing it modulo the group order does not change
// the product because the base point has that order; so the bytes are those
// of crypto/ecdh and RFC 7748, which the tests check.
func x25519PublicKey(pub, scalar *[32]byte) {
	s, err := new(edwards25519.Scalar).SetBytesWithClamping(scalar[:])
	if err != nil {
		panic("kex: SetBytesWithClamping rejected 32 bytes: " + err.Error())
	}
	var p edwards25519.Point
	p.ScalarBaseMult(s)
	copy(pub[:], p.BytesMontgomery())
}

// x25519Key is an x25519 private key held as its scalar and its public key.
// crypto/ecdh computes the public key with a Montgomery ladder whenever it
// makes a PrivateKey, which costs twice the fixed-base multiplication; so the
// *ecdh.PrivateKey used for the shared secret is made only when Shared is
// first called, or ahead of need by a Pool. An x25519Key belongs to one
// handshake: it is not safe for concurrent use.
type x25519Key struct {
	scalar [32]byte
	pub    [32]byte
	priv   *ecdh.PrivateKey // nil until needed
	erased bool
}

// newX25519Key reads 32 bytes from rand, as crypto/ecdh's x25519 does, and
// computes the public key with the fixed-base multiplication.
func newX25519Key(rand io.Reader) (*x25519Key, error) {
	k := new(x25519Key)
	if _, err := io.ReadFull(rand, k.scalar[:]); err != nil {
		return nil, fmt.Errorf("kex: read x25519 private key from rand: %w", err)
	}
	x25519PublicKey(&k.pub, &k.scalar)
	return k, nil
}

// newX25519KeyECDH reads 32 bytes from rand and makes the *ecdh.PrivateKey at
// once, taking the public key from it. A Pool uses it: the ladder that
// computes the public key runs off the handshake's path anyway, and a
// handshake then only runs the one for the shared secret.
func newX25519KeyECDH(rand io.Reader) (*x25519Key, error) {
	k := new(x25519Key)
	if _, err := io.ReadFull(rand, k.scalar[:]); err != nil {
		return nil, fmt.Errorf("kex: read x25519 private key from rand: %w", err)
	}
	priv, err := ecdh.X25519().NewPrivateKey(k.scalar[:])
	if err != nil {
		return nil, fmt.Errorf("kex: x25519 private key: %w", err)
	}
	k.priv = priv
	copy(k.pub[:], priv.PublicKey().Bytes())
	return k, nil
}

// public returns a fresh copy of the public key.
func (k *x25519Key) public() []byte { return append([]byte(nil), k.pub[:]...) }

// ecdhKey returns the crypto/ecdh form of the key, made once.
func (k *x25519Key) ecdhKey() (*ecdh.PrivateKey, error) {
	if k.erased {
		return nil, errErased
	}
	if k.priv == nil {
		priv, err := ecdh.X25519().NewPrivateKey(k.scalar[:])
		if err != nil {
			return nil, fmt.Errorf("kex: x25519 private key: %w", err)
		}
		k.priv = priv
	}
	return k.priv, nil
}

// shared computes X25519(scalar, peer) with crypto/ecdh, rejecting an
// all-zero result as ecdhShared does.
func (k *x25519Key) shared(peer []byte) ([]byte, error) {
	priv, err := k.ecdhKey()
	if err != nil {
		return nil, err
	}
	return ecdhShared(X25519, priv, peer)
}

// erase zeroes the scalar and drops the crypto/ecdh key (whose own copy
// of the scalar Go gives no way to clear) once the key has served.
func (k *x25519Key) erase() {
	clear(k.scalar[:])
	k.priv = nil
	k.erased = true
}

var errErased = errors.New("kex: key share used after it was erased")

// x25519Share is the ClientShare for x25519.
type x25519Share struct{ k *x25519Key }

func (s *x25519Share) Group() uint16                      { return X25519 }
func (s *x25519Share) Public() []byte                     { return s.k.public() }
func (s *x25519Share) Shared(peer []byte) ([]byte, error) { return s.k.shared(peer) }
func (s *x25519Share) Erase()                             { s.k.erase() }
