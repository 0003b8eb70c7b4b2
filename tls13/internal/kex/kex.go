package kex

import (
	"bytes"
	"crypto/ecdh"
	cryptorand "crypto/rand"
	"errors"
	"fmt"
	"io"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/mlkem768"
)

// Named groups (RFC 8446, Section 4.2.7: enum NamedGroup; the hybrid's
// codepoint is from draft-ietf-tls-ecdhe-mlkem).
const (
	X25519         uint16 = 0x001d
	P256           uint16 = 0x0017
	P384           uint16 = 0x0018
	P521           uint16 = 0x0019
	X25519MLKEM768 uint16 = 0x11ec
)

// Sizes of key_exchange values.
const (
	x25519Len    = 32
	p256Len      = 1 + 2*32 // RFC 8446, Section 4.2.8.2: 0x04 || X || Y
	p384Len      = 1 + 2*48
	p521Len      = 1 + 2*66
	mlkemEKLen   = mlkem768.EncapsulationKeySize // 1184
	mlkemCTLen   = mlkem768.CiphertextSize       // 1088
	hybridCliLen = mlkemEKLen + x25519Len
	hybridSrvLen = mlkemCTLen + x25519Len
)

// maxScalarTries bounds the rejection sampling of NIST private keys so that a
// broken reader (all zeros, all ones) fails instead of looping forever.
const maxScalarTries = 64

// illegal is the error for a key share the peer got wrong: RFC 8446,
// Sections 4.2.8 and 7.4 make a malformed or weak share an illegal_parameter.
func illegal(format string, args ...any) error {
	return alert.Errorf(alert.IllegalParameter, format, args...)
}

// Supported reports whether this package implements group.
func Supported(group uint16) bool {
	switch group {
	case X25519, P256, P384, P521, X25519MLKEM768:
		return true
	}
	return false
}

// Name returns the IANA name of group, or its hex codepoint ("0x001e") when
// unknown.
func Name(group uint16) string {
	switch group {
	case X25519:
		return "x25519"
	case P256:
		return "secp256r1"
	case P384:
		return "secp384r1"
	case P521:
		return "secp521r1"
	case X25519MLKEM768:
		return "X25519MLKEM768"
	}
	return fmt.Sprintf("0x%04x", group)
}

// DefaultGroups returns the groups in ztls's order of preference: the
// post-quantum hybrid first, then the classical curves, secp521r1 last (a
// client sends a share for it only when configured to; a server takes it
// from clients that offer nothing else). The slice is fresh on each call,
// so callers may modify it.
func DefaultGroups() []uint16 {
	return []uint16{X25519MLKEM768, X25519, P256, P384, P521}
}

// ClientShare is a client's private key share for one group.
type ClientShare interface {
	// Group returns the group's codepoint.
	Group() uint16
	// Public returns the key_exchange bytes for the ClientHello's KeyShareEntry.
	Public() []byte
	// Shared computes the shared secret with a peer's key_exchange bytes (the
	// ServerHello share; ZTLS also uses it with the Z-data share, so it may be
	// called more than once). An invalid share returns an *alert.Error with alert
	// illegal_parameter, as does an all-zero x25519 result.
	Shared(peer []byte) ([]byte, error)
	// Erase forgets the private key once the handshake no longer needs
	// it: x25519 scalars are zeroed; keys held by crypto/ecdh and the
	// ML-KEM implementations (package mlkem768), which offer no way to
	// clear them, are dropped for the garbage collector. Shared fails
	// after Erase.
	Erase()
}

// ecdhCurve maps the classical groups to crypto/ecdh.
func ecdhCurve(group uint16) ecdh.Curve {
	switch group {
	case X25519:
		return ecdh.X25519()
	case P256:
		return ecdh.P256()
	case P384:
		return ecdh.P384()
	case P521:
		return ecdh.P521()
	}
	return nil
}

func scalarLen(group uint16) int {
	switch group {
	case P256:
		return 32
	case P384:
		return 48
	case P521:
		return 66
	}
	return 32
}

