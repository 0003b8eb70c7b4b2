package tls13

// Encrypted ClientHello (RFC 9849): what a Config holds, the status a
// connection reports, and the error a rejected client returns. The
// client's steps are in ech_client.go, the server's in ech_server.go;
// the codec, HPKE and the inner ClientHello's encoding in
// internal/ech.

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/ztls-project/ztls/tls13/internal/ech"
)

// ECHKey is one of a server's ECH keys: an ECHConfig (RFC 9849, Section
// 4, version 0xfe0d, as marshalled) and its X25519 private key.
// SendAsRetry puts the config in the retry_configs a server sends when it
// rejects ECH: set it on the keys clients should use now, and leave it
// off a key kept only for clients with an older config.
type ECHKey struct {
	Config      []byte
	PrivateKey  []byte
	SendAsRetry bool
}

// GenerateECHKey makes an ECH key for publicName (the name the outer
// ClientHello carries and the certificate a rejected client checks),
// DHKEM(X25519, HKDF-SHA256) with HKDF-SHA256 and AES-128-GCM or
// ChaCha20-Poly1305. maxNameLength is the longest server name it hides
// (clients pad to it; 0 lets them pad by their own rule).
func GenerateECHKey(configID uint8, publicName string, maxNameLength uint8, rand io.Reader) (ECHKey, error) {
	return echKeyOf(ech.GenerateKey(configID, publicName, maxNameLength, rand))
}

// NewECHKey makes the ECH key of a given X25519 private key (32 bytes,
// any value: X25519 clamps it), as GenerateECHKey does for a random one:
// for keys derived rather than drawn, such as a fleet's (every server
// derives the same key from a shared seed, docs/ztls-spec.md, Section
// 10.3).
func NewECHKey(configID uint8, publicName string, maxNameLength uint8, x25519 []byte) (ECHKey, error) {
	return echKeyOf(ech.NewKey(configID, publicName, maxNameLength, x25519))
}

// echKeyOf is the ECHKey (sent as retry) of internal/ech's key k, or
// err's wrap when making k failed.
func echKeyOf(k *ech.Key, err error) (ECHKey, error) {
	if err != nil {
		return ECHKey{}, fmt.Errorf("tls13: %w", err)
	}
	priv, err := k.PrivateKeyBytes()
	if err != nil {
		return ECHKey{}, fmt.Errorf("tls13: %w", err)
	}
	return ECHKey{Config: k.Config.Raw, PrivateKey: priv, SendAsRetry: true}, nil
}

// MarshalECHConfigList returns the ECHConfigList of keys' configs, in
// their order: what a client's Config.ECHConfigList takes and the
// HTTPS record's ech SvcParam carries.
func MarshalECHConfigList(keys []ECHKey) ([]byte, error) {
	var configs []*ech.Config
	for i, k := range keys {
		c, err := ech.ParseConfig(k.Config)
		if err != nil {
			return nil, fmt.Errorf("tls13: ECH key %d: %w", i, err)
		}
		configs = append(configs, c)
	}
	list, err := ech.MarshalConfigList(configs)
	if err != nil {
		return nil, fmt.Errorf("tls13: %w", err)
	}
	return list, nil
}

// ECHStatus is what became of Encrypted ClientHello on a connection.
type ECHStatus string

const (
	// ECHNone: no ECH was offered (client) or none could be read (server).
	ECHNone ECHStatus = ""
	// ECHAccepted: the handshake ran on the encrypted inner ClientHello.
	ECHAccepted ECHStatus = "accepted"
	// ECHRejected: the server could not decrypt the inner ClientHello;
	// the handshake ran on the outer one (a client then fails with an
	// ECHRejectedError).
	ECHRejected ECHStatus = "rejected"
	// ECHGrease: the client sent a GREASE extension (RFC 9849, Section 6.2).
	ECHGrease ECHStatus = "grease"
)

// ECHRejectedError is the client's error when the server rejected ECH:
// the handshake was completed with the public name's certificate, then
// ended with an ech_required alert (RFC 9849, Section 6.1.6). Nothing of
// the connection's request was sent (early data was sent under the inner
// ClientHello's keys, which the server did not have). RetryConfigList is
// the server's retry_configs, authenticated by that handshake: retry once
// with it as Config.ECHConfigList; nil means the server sent none (it
// does not do ECH for this name now: retry without ECH only if the
// application allows sending the name in clear).
type ECHRejectedError struct {
	PublicName      string
	RetryConfigList []byte
}

