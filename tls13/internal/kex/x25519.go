package kex

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"

	"filippo.io/edwards25519"
	"filippo.io/edwards25519/field"
	"github.com/ztls-project/ztls/tls13/internal/field25519"
)

// x25519PublicKey sets pub to X25519(scalar, 9), the public key of an x25519
// private key (RFC 7748, Section 6.1), without a Montgomery ladder: the
// scalar, clamped exactly as X25519 clamps it, multiplies edwards25519's
// base point, which corresponds to u = 9 on the birationally equivalent
// Curve25519 (the base point has prime order, so the products correspond
// too), with precomputed tables and constant-time lookups, and the result's
// Montgomery u-coordinate u = (1+y)/(1-y) (RFC 7748, Section 4.1) is the
// public key. On amd64 with BMI2 and ADX that is field25519.ScalarBaseMult
// (each lookup and addition one generated MULX/ADCX/ADOX call; 7.4 us
// against 13 us); elsewhere, and with the purego build tag, it is
// x25519PublicKeyPortable, because field25519's Go arithmetic is slower
// than filippo.io/edwards25519's (ScalarBaseMult's Go path measured 28 us
// against 13 us), as for the ladder below. Both give the bytes of
// crypto/ecdh and RFC 7748, which the tests and fuzz targets check.
func x25519PublicKey(pub, scalar *[32]byte) {
	if field25519.Accelerated() {
		field25519.ScalarBaseMult(pub, scalar)
		return
	}
	x25519PublicKeyPortable(pub, scalar)
}

// x25519PublicKeyPortable is x25519PublicKey with filippo.io/edwards25519's
// fixed-base multiplication and BytesMontgomery.
func x25519PublicKeyPortable(pub, scalar *[32]byte) {
	s, err := new(edwards25519.Scalar).SetBytesWithClamping(scalar[:])
	if err != nil {
		panic("kex: SetBytesWithClamping rejected 32 bytes: " + err.Error())
	}
	var p edwards25519.Point
	p.ScalarBaseMult(s)
	copy(pub[:], p.BytesMontgomery())
}

// x25519Ladder sets out to X25519(scalar, u) (RFC 7748, Section 5). It
// exists because crypto/ecdh cannot make a private key without first
// running a ladder once more for the public key, which the fixed-base
// multiplication above has already given; so an x25519 share costs one
// ladder, not two. u is 32 bytes; its top bit is ignored and non-canonical
// values are taken modulo p, as the RFC asks. On amd64 with BMI2 and ADX
// the ladder is field25519's (generated MULX/ADCX/ADOX assembly, one call
// per ladder step); elsewhere, and with the purego build tag, it is
// x25519LadderPortable. Both give crypto/ecdh's bytes, which the tests and
// fuzz targets check on both paths.
func x25519Ladder(out, scalar *[32]byte, u []byte) error {
	if len(u) != x25519Len {
		return fmt.Errorf("x25519 u-coordinate is %d bytes, want %d", len(u), x25519Len)
	}
	if field25519.Accelerated() {
		field25519.ScalarMult(out, scalar, (*[32]byte)(u))
		return nil
	}
	return x25519LadderPortable(out, scalar, u)
}

// x25519LadderPortable is x25519Ladder over the field arithmetic of
// filippo.io/edwards25519 (constant time, the same representation
// crypto/ecdh uses).
func x25519LadderPortable(out, scalar *[32]byte, u []byte) error {
	var k [32]byte
	copy(k[:], scalar[:])
	k[0] &= 248
	k[31] &= 127
	k[31] |= 64

	var x1, x2, z2, x3, z3, a, aa, b, bb, e, c, d, da, cb field.Element
	if _, err := x1.SetBytes(u); err != nil {
		return err
	}
	x2.One()
	z2.Zero()
	x3.Set(&x1)
	z3.One()

	swap := 0
	for t := 254; t >= 0; t-- {
		kt := int(k[t/8]>>(t%8)) & 1
		swap ^= kt
		x2.Swap(&x3, swap)
		z2.Swap(&z3, swap)
		swap = kt

		a.Add(&x2, &z2)
		aa.Square(&a)
		b.Subtract(&x2, &z2)
		bb.Square(&b)
		e.Subtract(&aa, &bb)
		c.Add(&x3, &z3)
		d.Subtract(&x3, &z3)
		da.Multiply(&d, &a)
		cb.Multiply(&c, &b)
		x3.Add(&da, &cb)
		x3.Square(&x3)
		z3.Subtract(&da, &cb)
		z3.Square(&z3)
		z3.Multiply(&z3, &x1)
		x2.Multiply(&aa, &bb)
		z2.Mult32(&e, 121665) // a24 = (486662 - 2) / 4
		z2.Add(&z2, &aa)
		z2.Multiply(&z2, &e)
	}
	x2.Swap(&x3, swap)
	z2.Swap(&z3, swap)

	z2.Invert(&z2)
	x2.Multiply(&x2, &z2)
	copy(out[:], x2.Bytes())
	clear(k[:])
	return nil
}

