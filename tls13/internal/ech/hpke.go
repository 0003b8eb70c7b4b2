package ech

import (
	"crypto/ecdh"
	"crypto/hpke"
	"errors"
	"fmt"
	"io"
)

// infoPrefix starts the HPKE info string: "tls ech" and a zero byte,
// followed by the ECHConfig (RFC 9849, Section 6.1).
const infoPrefix = "tls ech\x00"

func info(c *Config) []byte {
	return append([]byte(infoPrefix), c.Raw...)
}

// Key is a server's ECH key: its config and the HPKE private key.
type Key struct {
	Config *Config
	priv   hpke.PrivateKey
	x25519 *ecdh.PrivateKey
}

// newHPKEKey makes the HPKE private key of 32 X25519 bytes, whose
// decapsulation runs on newLadderKey's ladder.
func newHPKEKey(x25519 []byte) (hpke.PrivateKey, *ecdh.PrivateKey, error) {
	priv, err := ecdh.X25519().NewPrivateKey(x25519)
	if err != nil {
		return nil, nil, fmt.Errorf("ech: X25519 private key: %w", err)
	}
	k, err := hpke.NewDHKEMPrivateKey(newLadderKey(priv))
	if err != nil {
		return nil, nil, fmt.Errorf("ech: X25519 private key: %w", err)
	}
	return k, priv, nil
}

// GenerateKey makes a DHKEM(X25519, HKDF-SHA256) key and its config for
// publicName, offering HKDF-SHA256 with AES-128-GCM and ChaCha20-Poly1305.
// maxNameLength is the longest server name the key's clients expect to
// hide (RFC 9849, Section 6.1.3 pads the inner ClientHello to it).
func GenerateKey(configID uint8, publicName string, maxNameLength uint8, rand io.Reader) (*Key, error) {
	priv, err := ecdh.X25519().GenerateKey(rand)
	if err != nil {
		return nil, err
	}
	return NewKey(configID, publicName, maxNameLength, priv.Bytes())
}

// NewKey makes the Key of an X25519 private key (its 32 bytes, as a key
// file holds them).
func NewKey(configID uint8, publicName string, maxNameLength uint8, x25519 []byte) (*Key, error) {
	priv, x, err := newHPKEKey(x25519)
	if err != nil {
		return nil, err
	}
	c := &Config{
		ConfigID: configID, KEM: KEMX25519HKDFSHA256,
		PublicKey:     priv.PublicKey().Bytes(),
		Suites:        []Suite{{KDFHKDFSHA256, AEADAES128GCM}, {KDFHKDFSHA256, AEADChaCha20}},
		MaxNameLength: maxNameLength, PublicName: publicName,
	}
	if _, err := c.Marshal(); err != nil {
		return nil, err
	}
	return &Key{Config: c, priv: priv, x25519: x}, nil
}

// LoadKey pairs a config (as marshalled) with its X25519 private key, and
// checks that they belong together.
func LoadKey(rawConfig, x25519 []byte) (*Key, error) {
	c, err := ParseConfig(rawConfig)
	if err != nil {
		return nil, err
	}
	if c.KEM != KEMX25519HKDFSHA256 {
		return nil, fmt.Errorf("ech: config %d: KEM %#04x is not supported", c.ConfigID, c.KEM)
	}
	priv, x, err := newHPKEKey(x25519)
	if err != nil {
		return nil, err
	}
	if string(priv.PublicKey().Bytes()) != string(c.PublicKey) {
		return nil, fmt.Errorf("ech: config %d: the private key is not the config's", c.ConfigID)
	}
	return &Key{Config: c, priv: priv, x25519: x}, nil
}

// PrivateKeyBytes returns the HPKE private key's serialization (RFC
// 9180, Section 7.1.2: the X25519 scalar, clamped), for a key file and
// for crypto/tls's EncryptedClientHelloKey.
func (k *Key) PrivateKeyBytes() ([]byte, error) {
	b := k.x25519.Bytes()
	b[0] &= 248
	b[31] &= 127
	b[31] |= 64
	return b, nil
}

// ClientContext is the client's HPKE context for one connection: the
// encapsulated key it sends in the first ClientHelloOuter, and the sealer
// for that one and, after a HelloRetryRequest, the second (RFC 9849,
// Section 6.1.5 reuses the context).
type ClientContext struct {
	Config *Config
	Suite  Suite
	Enc    []byte
	sender *hpke.Sender
}

// NewClientContext sets up HPKE to c's public key with c's first usable
// suite.
func NewClientContext(c *Config) (*ClientContext, error) {
	if err := c.Usable(); err != nil {
		return nil, err
	}
	suite, _ := c.suite()
	pub, err := hpke.DHKEM(ecdh.X25519()).NewPublicKey(c.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("ech: config %d: %w", c.ConfigID, err)
	}
	kdf, aead, err := primitives(suite)
	if err != nil {
		return nil, err
	}
	enc, sender, err := hpke.NewSender(pub, kdf, aead, info(c))
	if err != nil {
		return nil, fmt.Errorf("ech: HPKE set-up: %w", err)
	}
	return &ClientContext{Config: c, Suite: suite, Enc: enc, sender: sender}, nil
}

// Seal encrypts the EncodedClientHelloInner with the ClientHelloOuterAAD
// as associated data.
func (cc *ClientContext) Seal(aad, encodedInner []byte) ([]byte, error) {
	return cc.sender.Seal(aad, encodedInner)
}

// ServerContext is the server's HPKE context for one connection, made
// from the first ClientHelloOuter's enc.
type ServerContext struct {
	Key       *Key
	Suite     Suite
	recipient *hpke.Recipient
}

// ErrDecrypt means the payload did not decrypt: the server then rejects
// ECH and goes on with the ClientHelloOuter (RFC 9849, Section 7.1).
var ErrDecrypt = errors.New("ech: the payload does not decrypt under the server's key")

// NewServerContext sets up HPKE for the client's enc under k with the
// suite the client chose, which must be one of k's config.
func NewServerContext(k *Key, suite Suite, enc []byte) (*ServerContext, error) {
	offered := false
	for _, s := range k.Config.Suites {
		offered = offered || s == suite
	}
	if !offered {
		return nil, fmt.Errorf("ech: suite %#04x/%#04x is not in config %d", suite.KDF, suite.AEAD, k.Config.ConfigID)
	}
	kdf, aead, err := primitives(suite)
	if err != nil {
		return nil, err
	}
	r, err := hpke.NewRecipient(enc, k.priv, kdf, aead, info(k.Config))
	if err != nil {
		return nil, ErrDecrypt
	}
	return &ServerContext{Key: k, Suite: suite, recipient: r}, nil
}

// Open decrypts a payload; any failure is ErrDecrypt.
func (sc *ServerContext) Open(aad, payload []byte) ([]byte, error) {
	pt, err := sc.recipient.Open(aad, payload)
	if err != nil {
		return nil, ErrDecrypt
	}
	return pt, nil
}

func primitives(s Suite) (hpke.KDF, hpke.AEAD, error) {
	if s.KDF != KDFHKDFSHA256 {
		return nil, nil, fmt.Errorf("ech: KDF %#04x is not supported", s.KDF)
	}
	aead, err := hpke.NewAEAD(s.AEAD)
	if err != nil || s.AEAD == 0xffff {
		return nil, nil, fmt.Errorf("ech: AEAD %#04x is not supported", s.AEAD)
	}
	return hpke.HKDFSHA256(), aead, nil
}
