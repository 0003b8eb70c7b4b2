package ech

import (
	"crypto"
	"crypto/hkdf"
	"errors"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// ClientHello extension types (RFC 9849, Section 5).
const (
	TypeOuter uint8 = 0
	TypeInner uint8 = 1
)

// ClientExtension is the encrypted_client_hello extension of a
// ClientHello: the outer form carries the suite, the config id, the
// encapsulated key (empty in the second ClientHelloOuter after a
// HelloRetryRequest) and the payload; the inner form is empty.
type ClientExtension struct {
	Type     uint8
	Suite    Suite
	ConfigID uint8
	Enc      []byte
	Payload  []byte
}

// Marshal returns the extension's body.
func (e *ClientExtension) Marshal() ([]byte, error) {
	b := wire.NewBuilder(nil)
	b.AddUint8(e.Type)
	if e.Type == TypeOuter {
		if len(e.Payload) == 0 {
			return nil, errors.New("ech: outer extension without a payload")
		}
		b.AddUint16(e.Suite.KDF)
		b.AddUint16(e.Suite.AEAD)
		b.AddUint8(e.ConfigID)
		b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(e.Enc) })
		b.AddUint16LengthPrefixed(func(b *wire.Builder) { b.AddBytes(e.Payload) })
	}
	return b.Bytes()
}

// ParseClientExtension reads an encrypted_client_hello extension's body
// from a ClientHello. A malformed one is the server's illegal_parameter
// or decode_error (RFC 9849, Section 7): the error says which.
func ParseClientExtension(body []byte) (*ClientExtension, error) {
	s := cryptobyte.String(body)
	e := &ClientExtension{}
	if !s.ReadUint8(&e.Type) {
		return nil, ErrDecode
	}
	switch e.Type {
	case TypeInner:
		if !s.Empty() {
			return nil, ErrDecode
		}
		return e, nil
	case TypeOuter:
	default:
		return nil, ErrIllegal
	}
	var enc, payload cryptobyte.String
	if !s.ReadUint16(&e.Suite.KDF) || !s.ReadUint16(&e.Suite.AEAD) || !s.ReadUint8(&e.ConfigID) ||
		!s.ReadUint16LengthPrefixed(&enc) || !s.ReadUint16LengthPrefixed(&payload) || !s.Empty() {
		return nil, ErrDecode
	}
	if len(payload) == 0 {
		return nil, ErrDecode
	}
	e.Enc = append([]byte(nil), enc...)
	e.Payload = append([]byte(nil), payload...)
	return e, nil
}

// Errors of the extension's parser, mapped by the engine to alerts.
var (
	ErrDecode  = errors.New("ech: malformed encrypted_client_hello extension")
	ErrIllegal = errors.New("ech: encrypted_client_hello extension of an unknown type")
)

// ConfirmationLen is the length of the acceptance signal (RFC 9849,
// Section 7.2): the last 8 bytes of ServerHello.random, or the
// HelloRetryRequest's extension.
const ConfirmationLen = 8

// Confirmation labels (RFC 9849, Sections 7.2 and 7.2.1).
const (
	labelAccept    = "ech accept confirmation"
	labelAcceptHRR = "hrr ech accept confirmation"
)

// AcceptConfirmation returns the 8-byte signal a server that accepted ECH
// puts in ServerHello.random's last bytes: HKDF-Expand-Label of
// HKDF-Extract(0, ClientHelloInner.random) with the transcript hash of
// ClientHelloInner up to the ServerHello whose last 8 random bytes are
// zero. transcriptHash is that hash.
func AcceptConfirmation(h crypto.Hash, innerRandom, transcriptHash []byte) []byte {
	return confirm(h, innerRandom, labelAccept, transcriptHash)
}

// AcceptConfirmationHRR is the signal in a HelloRetryRequest's
// encrypted_client_hello extension; transcriptHash covers the inner
// ClientHello and the HelloRetryRequest with the signal zeroed.
func AcceptConfirmationHRR(h crypto.Hash, innerRandom, transcriptHash []byte) []byte {
	return confirm(h, innerRandom, labelAcceptHRR, transcriptHash)
}

func confirm(h crypto.Hash, innerRandom []byte, label string, transcriptHash []byte) []byte {
	prk, err := hkdf.Extract(h.New, innerRandom, make([]byte, h.Size()))
	if err != nil {
		return nil
	}
	return keyschedule.ExpandLabel(h, prk, label, transcriptHash, ConfirmationLen)
}