// x25519Key is an x25519 private key held as its scalar and its public key,
// made by the fixed-base multiplication; the shared secret costs one ladder.
// A server's key (newX25519Scalar) makes its public key together with its
// shared secret instead, in one inversion (pubPending until then).
// An x25519Key belongs to one handshake: it is not safe for concurrent use.
type x25519Key struct {
	scalar     [32]byte
	pub        [32]byte
	pubPending bool
	erased     bool
}

// newX25519Key reads 32 bytes from rand, as crypto/ecdh's x25519 does, and
// computes the public key with the fixed-base multiplication.
func newX25519Key(rand io.Reader) (*x25519Key, error) {
	k, err := newX25519Scalar(rand)
	if err != nil {
		return nil, err
	}
	x25519PublicKey(&k.pub, &k.scalar)
	k.pubPending = false
	return k, nil
}

// newX25519Scalar reads the scalar as newX25519Key does and leaves the
// public key pending, for a server, which calls shared before it sends the
// key (public computes it if shared has not): with
// field25519's assembly the two then share one inversion
// (field25519.PublicAndShared, about 2.3 us of a 27 us server share).
func newX25519Scalar(rand io.Reader) (*x25519Key, error) {
	k := &x25519Key{pubPending: true}
	if _, err := io.ReadFull(rand, k.scalar[:]); err != nil {
		return nil, fmt.Errorf("kex: read x25519 private key from rand: %w", err)
	}
	return k, nil
}

// public returns a fresh copy of the public key, computing it first if
// shared has not.
func (k *x25519Key) public() []byte {
	if k.pubPending {
		if k.erased {
			panic("kex: public key of an erased x25519 key that never made one")
		}
		x25519PublicKey(&k.pub, &k.scalar)
		k.pubPending = false
	}
	return append([]byte(nil), k.pub[:]...)
}

// shared computes X25519(scalar, peer), rejecting a peer key of the wrong
// length and an all-zero result (a low-order peer point: RFC 8446,
// Section 7.4.2; RFC 7748, Section 6.1) as ecdhShared does. A key whose
// public key is pending gets it here too, in the same inversion when
// field25519's assembly runs.
func (k *x25519Key) shared(peer []byte) ([]byte, error) {
	if k.erased {
		return nil, errErased
	}
	if len(peer) != 32 {
		return nil, illegal("%s key share is %d bytes, want 32", Name(X25519), len(peer))
	}
	var out [32]byte
	if k.pubPending && field25519.Accelerated() {
		field25519.PublicAndShared(&k.pub, &out, &k.scalar, (*[32]byte)(peer))
		k.pubPending = false
	} else if err := x25519Ladder(&out, &k.scalar, peer); err != nil {
		return nil, illegal("%s key share: %v", Name(X25519), err)
	}
	if subtle.ConstantTimeCompare(out[:], make([]byte, 32)) == 1 {
		return nil, illegal("%s shared secret is all zeros (low-order peer point)", Name(X25519))
	}
	return out[:], nil
}

// erase zeroes the scalar once the key has served.
func (k *x25519Key) erase() {
	clear(k.scalar[:])
	k.erased = true
}

var errErased = errors.New("kex: key share used after it was erased")

// x25519Share is the ClientShare for x25519.
type x25519Share struct{ k *x25519Key }

func (s *x25519Share) Group() uint16                      { return X25519 }
func (s *x25519Share) Public() []byte                     { return s.k.public() }
func (s *x25519Share) Shared(peer []byte) ([]byte, error) { return s.k.shared(peer) }
func (s *x25519Share) Erase()                             { s.k.erase() }

// X25519Shared is X25519(scalar, peer) (RFC 7748, Section 5) for an x25519
// private key held outside this package, such as a Z-data server's key
// (package zdata through tls13.X25519SharedSecret): the same ladder and
// checks as a share's shared secret, so a peer key that is not 32 bytes
// and an all-zero result (a low-order peer point) are illegal_parameter
// errors. scalar must be 32 bytes; the copy made of it is zeroed.
func X25519Shared(scalar, peer []byte) ([]byte, error) {
	if len(scalar) != x25519Len {
		return nil, fmt.Errorf("kex: x25519 private key is %d bytes, want %d", len(scalar), x25519Len)
	}
	var k x25519Key
	copy(k.scalar[:], scalar)
	defer k.erase()
	return k.shared(peer)
}
