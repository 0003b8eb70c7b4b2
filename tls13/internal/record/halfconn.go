package record

import (
	"crypto/cipher"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/suite"
)

// HalfConn protects or deprotects the records of one direction under one
// traffic secret (RFC 8446, Section 5.2 and 5.3). A new traffic secret
// (handshake, application, KeyUpdate) takes a new HalfConn, whose sequence
// number starts at zero. A HalfConn must not be copied after first use and
// is not safe for concurrent use.
type HalfConn struct {
	suite *suite.Suite
	keys  func() *halfKeys // a closure, so reflective printing finds no key
	seq   uint64
}

type halfKeys struct {
	secret []byte // in secretBuf
	aead   cipher.AEAD
	iv     [12]byte
	nonce  [12]byte // scratch: iv XOR seq
	hdr    [HeaderLen]byte

	secretBuf [maxSecretLen]byte
}

// maxSecretLen is the longest traffic secret: SHA-384's.
const maxSecretLen = 48

// halfConnMem holds a HalfConn and its keys, so that NewHalfConn makes one
// allocation for both (a connection makes six to eight per handshake).
type halfConnMem struct {
	h HalfConn
	k halfKeys
}

// NewHalfConn derives the key and IV from trafficSecret with
// keyschedule.TrafficKeysInto and returns a HalfConn at sequence number 0. The
// secret is copied.
func NewHalfConn(s *suite.Suite, trafficSecret []byte) (*HalfConn, error) {
	if s == nil {
		return nil, alert.Errorf(alert.InternalError, "record: no cipher suite")
	}
	if len(trafficSecret) != s.Hash.Size() || len(trafficSecret) > maxSecretLen {
		return nil, alert.Errorf(alert.InternalError, "record: traffic secret is %d bytes, %s needs %d", len(trafficSecret), s.Name, s.Hash.Size())
	}
	// The key and IV of RFC 8446, Section 7.3, derived on the stack.
	var key [32]byte
	var iv [12]byte
	defer clear(key[:])
	if s.KeyLen > len(key) || !keyschedule.TrafficKeysInto(key[:s.KeyLen], iv[:], s.Hash, trafficSecret) {
		return nil, alert.Errorf(alert.InternalError, "record: cannot derive %s traffic keys", s.Name)
	}
	aead, err := s.NewAEAD(key[:s.KeyLen])
	if err != nil {
		return nil, alert.Errorf(alert.InternalError, "record: %v", err)
	}
	if aead.NonceSize() != 12 {
		return nil, alert.Errorf(alert.InternalError, "record: %s AEAD nonce is %d bytes, want 12", s.Name, aead.NonceSize())
	}
	m := &halfConnMem{}
	k := &m.k
	k.aead, k.iv = aead, iv
	k.secret = k.secretBuf[:copy(k.secretBuf[:], trafficSecret)]
	m.h = HalfConn{suite: s, keys: func() *halfKeys { return k }}
	return &m.h, nil
}

// Suite returns the cipher suite the HalfConn protects records with.
func (h *HalfConn) Suite() *suite.Suite { return h.suite }

// Secret returns the traffic secret, for the next KeyUpdate
// (keyschedule.NextTrafficSecret) or a key log. Do not modify it.
func (h *HalfConn) Secret() []byte { return h.keys().secret }

// ProtectsWith reports whether the HalfConn protects records under s and
// trafficSecret, so that a caller about to install the same secret again
// keeps this HalfConn: a new one would cost the AEAD set-up and restart the
// sequence number at zero, reusing nonces if a record went out already. The
// secrets are compared in constant time.
func (h *HalfConn) ProtectsWith(s *suite.Suite, trafficSecret []byte) bool {
	return h != nil && h.suite == s && subtle.ConstantTimeCompare(h.keys().secret, trafficSecret) == 1
}

// Seq returns the sequence number of the next record.
func (h *HalfConn) Seq() uint64 { return h.seq }

// Overhead returns how many bytes protection adds to a record's content
// besides padding: header, content type and AEAD tag.
func (h *HalfConn) Overhead() int { return HeaderLen + 1 + h.keys().aead.Overhead() }

// String describes the HalfConn without key material.
func (h *HalfConn) String() string {
	return fmt.Sprintf("record.HalfConn{%s seq=%d}", h.suite.Name, h.seq)
}

// Format prints what String prints, whatever the verb, so key material never
// reaches a log.
func (h *HalfConn) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(h.String())) }

// makeNonce computes the per-record nonce of RFC 8446, Section 5.3: the
// sequence number, left-padded to the IV length, XORed with the IV.
func (k *halfKeys) makeNonce(seq uint64) []byte {
	k.nonce = k.iv
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], seq)
	for i := range s {
		k.nonce[4+i] ^= s[i]
	}
	return k.nonce[:]
}

