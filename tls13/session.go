package tls13

import (
	"crypto/aes"
	"crypto/cipher"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// ClientSession is what a client keeps from a NewSessionTicket to resume
// later (RFC 8446, Section 4.6.1). It holds a secret: store it like a key.
type ClientSession struct {
	Suite        CipherSuite
	PSK          []byte
	Ticket       []byte
	AgeAdd       uint32
	ReceivedAt   time.Time
	Lifetime     time.Duration
	ServerName   string
	ALPN         string // protocol negotiated when the ticket was issued
	MaxEarlyData uint32 // 0: the server takes no 0-RTT data on this ticket
}

// cipherSuite is the session's suite, or nil for one this package does
// not implement.
func (s *ClientSession) cipherSuite() *suite.Suite { return suite.Lookup(uint16(s.Suite)) }

func (s *ClientSession) usable(cfg *Config, serverName string) bool {
	if s == nil || s.cipherSuite() == nil || s.ServerName != serverName {
		return false
	}
	if !contains(cfg.cipherSuites(), uint16(s.Suite)) {
		return false
	}
	now := cfg.now()
	return now.Before(s.ReceivedAt.Add(s.Lifetime)) && !now.Before(s.ReceivedAt.Add(-time.Minute))
}

// earlyALPNMatches: 0-RTT is only sent when the first ALPN protocol offered
// is the one the session negotiated (RFC 8446, Section 4.2.10).
func (s *ClientSession) earlyALPNMatches(protos []string) bool {
	if s.ALPN == "" {
		return len(protos) == 0
	}
	return len(protos) > 0 && protos[0] == s.ALPN
}

const sessionFormat = 1

// MarshalBinary encodes the session for storage (ztls connect --sess-out).
func (s *ClientSession) MarshalBinary() ([]byte, error) {
	var b wire.Builder
	b.AddUint8(sessionFormat)
	b.AddUint16(uint16(s.Suite))
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes(s.PSK) })
	b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(s.Ticket) })
	b.AddUint32(s.AgeAdd)
	b.AddUint64(uint64(s.ReceivedAt.UnixMilli()))
	b.AddUint32(uint32(s.Lifetime / time.Second))
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes([]byte(s.ServerName)) })
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes([]byte(s.ALPN)) })
	b.AddUint32(s.MaxEarlyData)
	return b.Bytes()
}

// UnmarshalBinary decodes what MarshalBinary produced.
func (s *ClientSession) UnmarshalBinary(data []byte) error {
	in := cryptobyte.String(data)
	var version uint8
	var cs uint16
	var psk, ticket, name, alpn cryptobyte.String
	var received uint64
	var lifetime uint32
	if !in.ReadUint8(&version) || version != sessionFormat ||
		!in.ReadUint16(&cs) ||
		!in.ReadUint8LengthPrefixed(&psk) ||
		!in.ReadUint16LengthPrefixed(&ticket) ||
		!in.ReadUint32(&s.AgeAdd) ||
		!in.ReadUint64(&received) ||
		!in.ReadUint32(&lifetime) ||
		!in.ReadUint8LengthPrefixed(&name) ||
		!in.ReadUint8LengthPrefixed(&alpn) ||
		!in.ReadUint32(&s.MaxEarlyData) || !in.Empty() {
		return errors.New("tls13: malformed session file (made by another version? delete it and connect again)")
	}
	s.Suite = CipherSuite(cs)
	if s.cipherSuite() == nil || len(psk) != s.cipherSuite().Hash.Size() {
		return errors.New("tls13: session file names an unknown cipher suite")
	}
	s.PSK, s.Ticket = []byte(psk), []byte(ticket)
	s.ReceivedAt = time.UnixMilli(int64(received))
	s.Lifetime = time.Duration(lifetime) * time.Second
	s.ServerName, s.ALPN = string(name), string(alpn)
	return nil
}

// ClientSessionCache stores sessions by server name. Implementations must
// be safe for concurrent use.
type ClientSessionCache interface {
	Get(key string) *ClientSession
	Put(key string, s *ClientSession)
}

// NewLRUClientSessionCache returns an in-memory cache of at most n sessions.
func NewLRUClientSessionCache(n int) ClientSessionCache {
	if n <= 0 {
		n = 64
	}
	return &lruCache{max: n, m: map[string]*ClientSession{}}
}

type lruCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]*ClientSession
	order []string
}

func (c *lruCache) Get(key string) *ClientSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *lruCache) Put(key string, s *ClientSession) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok {
		c.order = append(c.order, key)
		if len(c.order) > c.max {
			delete(c.m, c.order[0])
			c.order = c.order[1:]
		}
	}
	c.m[key] = s
}

func sessionCacheKey(cfg *Config) string { return cfg.ServerName }

// sessionTicket is the server's state inside a ticket, encrypted under the
// ticket key so the server keeps nothing per client.
type sessionTicket struct {
	Suite uint16
	// CreatedNS is when the ticket was issued, in Unix nanoseconds: exact,
	// so that a ticket issued just after a strike register began is not
	// taken for one that may predate it (a rounded time would be).
	CreatedNS    int64
	AgeAdd       uint32
	LifetimeS    uint32
	MaxEarlyData uint32
	PSK          []byte
	ALPN         string
	SNI          string
	// ClientCerts is the client's certificate chain (DER, leaf first) as
	// the full handshake received it, so a resumption re-checks it (expiry,
	// revocation, the application's hook) and restores PeerCertificates.
	ClientCerts [][]byte
}

const ticketNonceLen = 12

// ticketAEAD is the AEAD that seals new tickets: Config.TicketKeys' current
// key, or the Config's one key.
func (e *engine) ticketAEAD() (cipher.AEAD, error) {
	if tk := e.cfg.TicketKeys; tk != nil {
		return tk.sealing(e.cfg.now(), e.cfg.ticketLifetime(), e.cfg.rand())
	}
	key, err := e.cfg.sessionTicketKey()
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func (e *engine) wrapTicket(t *sessionTicket) ([]byte, error) {
	plain, err := marshalTicket(t)
	if err != nil {
		return nil, err
	}
	return e.sealTicket(plain)
}

// marshalTicket is wrapTicket's plaintext.
func marshalTicket(t *sessionTicket) ([]byte, error) {
	var b wire.Builder
	b.AddUint16(t.Suite)
	b.AddUint64(uint64(t.CreatedNS))
	b.AddUint32(t.AgeAdd)
	b.AddUint32(t.LifetimeS)
	b.AddUint32(t.MaxEarlyData)
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes(t.PSK) })
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes([]byte(t.ALPN)) })
	b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes([]byte(t.SNI)) })
	b.AddUint24LengthPrefixed(func(b *wire.Builder) {
		for _, der := range t.ClientCerts {
			b.AddUint24LengthPrefixed(func(b *wire.Builder) { b.AddBytes(der) })
		}
	})
	return b.Bytes()
}

// sealTicket encrypts a ticket's plaintext under the ticket key.
func (e *engine) sealTicket(plain []byte) ([]byte, error) {
	aead, err := e.ticketAEAD()
	if err != nil {
		return nil, err
	}
	out := make([]byte, ticketNonceLen, ticketNonceLen+len(plain)+aead.Overhead())
	if _, err := io.ReadFull(e.cfg.rand(), out); err != nil {
		return nil, err
	}
	return aead.Seal(out, out, plain, nil), nil
}

func (e *engine) unwrapTicket(ticket []byte) (*sessionTicket, error) {
	if e.cfg.testHookTicket != nil {
		if t := e.cfg.testHookTicket(ticket); t != nil {
			return t, nil
		}
		return nil, errors.New("tls13: unknown ticket")
	}
	if tk := e.cfg.TicketKeys; tk != nil {
		plain, err := tk.open(e.cfg.now(), e.cfg.ticketLifetime(), ticket)
		if err != nil {
			return nil, err
		}
		return parseTicket(plain)
	}
	aead, err := e.ticketAEAD()
	if err != nil {
		return nil, err
	}
	if len(ticket) < ticketNonceLen+aead.Overhead() {
		return nil, errors.New("tls13: ticket too short")
	}
	plain, err := aead.Open(nil, ticket[:ticketNonceLen], ticket[ticketNonceLen:], nil)
	if err != nil {
		return nil, fmt.Errorf("tls13: ticket not ours: %w", err)
	}
	return parseTicket(plain)
}