func shareLen(group uint16, fromServer bool) int {
	switch group {
	case X25519:
		return x25519Len
	case P256:
		return p256Len
	case P384:
		return p384Len
	case P521:
		return p521Len
	case X25519MLKEM768:
		if fromServer {
			return hybridSrvLen
		}
		return hybridCliLen
	}
	return 0
}

func randOrDefault(rand io.Reader) io.Reader {
	if rand == nil {
		return cryptorand.Reader
	}
	return rand
}

// parseECDHPublic parses a classical group's key_exchange bytes.
func parseECDHPublic(group uint16, share []byte) (*ecdh.PublicKey, error) {
	if want := shareLen(group, true); len(share) != want {
		if group != X25519 && len(share) == 1+scalarLen(group) && (share[0] == 2 || share[0] == 3) {
			return nil, illegal("%s key share is a compressed point, which TLS 1.3 forbids", Name(group))
		}
		return nil, illegal("%s key share is %d bytes, want %d", Name(group), len(share), want)
	}
	if group != X25519 && share[0] != 4 {
		return nil, illegal("%s key share does not start with 0x04 (uncompressed point)", Name(group))
	}
	pub, err := ecdhCurve(group).NewPublicKey(share)
	if err != nil {
		return nil, illegal("%s key share is not a point on the curve", Name(group))
	}
	return pub, nil
}

// ecdhShared runs ECDH between our private key and the peer's bytes.
func ecdhShared(group uint16, priv *ecdh.PrivateKey, peer []byte) ([]byte, error) {
	pub, err := parseECDHPublic(group, peer)
	if err != nil {
		return nil, err
	}
	secret, err := priv.ECDH(pub)
	if err != nil {
		// crypto/ecdh fails only for an all-zero x25519 output, i.e. a
		// low-order peer point (RFC 8446, Section 7.4.2).
		return nil, illegal("%s shared secret is all zeros (low-order peer point)", Name(group))
	}
	return secret, nil
}

// generateECDH draws a private key for a classical group from rand: x25519
// takes 32 bytes as they are; NIST curves take scalar-size bytes and retry
// until the value is a valid scalar (nonzero and below the group order).
func generateECDH(group uint16, rand io.Reader) (*ecdh.PrivateKey, error) {
	curve := ecdhCurve(group)
	buf := make([]byte, scalarLen(group))
	for range maxScalarTries {
		if _, err := io.ReadFull(rand, buf); err != nil {
			return nil, fmt.Errorf("kex: read %s private key from rand: %w", Name(group), err)
		}
		if group == P521 {
			// 66 bytes hold 528 bits; the order is just under 2^521.
			// Without the top 7 bits almost every draw is a valid scalar.
			buf[0] &= 0x01
		}
		priv, err := curve.NewPrivateKey(buf)
		if err == nil {
			return priv, nil
		}
		if group == X25519 {
			return nil, fmt.Errorf("kex: x25519 private key: %w", err)
		}
	}
	return nil, fmt.Errorf("kex: rand gave no valid %s scalar in %d tries: is the reader broken?", Name(group), maxScalarTries)
}

// ecdhShare is a ClientShare for secp256r1, secp384r1 and secp521r1
// (x25519's is x25519Share).
type ecdhShare struct {
	group uint16
	priv  *ecdh.PrivateKey
}

func (s *ecdhShare) Group() uint16  { return s.group }
func (s *ecdhShare) Public() []byte { return s.priv.PublicKey().Bytes() }
func (s *ecdhShare) Shared(peer []byte) ([]byte, error) {
	if s.priv == nil {
		return nil, errErased
	}
	return ecdhShared(s.group, s.priv, peer)
}
func (s *ecdhShare) Erase() { s.priv = nil }

// hybridShare is a ClientShare for X25519MLKEM768. The wire order puts the
// ML-KEM part first in the share and in the secret (draft-ietf-tls-ecdhe-mlkem,
// Section 3).
type hybridShare struct {
	dk *mlkem768.DecapsulationKey
	x  *x25519Key
}

func (s *hybridShare) Group() uint16 { return X25519MLKEM768 }

func (s *hybridShare) Public() []byte {
	if s.dk == nil {
		return nil // erased
	}
	out := s.dk.AppendEncapsulationKey(make([]byte, 0, hybridCliLen))
	return append(out, s.x.pub[:]...)
}

