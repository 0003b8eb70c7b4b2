package record

import (
	"fmt"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// ContentType is the record content type, RFC 8446, Section 5.1.
type ContentType uint8

// Content types of TLS 1.3 (RFC 8446, Section 5.1).
const (
	TypeChangeCipherSpec ContentType = 20
	TypeAlert            ContentType = 21
	TypeHandshake        ContentType = 22
	TypeApplicationData  ContentType = 23
)

// String returns the RFC's name of the content type.
func (t ContentType) String() string {
	switch t {
	case TypeChangeCipherSpec:
		return "change_cipher_spec"
	case TypeAlert:
		return "alert"
	case TypeHandshake:
		return "handshake"
	case TypeApplicationData:
		return "application_data"
	}
	return fmt.Sprintf("content_type(%d)", uint8(t))
}

// Record size limits, RFC 8446, Section 5.1 and 5.2.
const (
	// MaxPlaintext is the largest fragment (2^14 bytes) of a record.
	MaxPlaintext = 16384
	// MaxCiphertext is the largest TLSCiphertext.length, 2^14 + 256.
	MaxCiphertext = 16384 + 256
	// HeaderLen is the length of a record header.
	HeaderLen = 5
)

// Sentinel errors, preallocated so the data path does not allocate to fail.
var (
	errBadRecordMAC = alert.New(alert.BadRecordMAC, "record authentication failed")
	errNoContent    = alert.New(alert.UnexpectedMessage, "protected record has no content type (all-zero plaintext)")
)

// AppendPlain appends an unprotected record (TLSPlaintext, RFC 8446,
// Section 5.1) carrying fragment to dst and returns the extended slice. It is
// for what TLS 1.3 sends before keys are in place: ClientHello, ServerHello,
// HelloRetryRequest, plaintext alerts and the compatibility
// ChangeCipherSpec. legacyVersion is 0x0303, or 0x0301 for a first
// ClientHello. A fragment longer than MaxPlaintext is split over several
// records, as handshake messages may be; an empty fragment yields one empty
// record.
func AppendPlain(dst []byte, typ ContentType, legacyVersion uint16, fragment []byte) []byte {
	for {
		n := min(len(fragment), MaxPlaintext)
		dst = append(dst, byte(typ), byte(legacyVersion>>8), byte(legacyVersion), byte(n>>8), byte(n))
		dst = append(dst, fragment[:n]...)
		fragment = fragment[n:]
		if len(fragment) == 0 {
			return dst
		}
	}
}
