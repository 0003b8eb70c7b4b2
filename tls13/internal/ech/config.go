package ech

import (
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// Version is the ECHConfig version RFC 9849 defines (Section 4), which is
// also the codepoint of the encrypted_client_hello extension.
const Version = 0xfe0d

// Extension codepoints of RFC 9849 (Section 11.1).
const (
	ExtEncryptedClientHello uint16 = 0xfe0d
	ExtOuterExtensions      uint16 = 0xfd00
)

// HPKE identifiers (RFC 9180, Section 7) this package offers in the
// configs it makes and accepts in the configs it reads.
const (
	KEMX25519HKDFSHA256 uint16 = 0x0020
	KDFHKDFSHA256       uint16 = 0x0001
	AEADAES128GCM       uint16 = 0x0001
	AEADAES256GCM       uint16 = 0x0002
	AEADChaCha20        uint16 = 0x0003
)

// Suite is an HpkeSymmetricCipherSuite: a KDF and an AEAD.
type Suite struct {
	KDF, AEAD uint16
}

// ConfigExtension is one ECHConfigExtension. A type with its high bit set
// is mandatory: a client that does not know it ignores the whole config
// (RFC 9849, Section 4.2).
type ConfigExtension struct {
	Type uint16
	Data []byte
}

// Mandatory reports whether a client must understand e to use its config.
func (e ConfigExtension) Mandatory() bool { return e.Type&0x8000 != 0 }

// Config is one ECHConfig of version 0xfe0d (RFC 9849, Section 4).
type Config struct {
	ConfigID      uint8
	KEM           uint16
	PublicKey     []byte
	Suites        []Suite
	MaxNameLength uint8
	PublicName    string
	Extensions    []ConfigExtension

	// Raw is the whole ECHConfig (version, length and contents) as
	// received or marshalled: the HPKE info string binds exactly these
	// bytes, and a server matches a config by them.
	Raw []byte
}

// Marshal returns c's ECHConfig encoding and sets c.Raw to it.
func (c *Config) Marshal() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	b := wire.NewBuilder(nil)
	b.AddUint16(Version)
	b.AddUint16LengthPrefixed(func(b *wire.Builder) {
		b.AddUint8(c.ConfigID)
		b.AddUint16(c.KEM)
		b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(c.PublicKey) })
		b.AddUint16LengthPrefixed(func(b *wire.Builder) {
			for _, s := range c.Suites {
				b.AddUint16(s.KDF)
				b.AddUint16(s.AEAD)
			}
		})
		b.AddUint8(c.MaxNameLength)
		b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes([]byte(c.PublicName)) })
		b.AddUint16LengthPrefixed(func(b *wire.Builder) {
			for _, e := range c.Extensions {
				b.AddUint16(e.Type)
				b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(e.Data) })
			}
		})
	})
	raw, err := b.Bytes()
	if err != nil {
		return nil, fmt.Errorf("ech: encoding the config: %w", err)
	}
	c.Raw = raw
	return raw, nil
}

// check refuses what Marshal must not write: the same rules ParseConfig
// applies to what it reads.
func (c *Config) check() error {
	switch {
	case len(c.PublicKey) == 0:
		return errors.New("ech: config without a public key")
	case len(c.Suites) == 0:
		return errors.New("ech: config without a cipher suite")
	case len(c.Suites) > (1<<16-4)/4:
		return errors.New("ech: config with too many cipher suites")
	}
	return checkPublicName(c.PublicName)
}

// MarshalConfigList returns the ECHConfigList of configs, in their order
// (a client tries them in order of preference).
func MarshalConfigList(configs []*Config) ([]byte, error) {
	if len(configs) == 0 {
		return nil, errors.New("ech: empty config list")
	}
	b := wire.NewBuilder(nil)
	b.AddUint16LengthPrefixed(func(b *wire.Builder) {
		for _, c := range configs {
			raw, err := c.Marshal()
			if err != nil {
				b.SetError(err)
				return
			}
			b.AddBytes(raw)
		}
	})
	return b.Bytes()
}

// ParseConfigList reads an ECHConfigList. Configs of other versions are
// skipped, as RFC 9849, Section 4 asks; a malformed config of version
// 0xfe0d fails the whole list (its length framing cannot be trusted). The
// result may be empty: a list with no config this package can read.
func ParseConfigList(b []byte) ([]*Config, error) {
	s := cryptobyte.String(b)
	var list cryptobyte.String
	if !s.ReadUint16LengthPrefixed(&list) || !s.Empty() {
		return nil, errors.New("ech: malformed ECHConfigList: bad length")
	}
	if list.Empty() {
		return nil, errors.New("ech: malformed ECHConfigList: empty")
	}
	var out []*Config
	for !list.Empty() {
		start := list
		var version uint16
		var contents cryptobyte.String
		if !list.ReadUint16(&version) || !list.ReadUint16LengthPrefixed(&contents) {
			return nil, errors.New("ech: malformed ECHConfigList: truncated config")
		}
		if version != Version {
			continue
		}
		raw := []byte(start[:len(start)-len(list)])
		c, err := parseContents(contents)
		if err != nil {
			return nil, err
		}
		c.Raw = append([]byte(nil), raw...)
		out = append(out, c)
	}
	return out, nil
}

