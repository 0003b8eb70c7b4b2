package authority

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math/bits"
	"net/netip"
	"sync"

	"github.com/miekg/dns"
)

// DNS cookies (RFC 7873) with the interoperable server cookie of RFC 9018:
//
//	client → server   COOKIE: client cookie (8 bytes)
//	server → client   COOKIE: client cookie | server cookie (16 bytes)
//	client → server   COOKIE: client cookie | server cookie   (valid: exempt
//	                  from rate limiting and from the UDP amplification cap)
//
// A server cookie proves the client received an earlier answer at its
// address, so its source address is not spoofed.

// RFC 7873, Section 4: client cookie 8 bytes, server cookie 8 to 32 bytes.
const (
	clientCookieLen    = 8
	minServerCookieLen = 8
	maxServerCookieLen = 32
)

// RFC 9018, Section 4.3: a server cookie is good for an hour, and up to
// five minutes ahead of the server's clock (clock skew in a fleet).
const (
	cookieLifetime = 3600
	cookieSkew     = 300
)

var errBadCookie = errors.New("authority: malformed COOKIE option (RFC 7873, Section 5.2.2): " +
	"it must be an 8-byte client cookie, optionally followed by an 8- to 32-byte server cookie")

// cookieOption is a parsed COOKIE option; server is empty when the client
// sent only its own cookie.
type cookieOption struct {
	client [clientCookieLen]byte
	server []byte
}

// parseCookie parses the data of a COOKIE option.
// RFC 7873, Section 4: Client Cookie (8 bytes) | Server Cookie (8 to 32
// bytes, optional). Any other length is malformed (Section 5.2.2: FORMERR).
func parseCookie(b []byte) (cookieOption, error) {
	var c cookieOption
	switch n := len(b); {
	case n == clientCookieLen:
	case n >= clientCookieLen+minServerCookieLen && n <= clientCookieLen+maxServerCookieLen:
		c.server = b[clientCookieLen:]
	default:
		return c, errBadCookie
	}
	copy(c.client[:], b)
	return c, nil
}

// findCookie returns the query's first COOKIE option (RFC 7873,
// Section 5.2: later ones are ignored), whether there is one, and an error
// when it is malformed.
func findCookie(opt *dns.OPT) (cookieOption, bool, error) {
	if opt == nil {
		return cookieOption{}, false, nil
	}
	for _, o := range opt.Option {
		c, ok := o.(*dns.EDNS0_COOKIE)
		if !ok {
			continue
		}
		raw, err := hex.DecodeString(c.Cookie)
		if err != nil {
			return cookieOption{}, true, errBadCookie
		}
		co, err := parseCookie(raw)
		return co, true, err
	}
	return cookieOption{}, false, nil
}

// A cookieSecret is the SipHash-2-4 key server cookies are made with.
type cookieSecret [16]byte

// serverCookie builds the RFC 9018, Section 4 server cookie for a client
// at ip at time now (seconds, modulo 2^32):
// Version (1) = 1 | Reserved (3) = 0 | Timestamp (4) | Hash (8), where
// Hash = SipHash-2-4(Client Cookie | Version | Reserved | Timestamp | Client-IP).
func (k *cookieSecret) serverCookie(client [clientCookieLen]byte, ip netip.Addr, now uint32) [16]byte {
	var sc [16]byte
	sc[0] = 1
	binary.BigEndian.PutUint32(sc[4:8], now)
	binary.BigEndian.PutUint64(sc[8:], k.hash(client, sc[:8], ip))
	return sc
}

// hash is the RFC 9018 Hash over the client cookie, the first eight bytes
// of the server cookie as presented (reserved bytes included) and the
// client's address (4 bytes for IPv4, 16 for IPv6).
func (k *cookieSecret) hash(client [clientCookieLen]byte, head []byte, ip netip.Addr) uint64 {
	var in [8 + 8 + 16]byte
	n := copy(in[:], client[:])
	n += copy(in[n:], head[:8])
	ip = ip.Unmap()
	if ip.Is4() {
		a := ip.As4()
		n += copy(in[n:], a[:])
	} else {
		a := ip.As16()
		n += copy(in[n:], a[:])
	}
	// RFC 9018 writes the hash as the SipHash output in its byte order:
	// little endian.
	return bits.ReverseBytes64(sipHash24(k, in[:n]))
}