func (s *hybridShare) Erase() {
	s.dk = nil
	s.x.erase()
}

func (s *hybridShare) Shared(peer []byte) ([]byte, error) {
	if s.dk == nil {
		return nil, errErased
	}
	if len(peer) != hybridSrvLen {
		return nil, illegal("X25519MLKEM768 server key share is %d bytes, want %d", len(peer), hybridSrvLen)
	}
	mlkemSecret, err := s.dk.Decapsulate(peer[:mlkemCTLen])
	if err != nil {
		return nil, illegal("X25519MLKEM768 server key share: bad ML-KEM ciphertext")
	}
	xSecret, err := s.x.shared(peer[mlkemCTLen:])
	if err != nil {
		return nil, err
	}
	return append(mlkemSecret, xSecret...), nil
}

// GenerateClientShare makes a fresh client key share for group, drawing all
// key material from rand (nil means crypto/rand.Reader): x25519 reads 32
// bytes; secp256r1/secp384r1/secp521r1 read 32/48/66 bytes per try until
// the scalar is valid (secp521r1's top 7 bits cleared); X25519MLKEM768 reads
// a 64-byte ML-KEM seed (d || z) and then 32 bytes for its x25519 half. An
// x25519 public key comes from the fixed-base multiplication and its shared
// secret from one ladder (x25519.go), so a share the server does not pick
// costs only the former.
func GenerateClientShare(group uint16, rand io.Reader) (ClientShare, error) {
	return generateClientShare(group, randOrDefault(rand), newX25519Key)
}

func generateClientShare(group uint16, rand io.Reader, newX func(io.Reader) (*x25519Key, error)) (ClientShare, error) {
	switch group {
	case X25519:
		k, err := newX(rand)
		if err != nil {
			return nil, err
		}
		return &x25519Share{k: k}, nil
	case P256, P384, P521:
		priv, err := generateECDH(group, rand)
		if err != nil {
			return nil, err
		}
		return &ecdhShare{group: group, priv: priv}, nil
	case X25519MLKEM768:
		dk, err := newMLKEMKey(rand)
		if err != nil {
			return nil, err
		}
		x, err := newX(rand)
		if err != nil {
			return nil, err
		}
		return &hybridShare{dk: dk, x: x}, nil
	}
	return nil, fmt.Errorf("kex: cannot generate a key share for unsupported group %s", Name(group))
}

// newMLKEMKey reads a 64-byte ML-KEM-768 seed (d || z) from rand. The
// key is package mlkem768's: circl's AVX2 code on amd64, else crypto/mlkem.
func newMLKEMKey(rand io.Reader) (*mlkem768.DecapsulationKey, error) {
	var seed [mlkem768.SeedSize]byte
	if _, err := io.ReadFull(rand, seed[:]); err != nil {
		return nil, fmt.Errorf("kex: read ML-KEM-768 seed from rand: %w", err)
	}
	dk, err := mlkem768.NewDecapsulationKey(seed[:])
	clear(seed[:])
	if err != nil {
		return nil, fmt.Errorf("kex: ML-KEM-768 key: %w", err)
	}
	return dk, nil
}

// ServerShare answers a client's key share: it returns the server's
// key_exchange bytes for the ServerHello and the shared secret. rand supplies
// the server's ephemeral key the way GenerateClientShare does; for
// X25519MLKEM768 it first supplies the 32 bytes of ML-KEM encapsulation
// randomness, then the x25519 key. A malformed client share returns an *alert.Error
// with alert illegal_parameter.
func ServerShare(group uint16, clientShare []byte, rand io.Reader) (serverPublic, shared []byte, err error) {
	rand = randOrDefault(rand)
	return serverShare(group, clientShare, rand, func() (*x25519Key, error) { return newX25519Scalar(rand) })
}