// Seal appends one protected record to dst and returns the extended slice:
// a header with type application_data and version 0x0303, then the AEAD
// encryption of TLSInnerPlaintext = plaintext || typ || padding zero bytes
// (RFC 8446, Section 5.2 and 5.4), with the header as additional data. typ is
// the real content type (alert, handshake or application_data). The content
// and padding together may not exceed MaxPlaintext. Seal does not allocate
// when dst has room for the record. It fails, sealing nothing, once the
// sequence number is exhausted: the caller must update keys before.
func (h *HalfConn) Seal(dst []byte, typ ContentType, plaintext []byte, padding int) ([]byte, error) {
	switch typ {
	case TypeAlert, TypeHandshake, TypeApplicationData:
	default:
		return dst, alert.Errorf(alert.InternalError, "record: cannot protect a %v record", typ)
	}
	if padding < 0 || len(plaintext) > MaxPlaintext || padding > MaxPlaintext-len(plaintext) {
		return dst, alert.Errorf(alert.InternalError, "record: %d content bytes and %d padding exceed %d", len(plaintext), padding, MaxPlaintext)
	}
	if h.seq == math.MaxUint64 {
		// RFC 8446, Section 5.3: the sequence number must not wrap.
		return dst, alert.Errorf(alert.InternalError, "record: sequence number exhausted, keys must be updated")
	}
	k := h.keys()
	inner := len(plaintext) + 1 + padding
	clen := inner + k.aead.Overhead()
	n := len(dst)
	out := slices.Grow(dst, HeaderLen+clen)[:n+HeaderLen+clen]
	hdr := out[n : n+HeaderLen]
	hdr[0], hdr[1], hdr[2], hdr[3], hdr[4] = byte(TypeApplicationData), 3, 3, byte(clen>>8), byte(clen)
	body := out[n+HeaderLen:]
	copy(body, plaintext)
	body[len(plaintext)] = byte(typ)
	clear(body[len(plaintext)+1 : inner])
	k.aead.Seal(body[:0], k.makeNonce(h.seq), body[:inner], hdr)
	h.seq++
	return out, nil
}

// Open deprotects the fragment of an application_data record (as returned
// by Deframer.Next) in place and returns the real content type and the
// content with the padding removed (RFC 8446, Section 5.2 and 5.4).
// maxPlaintext bounds the content as MaxPlaintext does; for a
// record_size_limit L (RFC 8449, which counts the content type) pass L-1.
// Zero or larger values mean MaxPlaintext.
//
// Errors: authentication failure is bad_record_mac, and then the sequence
// number does not advance (a server skipping rejected 0-RTT data tries each
// record and discards it); the contents of payload are undefined after a
// failure. Content over maxPlaintext is record_overflow; a plaintext of
// only zeros, or a protected change_cipher_spec or unknown type, is
// unexpected_message.
func (h *HalfConn) Open(payload []byte, maxPlaintext int) (ContentType, []byte, error) {
	if maxPlaintext <= 0 || maxPlaintext > MaxPlaintext {
		maxPlaintext = MaxPlaintext
	}
	if len(payload) > MaxCiphertext {
		return 0, nil, alert.Errorf(alert.RecordOverflow, "protected record of %d bytes exceeds %d", len(payload), MaxCiphertext)
	}
	k := h.keys()
	if len(payload) < k.aead.Overhead() {
		return 0, nil, errBadRecordMAC
	}
	if h.seq == math.MaxUint64 {
		return 0, nil, alert.Errorf(alert.InternalError, "record: sequence number exhausted, keys must be updated")
	}
	// RFC 8446, Section 5.2: additional_data is the record header.
	k.hdr = [HeaderLen]byte{byte(TypeApplicationData), 3, 3, byte(len(payload) >> 8), byte(len(payload))}
	plain, err := k.aead.Open(payload[:0], k.makeNonce(h.seq), payload, k.hdr[:])
	if err != nil {
		return 0, nil, errBadRecordMAC
	}
	h.seq++
	// The padding is zeros after the content type; the type is the last
	// non-zero byte (RFC 8446, Section 5.4).
	if len(plain) > maxPlaintext+1 {
		return 0, nil, alert.Errorf(alert.RecordOverflow, "record plaintext of %d bytes exceeds %d", len(plain), maxPlaintext+1)
	}
	i := len(plain) - 1
	for i >= 0 && plain[i] == 0 {
		i--
	}
	if i < 0 {
		return 0, nil, errNoContent
	}
	typ := ContentType(plain[i])
	switch typ {
	case TypeAlert, TypeHandshake, TypeApplicationData:
	default:
		return 0, nil, alert.Errorf(alert.UnexpectedMessage, "protected record with content type %v", typ)
	}
	return typ, plain[:i:i], nil
}