// valid reports whether server is a cookie this secret made for client at
// ip that is neither older than an hour nor more than five minutes ahead
// of now (RFC 9018, Section 4.3, serial arithmetic on the timestamp).
func (k *cookieSecret) valid(client [clientCookieLen]byte, server []byte, ip netip.Addr, now uint32) bool {
	if len(server) != 16 || server[0] != 1 {
		return false
	}
	age := int32(now - binary.BigEndian.Uint32(server[4:8]))
	if age > cookieLifetime || age < -cookieSkew {
		return false
	}
	var want [8]byte
	binary.BigEndian.PutUint64(want[:], k.hash(client, server[:8], ip))
	return subtle.ConstantTimeCompare(want[:], server[8:]) == 1
}

// cookieKeys holds the current secret and the one before it, so cookies
// handed out just before a rotation stay valid (RFC 9018, Section 5).
type cookieKeys struct {
	mu        sync.RWMutex
	current   cookieSecret
	previous  cookieSecret
	rotations int
}

func (ck *cookieKeys) set(k cookieSecret) {
	ck.mu.Lock()
	ck.previous, ck.current = ck.current, k
	ck.rotations++
	ck.mu.Unlock()
}

// make returns a server cookie made with the current secret.
func (ck *cookieKeys) make(client [clientCookieLen]byte, ip netip.Addr, now uint32) [16]byte {
	ck.mu.RLock()
	k := ck.current
	ck.mu.RUnlock()
	return k.serverCookie(client, ip, now)
}

// check reports whether server was made by the current or previous secret.
func (ck *cookieKeys) check(client [clientCookieLen]byte, server []byte, ip netip.Addr, now uint32) bool {
	ck.mu.RLock()
	cur, prev, n := ck.current, ck.previous, ck.rotations
	ck.mu.RUnlock()
	return cur.valid(client, server, ip, now) || n > 1 && prev.valid(client, server, ip, now)
}

// RotateCookieSecret replaces the secret server cookies are made with by
// a new random one. Cookies made with the previous secret stay valid
// until the next rotation, so rotate at most every half hour to let
// clients renew (RFC 9018, Section 5). The first secret is random per
// process; a fleet behind one anycast address shares one with
// SetCookieSecret instead. Safe for concurrent use.
func (s *Server) RotateCookieSecret() error {
	var k cookieSecret
	if _, err := rand.Read(k[:]); err != nil {
		return errors.New("authority: no randomness for a cookie secret: " + err.Error())
	}
	s.SetCookieSecret(k)
	return nil
}

// SetCookieSecret makes secret the one server cookies are made with
// (the previous one is still accepted until the next change). Servers
// sharing an address share a secret so a cookie from one is valid at the
// others (RFC 9018). Call it after setting the Server's fields: like a
// Serve method, it starts the server. Safe for concurrent use.
func (s *Server) SetCookieSecret(secret [16]byte) {
	s.init()
	s.cookies.set(secret)
}

// sipHash24 is SipHash-2-4 (Aumasson and Bernstein, 2012) of msg under k;
// the result is the little-endian reading of the 8 output bytes.
func sipHash24(k *cookieSecret, msg []byte) uint64 {
	k0 := binary.LittleEndian.Uint64(k[:8])
	k1 := binary.LittleEndian.Uint64(k[8:])
	v0 := k0 ^ 0x736f6d6570736575
	v1 := k1 ^ 0x646f72616e646f6d
	v2 := k0 ^ 0x6c7967656e657261
	v3 := k1 ^ 0x7465646279746573
	round := func() {
		v0 += v1
		v1 = bits.RotateLeft64(v1, 13)
		v1 ^= v0
		v0 = bits.RotateLeft64(v0, 32)
		v2 += v3
		v3 = bits.RotateLeft64(v3, 16)
		v3 ^= v2
		v0 += v3
		v3 = bits.RotateLeft64(v3, 21)
		v3 ^= v0
		v2 += v1
		v1 = bits.RotateLeft64(v1, 17)
		v1 ^= v2
		v2 = bits.RotateLeft64(v2, 32)
	}
	n := len(msg)
	for len(msg) >= 8 {
		m := binary.LittleEndian.Uint64(msg)
		v3 ^= m
		round()
		round()
		v0 ^= m
		msg = msg[8:]
	}
	var last [8]byte
	copy(last[:], msg)
	last[7] = byte(n)
	m := binary.LittleEndian.Uint64(last[:])
	v3 ^= m
	round()
	round()
	v0 ^= m
	v2 ^= 0xff
	for range 4 {
		round()
	}
	return v0 ^ v1 ^ v2 ^ v3
}