// serverShare is ServerShare with the server's x25519 key from newX, called
// once the client's share has been checked. The key is erased after use.
func serverShare(group uint16, clientShare []byte, rand io.Reader, newX func() (*x25519Key, error)) (serverPublic, shared []byte, err error) {
	switch group {
	case X25519:
		if _, err := parseECDHPublic(group, clientShare); err != nil {
			return nil, nil, err
		}
		x, err := newX()
		if err != nil {
			return nil, nil, err
		}
		defer x.erase()
		secret, err := x.shared(clientShare)
		if err != nil {
			return nil, nil, err
		}
		return x.public(), secret, nil
	case P256, P384, P521:
		if _, err := parseECDHPublic(group, clientShare); err != nil {
			return nil, nil, err
		}
		priv, err := generateECDH(group, rand)
		if err != nil {
			return nil, nil, err
		}
		secret, err := ecdhShared(group, priv, clientShare)
		if err != nil {
			return nil, nil, err
		}
		return priv.PublicKey().Bytes(), secret, nil
	case X25519MLKEM768:
		// The length, then the encapsulation key parsed once, in the same
		// call as the encapsulation: parsing is FIPS 203's modulus check
		// and expands the key's matrix, a large part of the server's
		// ML-KEM work.
		if want := shareLen(group, false); len(clientShare) != want {
			return nil, nil, illegal("%s key share is %d bytes, want %d", Name(group), len(clientShare), want)
		}
		mlkemSecret, ct, err := encapsulate(clientShare[:mlkemEKLen], rand)
		if err != nil {
			return nil, nil, err
		}
		x, err := newX()
		if err != nil {
			return nil, nil, err
		}
		defer x.erase()
		xSecret, err := x.shared(clientShare[mlkemEKLen:])
		if err != nil {
			return nil, nil, err
		}
		serverPublic = make([]byte, 0, hybridSrvLen)
		serverPublic = append(append(serverPublic, ct...), x.public()...)
		return serverPublic, append(mlkemSecret, xSecret...), nil
	}
	return nil, nil, fmt.Errorf("kex: cannot answer a key share for unsupported group %s", Name(group))
}

// encapsulate runs ML-KEM-768 encapsulation. With the system reader the
// implementation draws its randomness itself (crypto/mlkem's FIPS-approved
// path where that one runs); with any other reader it takes the 32 bytes
// of encapsulation randomness from that reader, so handshakes with fixed
// randomness are reproducible. An invalid key (a coefficient not below q)
// is an illegal_parameter.
func encapsulate(ek []byte, rand io.Reader) (secret, ct []byte, err error) {
	var m []byte
	if rand != cryptorand.Reader {
		m = make([]byte, mlkem768.RandomnessSize)
		if _, err := io.ReadFull(rand, m); err != nil {
			return nil, nil, fmt.Errorf("kex: read ML-KEM-768 encapsulation randomness from rand: %w", err)
		}
	}
	secret, ct, err = mlkem768.Encapsulate(ek, m)
	if errors.Is(err, mlkem768.ErrInvalidEncapsulationKey) {
		return nil, nil, illegal("X25519MLKEM768 key share holds an invalid ML-KEM-768 encapsulation key")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kex: ML-KEM-768 encapsulation: %w", err)
	}
	return secret, ct, nil
}

// StaticKey is a long-lived (semi-static) key, used by ZTLS's Z-data: the
// server publishes Public() in DNS and computes the shared secret with
// what a client sends. For x25519 and secp256r1 that is ECDH(static,
// client share). For X25519MLKEM768 (docs/ztls-spec.md, Section 9.1) the
// static key plays the part of a TLS client's hybrid share: Public() is
// the ML-KEM-768 encapsulation key then the x25519 key, the client
// answers it with ServerShare, and Shared takes that answer (the ML-KEM
// ciphertext then the client's x25519 share) exactly as a client's
// hybrid share takes a ServerHello's. A StaticKey is immutable and safe
// for concurrent use; its zero value is not usable.
type StaticKey struct {
	group  uint16
	priv   *ecdh.PrivateKey
	x      *x25519Key   // X25519: priv's scalar for the ladder; never erased
	hybrid *hybridShare // X25519MLKEM768: never erased
	seed   []byte       // X25519MLKEM768: the private bytes it was made from
}

// StaticHybridSize is the length of an X25519MLKEM768 static key's
// private bytes: the 64-byte ML-KEM-768 seed (d || z) then the 32-byte
// x25519 scalar, the bytes GenerateClientShare reads for that group.
const StaticHybridSize = mlkem768.SeedSize + x25519Len