// parseTicket decodes a ticket's plaintext (what wrapTicket sealed).
func parseTicket(plain []byte) (*sessionTicket, error) {
	in := cryptobyte.String(plain)
	t := &sessionTicket{}
	var created uint64
	var psk, alpn, sni, certs cryptobyte.String
	if !in.ReadUint16(&t.Suite) || !in.ReadUint64(&created) || !in.ReadUint32(&t.AgeAdd) ||
		!in.ReadUint32(&t.LifetimeS) || !in.ReadUint32(&t.MaxEarlyData) ||
		!in.ReadUint8LengthPrefixed(&psk) || !in.ReadUint8LengthPrefixed(&alpn) ||
		!in.ReadUint8LengthPrefixed(&sni) || !in.ReadUint24LengthPrefixed(&certs) || !in.Empty() {
		return nil, errors.New("tls13: malformed ticket")
	}
	for !certs.Empty() {
		var der cryptobyte.String
		if !certs.ReadUint24LengthPrefixed(&der) || len(der) == 0 {
			return nil, errors.New("tls13: malformed ticket")
		}
		t.ClientCerts = append(t.ClientCerts, []byte(der))
	}
	t.CreatedNS = int64(created)
	t.PSK, t.ALPN, t.SNI = []byte(psk), string(alpn), string(sni)
	return t, nil
}

// StrikeRegister remembers 0-RTT and ZTLS ClientHellos so each is
// accepted at most once (RFC 8446, Section 8.2). A fleet of servers
// sharing tickets or Z-data keys must share one register.
//
// Implementations must be safe for concurrent use and fail closed: an
// error means the early data is rejected. A register vouches only for
// what it saw: a process that restarts, or a store that loses its data,
// knows nothing of the ClientHellos accepted before, and one of those may
// be replayed while it is still fresh. So each key comes with the span of
// server time in which any server could accept its ClientHello, and a
// register whose memory began after that span opened must refuse it.
type StrikeRegister interface {
	// CheckAndInsert atomically records key and reports whether it was
	// absent. The ClientHello it names is acceptable, by the server's
	// clock (Config.Time), from notBefore until expires: the register
	// keeps key at least until expires, and refuses it (fresh=false with
	// an error) when its memory began after notBefore.
	CheckAndInsert(key []byte, now, notBefore, expires time.Time) (fresh bool, err error)
}

// NewStartupGuard wraps reg, whose memory begins at since, so that it
// refuses (fresh=false, with an error) every ClientHello that may have
// been accepted before since: one whose notBefore is earlier. Wrap a
// register of your own that forgets on restart with the time the process
// started; NewMemoryStrikeRegister carries this guard already.
func NewStartupGuard(reg StrikeRegister, since time.Time) StrikeRegister {
	return &startupGuard{reg: reg, since: since}
}

type startupGuard struct {
	reg   StrikeRegister
	since time.Time
}

// ErrRegisterTooYoung is the error of a register asked about a ClientHello
// that may have been accepted before its memory began (a server within
// two freshness windows of its start, or of the loss of its register's
// data): the early data is rejected, the handshake goes on.
var ErrRegisterTooYoung = errors.New("tls13: the strike register started after this ClientHello could first be accepted (a restart or lost data); early data refused")

func (g *startupGuard) CheckAndInsert(key []byte, now, notBefore, expires time.Time) (bool, error) {
	if notBefore.Before(g.since) {
		return false, ErrRegisterTooYoung
	}
	return g.reg.CheckAndInsert(key, now, notBefore, expires)
}

// MemoryStrikeRegister is an in-process StrikeRegister holding at most a
// fixed number of entries; when full it refuses (fresh=false) until
// entries expire, so a flood cannot make it forget. Its memory begins at
// a time it is given (Since): it refuses ClientHellos that may have been
// accepted before then. WriteTo and ReadMemoryStrikeRegister carry its
// memory across a clean restart (see zdata.Dir.ServeAlone). Safe for
// concurrent use.
type MemoryStrikeRegister struct {
	mu    sync.Mutex
	max   int
	since time.Time
	m     map[string]time.Time
}

