package tls13

import (
	"crypto"
	"crypto/rand"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// Certificate is a certificate chain with its private key.
type Certificate struct {
	// Chain holds DER certificates, leaf first.
	Chain [][]byte
	// PrivateKey signs CertificateVerify. It must match the leaf's public key.
	PrivateKey crypto.Signer
	// Leaf is the parsed Chain[0]; LoadX509KeyPair fills it, and the
	// engine parses Chain[0] when it is nil.
	Leaf *x509.Certificate

	public crypto.PublicKey // the leaf's key as package sig understands it (PSS keys)
}

// LoadX509KeyPair reads a PEM certificate chain and its PEM private key
// (PKCS#8, PKCS#1, SEC 1 and RSASSA-PSS keys).
func LoadX509KeyPair(certFile, keyFile string) (Certificate, error) {
	c, err := sig.LoadKeyPair(certFile, keyFile)
	if err != nil {
		return Certificate{}, err
	}
	return Certificate{Chain: c.Chain, PrivateKey: c.Key, Leaf: c.Leaf, public: c.Public}, nil
}

// X509KeyPair is LoadX509KeyPair on PEM bytes.
func X509KeyPair(certPEM, keyPEM []byte) (Certificate, error) {
	c, err := sig.ParseKeyPair(certPEM, keyPEM)
	if err != nil {
		return Certificate{}, err
	}
	return Certificate{Chain: c.Chain, PrivateKey: c.Key, Leaf: c.Leaf, public: c.Public}, nil
}

// LoadCertPool reads a PEM file of trusted CA certificates (for
// Config.RootCAs or Config.ClientCAs).
func LoadCertPool(file string) (*x509.CertPool, error) { return sig.LoadCertPool(file) }

// parsedCert is a Certificate's leaf and public key, parsed once per Config.
type parsedCert struct {
	leaf *x509.Certificate
	pub  crypto.PublicKey
	err  error
}

func parseCert(c *Certificate) parsedCert {
	leaf := c.Leaf
	if leaf == nil {
		l, err := x509.ParseCertificate(c.Chain[0])
		if err != nil {
			return parsedCert{err: err}
		}
		leaf = l
	}
	pub := c.public
	if pub == nil {
		p, err := sig.ParsePublicKey(leaf)
		if err != nil {
			return parsedCert{err: err}
		}
		pub = p
	}
	return parsedCert{leaf: leaf, pub: pub}
}

// certLeaf returns Certificates[i]'s parsed leaf and key. Parsing happens
// once per Config and never writes to the shared Certificate, so many
// handshakes may use one Config at once.
func (c *Config) certLeaf(i int) (*x509.Certificate, crypto.PublicKey, error) {
	c.lazy()
	p := c.parsed[i]
	return p.leaf, p.pub, p.err
}

// ClientAuthType says whether a server asks for client certificates.
type ClientAuthType int

const (
	// NoClientCert: no CertificateRequest is sent.
	NoClientCert ClientAuthType = iota
	// RequestClientCert asks for a certificate but accepts none and does not verify it.
	RequestClientCert
	// RequireAnyClientCert demands a certificate but does not verify its chain.
	RequireAnyClientCert
	// VerifyClientCertIfGiven verifies a certificate if the client sends one.
	VerifyClientCertIfGiven
	// RequireAndVerifyClientCert demands a certificate that verifies against ClientCAs.
	RequireAndVerifyClientCert
)

// A Config configures a client or a server. It may be shared by many
// connections once passed to the engine and must not be changed after that.
// The zero value is a usable client configuration with system roots.
type Config struct {
	// Rand supplies all randomness: hello randoms, key shares, signature
	// salts, tickets, and the server's ticket and cookie keys (drawn once
	// per Config, when first needed). nil means crypto/rand. Tests pass a
	// fixed reader. It must be safe for concurrent use.
	Rand io.Reader
	// Time returns the current time; nil means the ztls clock (internal/clock: the system clock, unless ZTLS_CLOCK_OFFSET shifts it). Tickets, 0-RTT
	// freshness and certificate validity use it.
	Time func() time.Time

	// Certificates are the server's chains (chosen by SNI and signature
	// scheme), or the client's chain for client authentication (the first
	// one whose key suits the server's request).
	Certificates []Certificate

	// RootCAs verifies server certificates; nil means the system roots.
	RootCAs *x509.CertPool
	// ServerName is the name the client sends as SNI and checks the
	// certificate against. Dial fills it from the address when empty.
	ServerName string
	// InsecureSkipVerify disables the client's chain and name check. It is
	// for tests only: anyone in the path can then read the connection.
	InsecureSkipVerify bool
	// VerifyPeerCertificate, if set, runs after the normal checks (or
	// instead of them with InsecureSkipVerify).
	VerifyPeerCertificate func(rawCerts [][]byte, verifiedChains [][]*x509.Certificate) error
	// VerifiedChains, if set, is asked first whenever the client would
	// verify a server's chain (leaf first: a Certificate message, or a
	// Z-data leaf with its intermediates): chains it returns were verified
	// earlier under this Config's RootCAs, ServerName and Revocation, and
	// are taken as they are (VerifyPeerCertificate still runs); nil or no
	// chains means verify now. Package dial sets it from its cache of
	// prevalidated services (VerifyServerChain).
	VerifiedChains func(certs []*x509.Certificate) [][]*x509.Certificate
	// ChainCache, if set, keeps the server chains this client verifies
	// and takes them when the same chain comes again under the same
	// RootCAs and ServerName, within every certificate's validity:
	// path building and the certificate signatures are skipped,
	// Revocation and VerifyPeerCertificate still run (see ChainCache).
	ChainCache *ChainCache

	// ClientAuth is the server's client-certificate policy; ClientCAs its roots.
	ClientAuth ClientAuthType
	ClientCAs  *x509.CertPool

	// CipherSuites in preference order; nil means the defaults (AES-GCM
	// first where the CPU has AES instructions).
	CipherSuites []CipherSuite
	// Groups in preference order; nil means X25519MLKEM768, X25519, P-256,
	// P-384, P-521.
	Groups []CurveID
	// KeySharePool, when set and Rand is nil, supplies the keys of x25519
	// and X25519MLKEM768 key shares made ahead of need (see KeySharePool).
	// With Rand set it is not used, so tests with fixed randomness read
	// every key from Rand as before.
	KeySharePool *KeySharePool
	// KeyShareGroups: the groups the client sends key shares for in its
	// first ClientHello; nil means the first of Groups plus X25519 if it is
	// a hybrid group. A server whose preferred group has no share asks for
	// it with a HelloRetryRequest.
	KeyShareGroups []CurveID
	// SignatureSchemes for CertificateVerify, preference order; nil means all supported.
	SignatureSchemes []SignatureScheme

	// NextProtos is the ALPN list (RFC 7301), preference order.
	NextProtos []string

	// CertificateCompression lists certificate compression algorithms
	// (RFC 8879) in preference order. A client offers them for the
	// server's Certificate, a server for the client's (in its
	// CertificateRequest); a side sends its own Certificate compressed
	// with the first of its list that the peer offered, unless that is no
	// smaller. nil means no compression either way. See certcompress.go.
	CertificateCompression []CertCompressionAlgorithm

	// RecordSizeLimit is advertised with RFC 8449; 0 means 16385 (the TLS 1.3
	// maximum). The peer's limit caps the records we send.
	RecordSizeLimit int
	// PadTo pads every protected record's plaintext to a multiple of PadTo
	// bytes (RFC 8446, Section 5.4); 0 disables padding.
	PadTo int

	// SessionTicketsDisabled stops the server issuing tickets and the client
	// offering them.
	SessionTicketsDisabled bool
	// ClientSessionCache stores the client's tickets by server name; nil
	// disables resumption on the client unless a session is set with
	// Conn.SetSession.
	ClientSessionCache ClientSessionCache
	// TicketKey encrypts the server's tickets (32 bytes); zero means a
	// random key made from Rand once per Config, for its first ticket.
	TicketKey [32]byte
	// TicketKeys, if set, seals and opens the server's tickets with keys
	// it rotates (see TicketKeys) instead of TicketKey.
	TicketKeys *TicketKeys
	// TicketLifetime is the server's ticket lifetime; 0 means 24 hours.
	TicketLifetime time.Duration
	// PSKModes the client offers or the server accepts, in preference
	// order (a server takes the first of its modes the client offers
	// too); nil means psk_dhe_ke only. Add PSKModeKE to allow resumption
	// without a fresh key exchange (no forward secrecy for that
	// connection beyond the ticket key's life).
	PSKModes []PSKMode

	// MaxEarlyData is the server's 0-RTT limit in bytes announced in its
	// tickets; 0 means the server never accepts early data.
	MaxEarlyData uint32
	// EarlyDataWindow is the server's freshness window for 0-RTT (RFC 8446,
	// Section 8.3); 0 means 10 s.
	EarlyDataWindow time.Duration
	// StrikeRegister records 0-RTT and ZTLS ClientHellos so a replay is
	// refused (RFC 8446, Section 8.2); nil means one in-memory register per
	// Config whose memory begins at the Config's first handshake, so a
	// restarted server refuses early data that may predate it. Servers
	// sharing tickets or Z-data keys (a fleet) must share one register.
	StrikeRegister StrikeRegister

	// ZData holds the server's Z-data keys (ZTLS); nil means ztls offers
	// are not answered and clients fall back to TLS 1.3.
	ZData ZDataKeys
	// Revocation, if set, checks every verified peer chain (both roles)
	// against CRLs: a revoked certificate fails the handshake with
	// certificate_revoked, a stale or unverifiable CRL with
	// bad_certificate. The ZTLS client (package dial) checks the Z-data
	// leaf against it too.
	Revocation *revocation.Checker

	// ZTLSExtension is the codepoint of the ztls extension (docs/ztls-spec.md,
	// Section 2); 0 means ExtensionZTLS, 0xFF5A, a private-use value. Clients and servers
	// must agree: to the other side the extension at any other codepoint
	// is an unknown one (a server ignores it and rejects the early data;
	// a client aborts on it). A codepoint this package gives another
	// extension (ztls_bfe's 0xFF5B among them) is an error: Check reports
	// it, and every handshake fails on it.
	ZTLSExtension ExtensionType

	// ECHConfigList (client) is an ECHConfigList (RFC 9849, Section 4),
	// as the HTTPS record's ech SvcParam carries it: when set, the
	// ClientHello is encrypted to its first usable config, and a handshake
	// fails if none is usable. ECHGrease (client) sends a GREASE
	// encrypted_client_hello when ECHConfigList is empty (RFC 9849,
	// Section 6.2). ECHKeys (server) are the keys ECH ClientHellos are
	// decrypted with (several, for rotation); ECHKeySet, when set, is
	// used instead, for keys that change while the server runs.
	// ECHBackend (server) makes this server the backend of a split-mode
	// deployment (RFC 9849, Section 3.1): it takes the ClientHelloInner a
	// client-facing server decrypted and forwarded (OpenECHClientHello)
	// and confirms ECH in its ServerHello. See ech_config.go and
	// ech_split.go.
	ECHConfigList []byte
	ECHGrease     bool
	ECHKeys       []ECHKey
	ECHKeySet     *ECHKeySet
	ECHBackend    bool

	// MiddleboxCompat turns on the middlebox compatibility mode of RFC
	// 8446, Appendix D.4 (a legacy session ID and dummy ChangeCipherSpec
	// records) on the client. The server always mirrors the client.
	MiddleboxCompat bool

	// KeyLogWriter receives the NSS key log format (SSLKEYLOGFILE). It
	// exposes every secret of the connection: debugging only.
	KeyLogWriter io.Writer

	// MaxHandshakeMessage bounds one handshake message; 0 means 128 KiB.
	MaxHandshakeMessage int

	// testHookClientHello lets known-answer tests shape the ClientHello.
	testHookClientHello         func(*wire.ClientHello)
	testHookServerHello         func(*wire.ServerHello)
	testHookEncryptedExtensions func(*wire.EncryptedExtensions)
	testHookTicket              func([]byte) *sessionTicket
	testHookFinished            func(verifyData []byte) // attack tests: corrupt our Finished

	parsed     []parsedCert // by index into Certificates, made by lazy
	once       sync.Once
	defaultReg StrikeRegister
	ticketKey  lazyKey // when TicketKey is zero
	cookieKey  lazyKey // MACs HelloRetryRequest cookies
	ech        echKeyCache
}

func (c *Config) rand() io.Reader {
	if c.Rand != nil {
		return c.Rand
	}
	return rand.Reader
}

// newClientShare makes a client key share for group from Rand or the
// key-share pool.
func (c *Config) newClientShare(group uint16) (kex.ClientShare, error) {
	if pool := c.keySharePool(); pool != nil {
		return pool.ClientShare(group)
	}
	return kex.GenerateClientShare(group, c.rand())
}

// serverShare answers a client's key share for group with a fresh key
// from Rand or the key-share pool.
func (c *Config) serverShare(group uint16, clientShare []byte) (pub, shared []byte, err error) {
	if pool := c.keySharePool(); pool != nil {
		return pool.ServerShare(group, clientShare)
	}
	return kex.ServerShare(group, clientShare, c.rand())
}

// keySharePool is KeySharePool's pool when it is to be used: only with
// crypto/rand, as the pool's keys are made with it.
func (c *Config) keySharePool() *kex.Pool {
	if c.Rand != nil || c.KeySharePool == nil || c.KeySharePool.p == nil {
		return nil
	}
	return c.KeySharePool.p
}

func (c *Config) now() time.Time {
	if c.Time != nil {
		return c.Time()
	}
	return clock.Now()
}

// lazy parses the certificates and makes the default replay register,
// once per Config.
func (c *Config) lazy() {
	c.once.Do(func() {
		c.parsed = make([]parsedCert, len(c.Certificates))
		for i := range c.Certificates {
			if len(c.Certificates[i].Chain) == 0 {
				c.parsed[i] = parsedCert{err: errors.New("tls13: certificate with an empty chain")}
				continue
			}
			c.parsed[i] = parseCert(&c.Certificates[i])
		}
		if c.StrikeRegister == nil {
			// The default register's memory begins now: early data that
			// may have been accepted before (by this server before a
			// restart) is refused until it can no longer be fresh.
			// Exact, not rounded down: a ClientHello whose earliest
			// acceptance (a Z-data record's not-before, a whole second)
			// falls in the register's first millisecond but before it
			// began may have been accepted by the server it replaces.
			// Tickets carry their creation to the nanosecond, so one
			// issued after the register began is never taken for older.
			c.defaultReg = NewMemoryStrikeRegister(100000, c.now())
		}
	})
}

// Check reports what in c no handshake could use, with the error the
// handshake would fail with, so that a program refuses its configuration
// when it reads it rather than failing every connection: a ZTLSExtension
// equal to the codepoint of another extension this package sends or
// parses (ztls_bfe's 0xFF5B, key_share's, ...), ECHKeys that do not load,
// an ECHConfigList without a usable config. Listen calls it.
func (c *Config) Check() error {
	if _, err := c.ztlsCodepoint(); err != nil {
		return err
	}
	return c.checkECH()
}

// ztlsCodepoint returns the ztls extension's codepoint, checked: it must
// be one no other extension of this package's has, or the two could not
// be told apart on the wire.
func (c *Config) ztlsCodepoint() (uint16, error) {
	cp := uint16(c.ZTLSExtension)
	if cp == 0 || cp == wire.ExtZTLS {
		return wire.ExtZTLS, nil
	}
	if wire.KnownExtension(cp) {
		return 0, fmt.Errorf("tls13: Config.ZTLSExtension %#04x is the codepoint of the %s extension, which this package also sends or parses: the ztls extension needs a codepoint of its own (0 for the default, %#04x)",
			cp, wire.ExtensionName(cp), wire.ExtZTLS)
	}
	return cp, nil
}

// lazyKey is a per-Config key drawn from Config.Rand when a handshake
// first needs it: a test with a fixed Rand gets fixed keys, and nothing
// is drawn from Rand before then (known-answer tests feed Rand exactly
// the bytes each handshake reads). A failed draw is retried next time.
type lazyKey struct {
	mu  sync.Mutex
	key atomic.Pointer[[32]byte]
}

func (k *lazyKey) get(rand io.Reader) ([]byte, error) {
	if p := k.key.Load(); p != nil {
		return p[:], nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.key.Load(); p != nil {
		return p[:], nil
	}
	key := new([32]byte)
	if _, err := io.ReadFull(rand, key[:]); err != nil {
		return nil, fmt.Errorf("tls13: making a key from Config.Rand: %w", err)
	}
	k.key.Store(key)
	return key[:], nil
}

// sessionTicketKey is the key of the server's tickets: TicketKey, or one
// made from Rand once per Config.
func (c *Config) sessionTicketKey() ([]byte, error) {
	if c.TicketKey != ([32]byte{}) {
		return c.TicketKey[:], nil
	}
	return c.ticketKey.get(c.rand())
}

// helloRetryCookieKey MACs the cookies of our HelloRetryRequests; it is
// made from Rand once per Config.
func (c *Config) helloRetryCookieKey() ([]byte, error) { return c.cookieKey.get(c.rand()) }

func (c *Config) strikeRegister() StrikeRegister {
	c.lazy()
	if c.StrikeRegister != nil {
		return c.StrikeRegister
	}
	return c.defaultReg
}

// cipherSuites, groups, keyShareGroups and signatureSchemes return the
// Config's lists, or the defaults, as the uint16 codepoints of the wire.
func (c *Config) cipherSuites() []uint16 {
	if len(c.CipherSuites) > 0 {
		return codepoints(c.CipherSuites)
	}
	var ids []uint16
	for _, s := range suite.All() {
		ids = append(ids, s.ID)
	}
	return ids
}

func (c *Config) groups() []uint16 {
	if len(c.Groups) > 0 {
		return codepoints(c.Groups)
	}
	return kex.DefaultGroups()
}

func (c *Config) keyShareGroups() []uint16 {
	if len(c.KeyShareGroups) > 0 {
		return codepoints(c.KeyShareGroups)
	}
	g := c.groups()
	if g[0] == kex.X25519MLKEM768 && len(g) > 1 && contains(g, kex.X25519) {
		return []uint16{kex.X25519MLKEM768, kex.X25519}
	}
	return g[:1]
}

func (c *Config) signatureSchemes() []uint16 {
	if len(c.SignatureSchemes) > 0 {
		return codepoints(c.SignatureSchemes)
	}
	return sig.SupportedForCertificateVerify()
}

func (c *Config) pskModes() []PSKMode {
	if len(c.PSKModes) > 0 {
		return c.PSKModes
	}
	return []PSKMode{PSKModeDHEKE}
}

func (c *Config) recordSizeLimit() int {
	if c.RecordSizeLimit >= 64 && c.RecordSizeLimit <= 16385 {
		return c.RecordSizeLimit
	}
	return 16385
}

func (c *Config) earlyDataWindow() time.Duration {
	if c.EarlyDataWindow > 0 {
		return c.EarlyDataWindow
	}
	return 10 * time.Second
}

// requiresClientCert: a server that demands or verifies client
// certificates never acts on early data, which arrives before any
// certificate (docs/ztls-spec.md, Section 1 field 10, RFC 8446 Section 4.2.10): it
// rejects 0-RTT and ZTLS early data, and the client resends its request
// after the handshake, authenticated.
func (c *Config) requiresClientCert() bool {
	return c.ClientAuth >= RequireAnyClientCert
}

// pskKEOnly reports whether the client offers resumption without a key
// exchange and nothing else (PSKModes is psk_ke alone).
func (c *Config) pskKEOnly() bool {
	return !c.SessionTicketsDisabled && contains(c.PSKModes, PSKModeKE) && !contains(c.PSKModes, PSKModeDHEKE)
}

func (c *Config) ticketLifetime() time.Duration {
	if c.TicketLifetime > 0 && c.TicketLifetime <= 7*24*time.Hour {
		return c.TicketLifetime
	}
	return 24 * time.Hour
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