var errStaticGroup = errors.New("kex: static keys exist only for x25519, secp256r1 and X25519MLKEM768")

// GenerateStaticKey makes a static key for group (X25519, P256 or
// X25519MLKEM768), drawing the private key from rand as
// GenerateClientShare does.
func GenerateStaticKey(group uint16, rand io.Reader) (*StaticKey, error) {
	rand = randOrDefault(rand)
	switch group {
	case X25519MLKEM768:
		seed := make([]byte, StaticHybridSize)
		if _, err := io.ReadFull(rand, seed); err != nil {
			return nil, fmt.Errorf("kex: read %s static key from rand: %w", Name(group), err)
		}
		return NewStaticKey(group, seed)
	case X25519, P256:
		priv, err := generateECDH(group, rand)
		if err != nil {
			return nil, err
		}
		return newStaticECDH(group, priv), nil
	}
	return nil, fmt.Errorf("%w, not %s", errStaticGroup, Name(group))
}

// NewStaticKey loads a static key from its private bytes (32 bytes for
// x25519 and secp256r1, StaticHybridSize for X25519MLKEM768, as returned
// by Private).
func NewStaticKey(group uint16, private []byte) (*StaticKey, error) {
	if group == X25519MLKEM768 {
		if len(private) != StaticHybridSize {
			return nil, fmt.Errorf("kex: %s static private key is %d bytes, want %d", Name(group), len(private), StaticHybridSize)
		}
		seed := append([]byte(nil), private...)
		cs, err := generateClientShare(group, bytes.NewReader(seed), newX25519Key)
		if err != nil {
			return nil, err
		}
		return &StaticKey{group: group, hybrid: cs.(*hybridShare), seed: seed}, nil
	}
	if group != X25519 && group != P256 {
		return nil, fmt.Errorf("%w, not %s", errStaticGroup, Name(group))
	}
	if len(private) != scalarLen(group) {
		return nil, fmt.Errorf("kex: %s static private key is %d bytes, want %d", Name(group), len(private), scalarLen(group))
	}
	priv, err := ecdhCurve(group).NewPrivateKey(private)
	if err != nil {
		return nil, fmt.Errorf("kex: %s static private key is not a valid scalar", Name(group))
	}
	return newStaticECDH(group, priv), nil
}

// newStaticECDH wraps an x25519 or secp256r1 key. An x25519 key also keeps
// its scalar and public key as an x25519Key, so that Shared runs this
// package's ladder (x25519.go) rather than crypto/ecdh's.
func newStaticECDH(group uint16, priv *ecdh.PrivateKey) *StaticKey {
	k := &StaticKey{group: group, priv: priv}
	if group == X25519 {
		k.x = new(x25519Key)
		copy(k.x.scalar[:], priv.Bytes())
		copy(k.x.pub[:], priv.PublicKey().Bytes())
	}
	return k
}

// Group returns the key's group.
func (k *StaticKey) Group() uint16 { return k.group }

// Public returns the key_exchange encoding of the public key.
func (k *StaticKey) Public() []byte {
	if k.hybrid != nil {
		return k.hybrid.Public()
	}
	return k.priv.PublicKey().Bytes()
}

// Private returns the private bytes. They are secret: never log them.
func (k *StaticKey) Private() []byte {
	if k.hybrid != nil {
		return append([]byte(nil), k.seed...)
	}
	return k.priv.Bytes()
}

// Shared computes the shared secret with the client's bytes, with the
// same validation as ClientShare.Shared: ECDH(static, peer), or for
// X25519MLKEM768 the ML-KEM-768 decapsulation of peer's ciphertext then
// the x25519 of its share, concatenated (a ciphertext of the right
// length never fails: FIPS 203's implicit rejection yields an unrelated
// key).
func (k *StaticKey) Shared(peer []byte) ([]byte, error) {
	if k.hybrid != nil {
		return k.hybrid.Shared(peer)
	}
	if k.x != nil {
		return k.x.shared(peer)
	}
	return ecdhShared(k.group, k.priv, peer)
}