// NewMemoryStrikeRegister returns a register of at most max entries whose
// memory begins at since. Pass the time the process started, by the
// clock of Config.Time; the zero time claims it has seen every
// ClientHello ever accepted under the server's keys, which holds only for
// keys no server used before it (a test's fresh keys, a Z-data directory
// never served).
func NewMemoryStrikeRegister(max int, since time.Time) *MemoryStrikeRegister {
	return &MemoryStrikeRegister{max: max, since: since, m: map[string]time.Time{}}
}

// Since is when the register's memory begins.
func (r *MemoryStrikeRegister) Since() time.Time { return r.since }

// CheckAndInsert implements StrikeRegister.
func (r *MemoryStrikeRegister) CheckAndInsert(key []byte, now, notBefore, expires time.Time) (bool, error) {
	if notBefore.Before(r.since) {
		return false, ErrRegisterTooYoung
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if exp, ok := r.m[string(key)]; ok && now.Before(exp) {
		return false, nil
	}
	if len(r.m) >= r.max {
		r.pruneLocked(now)
		if len(r.m) >= r.max {
			return false, errors.New("tls13: strike register full")
		}
	}
	r.m[string(key)] = expires
	return true, nil
}

func (r *MemoryStrikeRegister) pruneLocked(now time.Time) {
	for k, exp := range r.m {
		if !now.Before(exp) {
			delete(r.m, k)
		}
	}
}

// strikeFileMagic starts a saved register: format version 1.
const strikeFileMagic = "ztls strike register 1\n"

// WriteTo saves the register's memory: its start and the entries still
// live at now. Only a register saved when nothing can be inserted any
// more (the server stopped taking connections) may be loaded as a
// continuation of it: what it accepted after a save is not in the file.
func (r *MemoryStrikeRegister) WriteTo(w io.Writer, now time.Time) (int64, error) {
	r.mu.Lock()
	r.pruneLocked(now)
	var b wire.Builder
	b.AddBytes([]byte(strikeFileMagic))
	// Milliseconds, rounded so the loaded register claims no more memory
	// and forgets nothing sooner than this one.
	b.AddUint64(uint64(ceilMilli(r.since)))
	b.AddUint32(uint32(len(r.m)))
	for k, exp := range r.m {
		b.AddUint8LengthPrefixed(func(b *wire.Builder) { b.AddBytes([]byte(k)) })
		b.AddUint64(uint64(ceilMilli(exp)))
	}
	r.mu.Unlock()
	out, err := b.Bytes()
	if err != nil {
		return 0, err
	}
	n, err := w.Write(out)
	return int64(n), err
}

func ceilMilli(t time.Time) int64 {
	if t.IsZero() || t.Before(time.Unix(0, 0)) {
		return 0
	}
	return (t.UnixNano() + int64(time.Millisecond) - 1) / int64(time.Millisecond)
}

// ReadMemoryStrikeRegister loads what WriteTo saved, as a register of at
// most max entries with the saved start. Entries beyond max, or expired
// at now, are dropped; a malformed file is an error (start afresh then).
func ReadMemoryStrikeRegister(data []byte, max int, now time.Time) (*MemoryStrikeRegister, error) {
	in := cryptobyte.String(data)
	var magic []byte
	var since uint64
	var n uint32
	if !in.ReadBytes(&magic, len(strikeFileMagic)) || string(magic) != strikeFileMagic ||
		!in.ReadUint64(&since) || !in.ReadUint32(&n) || int64(since) < 0 {
		return nil, errors.New("tls13: not a saved strike register")
	}
	start := time.Time{} // saved as 0: it saw everything (never served)
	if since > 0 {
		start = time.UnixMilli(int64(since))
	}
	r := NewMemoryStrikeRegister(max, start)
	for range n {
		var key cryptobyte.String
		var exp uint64
		if !in.ReadUint8LengthPrefixed(&key) || !in.ReadUint64(&exp) || int64(exp) < 0 {
			return nil, errors.New("tls13: saved strike register truncated")
		}
		if e := time.UnixMilli(int64(exp)); now.Before(e) && len(r.m) < max {
			r.m[string(key)] = e
		}
	}
	if !in.Empty() {
		return nil, errors.New("tls13: trailing bytes after a saved strike register")
	}
	return r, nil
}