// ParseConfig reads one ECHConfig of version 0xfe0d, as a server's key
// file holds it.
func ParseConfig(raw []byte) (*Config, error) {
	s := cryptobyte.String(raw)
	var version uint16
	var contents cryptobyte.String
	if !s.ReadUint16(&version) || !s.ReadUint16LengthPrefixed(&contents) || !s.Empty() {
		return nil, errors.New("ech: malformed ECHConfig: bad length")
	}
	if version != Version {
		return nil, fmt.Errorf("ech: ECHConfig version %#04x, want %#04x", version, Version)
	}
	c, err := parseContents(contents)
	if err != nil {
		return nil, err
	}
	c.Raw = append([]byte(nil), raw...)
	return c, nil
}

func parseContents(s cryptobyte.String) (*Config, error) {
	c := &Config{}
	var pub, suites, name, exts cryptobyte.String
	if !s.ReadUint8(&c.ConfigID) || !s.ReadUint16(&c.KEM) ||
		!s.ReadUint16LengthPrefixed(&pub) || pub.Empty() ||
		!s.ReadUint16LengthPrefixed(&suites) || suites.Empty() || len(suites)%4 != 0 ||
		!s.ReadUint8(&c.MaxNameLength) ||
		!s.ReadUint8LengthPrefixed(&name) || name.Empty() ||
		!s.ReadUint16LengthPrefixed(&exts) || !s.Empty() {
		return nil, errors.New("ech: malformed ECHConfig contents")
	}
	c.PublicKey = append([]byte(nil), pub...)
	for !suites.Empty() {
		var st Suite
		suites.ReadUint16(&st.KDF)
		suites.ReadUint16(&st.AEAD)
		c.Suites = append(c.Suites, st)
	}
	c.PublicName = string(name)
	for !exts.Empty() {
		var e ConfigExtension
		var data cryptobyte.String
		if !exts.ReadUint16(&e.Type) || !exts.ReadUint16LengthPrefixed(&data) {
			return nil, errors.New("ech: malformed ECHConfig extensions")
		}
		e.Data = append([]byte(nil), data...)
		c.Extensions = append(c.Extensions, e)
	}
	return c, nil
}

// Usable says why a client must not use c, or nil: a KEM or suites it
// cannot run, a mandatory extension it does not know, or a public name
// RFC 9849, Section 6.1.7 tells it to ignore.
func (c *Config) Usable() error {
	if c.KEM != KEMX25519HKDFSHA256 {
		return fmt.Errorf("ech: config %d: KEM %#04x is not supported", c.ConfigID, c.KEM)
	}
	if _, ok := c.suite(); !ok {
		return fmt.Errorf("ech: config %d: no supported cipher suite", c.ConfigID)
	}
	for _, e := range c.Extensions {
		if e.Mandatory() {
			return fmt.Errorf("ech: config %d: unknown mandatory extension %#04x", c.ConfigID, e.Type)
		}
	}
	if len(c.PublicKey) != 32 {
		return fmt.Errorf("ech: config %d: X25519 public key of %d bytes", c.ConfigID, len(c.PublicKey))
	}
	return checkPublicName(c.PublicName)
}

// suite is the first of c's suites this package runs, in c's order.
func (c *Config) suite() (Suite, bool) {
	for _, s := range c.Suites {
		if s.KDF != KDFHKDFSHA256 {
			continue
		}
		switch s.AEAD {
		case AEADAES128GCM, AEADAES256GCM, AEADChaCha20:
			return s, true
		}
	}
	return Suite{}, false
}

// checkPublicName applies RFC 9849, Section 4's rules: a DNS name in
// LDH form with at least two labels, whose last label is not numeric (so
// it is not an IPv4 address in any notation), no trailing dot.
func checkPublicName(name string) error {
	if name == "" || len(name) > 255 {
		return fmt.Errorf("ech: public name of %d bytes", len(name))
	}
	labels := strings.Split(name, ".")
	for _, l := range labels {
		if !ldhLabel(l) {
			return fmt.Errorf("ech: public name %q is not a DNS name in LDH form", name)
		}
	}
	last := labels[len(labels)-1]
	if numeric(last) || strings.HasPrefix(strings.ToLower(last), "0x") && hexDigits(last[2:]) {
		return fmt.Errorf("ech: public name %q ends in a numeric label (an IPv4 address?)", name)
	}
	return nil
}

func ldhLabel(l string) bool {
	if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
		return false
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func numeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func hexDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if !(s[i] >= '0' && s[i] <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