func (e *ECHRejectedError) Error() string {
	if e.RetryConfigList == nil {
		return fmt.Sprintf("tls13: the server (authenticated as the ECH public name %q) rejected Encrypted ClientHello and sent no retry configs: the ECH config is stale or the server does not do ECH; retry without ECH only if the server name may go in clear", e.PublicName)
	}
	return fmt.Sprintf("tls13: the server (authenticated as the ECH public name %q) rejected Encrypted ClientHello: retry once with the retry configs it sent (ECHRejectedError.RetryConfigList as Config.ECHConfigList)", e.PublicName)
}

// ECHKeySet is a server's ECH keys, replaceable while it serves: Set
// (a rotation, a reload) takes effect for the next ClientHellos, and a
// handshake under way keeps the keys it started with. Keep the previous
// key in the set while clients may still hold its config (the HTTPS
// record's TTL plus their caches), without SendAsRetry. Safe for
// concurrent use; one set may serve many Configs.
type ECHKeySet struct {
	cur atomic.Pointer[echLoaded]
}

// echLoaded is a list of ECH keys, parsed and checked.
type echLoaded struct {
	keys  []*ech.Key
	retry []byte // the ECHConfigList of the SendAsRetry keys (nil: none)
}

// NewECHKeySet returns a set holding keys.
func NewECHKeySet(keys []ECHKey) (*ECHKeySet, error) {
	s := &ECHKeySet{}
	if err := s.Set(keys); err != nil {
		return nil, err
	}
	return s, nil
}

// Set replaces the keys; on an error (a config that does not parse, a
// private key that is not its config's) the set keeps its keys.
func (s *ECHKeySet) Set(keys []ECHKey) error {
	l, err := loadECHKeys(keys)
	if err != nil {
		return fmt.Errorf("tls13: ECHKeySet: %w", err)
	}
	s.cur.Store(l)
	return nil
}

// RetryConfigList is the ECHConfigList of the SendAsRetry keys: what a
// server sends on rejection and publishes in the HTTPS record's ech
// SvcParam; nil when no key has SendAsRetry.
func (s *ECHKeySet) RetryConfigList() []byte {
	if l := s.cur.Load(); l != nil {
		return l.retry
	}
	return nil
}

func loadECHKeys(keys []ECHKey) (*echLoaded, error) {
	l := &echLoaded{}
	var retry []*ech.Config
	for i, ek := range keys {
		key, err := ech.LoadKey(ek.Config, ek.PrivateKey)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i, err)
		}
		l.keys = append(l.keys, key)
		if ek.SendAsRetry {
			retry = append(retry, key.Config)
		}
	}
	if len(retry) > 0 {
		var err error
		if l.retry, err = ech.MarshalConfigList(retry); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// echKeyCache is a Config's ECHKeys, loaded once.
type echKeyCache struct {
	once sync.Once
	l    *echLoaded
	err  error
}

// echKeys returns the server's loaded ECH keys and retry list: the
// ECHKeySet's, else ECHKeys (loaded once per Config).
func (c *Config) echKeys() ([]*ech.Key, []byte, error) {
	if c.ECHKeySet != nil {
		if l := c.ECHKeySet.cur.Load(); l != nil {
			return l.keys, l.retry, nil
		}
		return nil, nil, nil
	}
	k := &c.ech
	k.once.Do(func() { k.l, k.err = loadECHKeys(c.ECHKeys) })
	if k.err != nil {
		return nil, nil, fmt.Errorf("tls13: Config.ECHKeys: %w", k.err)
	}
	return k.l.keys, k.l.retry, nil
}

// echClientConfig is the first config of Config.ECHConfigList this
// client can use.
func (c *Config) echClientConfig() (*ech.Config, error) {
	list, err := ech.ParseConfigList(c.ECHConfigList)
	if err != nil {
		return nil, fmt.Errorf("tls13: Config.ECHConfigList: %w", err)
	}
	var why []error
	for _, cfg := range list {
		if err := cfg.Usable(); err != nil {
			why = append(why, err)
			continue
		}
		return cfg, nil
	}
	if len(list) == 0 {
		why = append(why, errors.New("no config of version 0xfe0d"))
	}
	return nil, fmt.Errorf("tls13: Config.ECHConfigList has no ECH config this client can use (%w): get a current list (the HTTPS record's ech=) or connect without ECH only if the server name may go in clear", errors.Join(why...))
}

// checkECH is Config.Check's part for ECH: keys that do not load, a
// client config list with no usable config.
func (c *Config) checkECH() error {
	if len(c.ECHKeys) > 0 {
		if _, _, err := c.echKeys(); err != nil {
			return err
		}
	}
	if len(c.ECHConfigList) > 0 {
		if _, err := c.echClientConfig(); err != nil {
			return err
		}
	}
	return nil
}
