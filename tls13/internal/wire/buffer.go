package wire

import "github.com/ztls-project/ztls/tls13/internal/alert"

// HandshakeBuffer reassembles handshake messages from record payloads
// (RFC 8446, Section 5.1: a message may span records, and one record may
// hold several messages). The zero value is ready to use with the default
// limit. It is not safe for concurrent use.
type HandshakeBuffer struct {
	// Max limits the body of one message, in bytes; 0 means
	// MaxHandshakeSize. A server's Certificate chain can need more.
	Max int

	data  []byte // buffered bytes; data[start:] is not yet returned
	start int
	err   error // sticky: once the stream is bad, it stays bad
}

// Write appends a record's payload. Bytes written after an error are dropped.
func (b *HandshakeBuffer) Write(p []byte) {
	if b.err != nil || len(p) == 0 {
		return
	}
	if b.start > 0 && b.start >= len(b.data)/2 {
		// Slide the unread bytes down so the buffer does not grow forever.
		n := copy(b.data, b.data[b.start:])
		b.data = b.data[:n]
		b.start = 0
	}
	b.data = append(b.data, p...)
}

// Len returns how many buffered bytes Next has not returned yet.
// Release drops the buffer when every message in it was returned, so
// that a connection past its handshake holds none until a post-handshake
// message arrives.
func (b *HandshakeBuffer) Release() {
	if b.err == nil && b.start == len(b.data) {
		b.data, b.start = nil, 0
	}
}

func (b *HandshakeBuffer) Len() int {
	return len(b.data) - b.start
}

// Next returns the next complete handshake message, header included, in a
// fresh slice the caller owns. ok is false when no whole message is buffered
// yet. err is an *alert.Error, and stays set for every later call: unexpected_message
// for a handshake type TLS 1.3 does not send, decode_error for a declared
// length above the limit (checked as soon as the header is in, so a peer
// cannot make the buffer grow to 16 MiB).
func (b *HandshakeBuffer) Next() (typ uint8, msg []byte, ok bool, err error) {
	if b.err != nil {
		return 0, nil, false, b.err
	}
	rest := b.data[b.start:]
	if len(rest) < 4 {
		return 0, nil, false, nil
	}
	typ = rest[0]
	if !wireType(typ) {
		b.err = alert.Errorf(alert.UnexpectedMessage, "wire: handshake message of unknown type %d", typ)
		return 0, nil, false, b.err
	}
	n := int(rest[1])<<16 | int(rest[2])<<8 | int(rest[3])
	limit := b.Max
	if limit <= 0 {
		limit = MaxHandshakeSize
	}
	if n > limit {
		b.err = decodeErr("handshake message type %d of %d bytes exceeds the limit of %d", typ, n, limit)
		return 0, nil, false, b.err
	}
	if len(rest) < 4+n {
		return 0, nil, false, nil
	}
	msg = append([]byte(nil), rest[:4+n]...)
	b.start += 4 + n
	if b.start == len(b.data) {
		b.data, b.start = b.data[:0], 0
	}
	return typ, msg, true, nil
}

// wireType reports whether a TLS 1.3 peer may send handshake type t
// (RFC 8446, Section 4).
func wireType(t uint8) bool {
	switch t {
	case TypeClientHello, TypeServerHello, TypeNewSessionTicket, TypeEndOfEarlyData,
		TypeEncryptedExtensions, TypeCertificate, TypeCertificateRequest,
		TypeCertificateVerify, TypeFinished, TypeKeyUpdate, TypeCompressedCertificate:
		return true
	}
	return false
}

// Parse parses a whole handshake message, header included, choosing the
// parser by its type byte. It returns one of *ClientHello, *ServerHello
// (also for a HelloRetryRequest), *NewSessionTicket, *EndOfEarlyData,
// *EncryptedExtensions, *Certificate, *CertificateRequest,
// *CertificateVerify, *Finished, *KeyUpdate or *CompressedCertificate.
// Any other type is an unexpected_message.
func Parse(msg []byte) (any, error) {
	if len(msg) < 4 {
		return nil, decodeErr("%d bytes cannot hold a handshake header", len(msg))
	}
	switch msg[0] {
	case TypeClientHello:
		return asAny(ParseClientHello(msg))
	case TypeServerHello:
		return asAny(ParseServerHello(msg))
	case TypeNewSessionTicket:
		return asAny(ParseNewSessionTicket(msg))
	case TypeEndOfEarlyData:
		return asAny(ParseEndOfEarlyData(msg))
	case TypeEncryptedExtensions:
		return asAny(ParseEncryptedExtensions(msg))
	case TypeCertificate:
		return asAny(ParseCertificate(msg))
	case TypeCertificateRequest:
		return asAny(ParseCertificateRequest(msg))
	case TypeCertificateVerify:
		return asAny(ParseCertificateVerify(msg))
	case TypeFinished:
		return asAny(ParseFinished(msg))
	case TypeKeyUpdate:
		return asAny(ParseKeyUpdate(msg))
	case TypeCompressedCertificate:
		return asAny(ParseCompressedCertificate(msg))
	}
	return nil, alert.Errorf(alert.UnexpectedMessage, "wire: handshake message of unknown type %d", msg[0])
}

// asAny keeps a failed parse from returning a typed nil inside a non-nil any.
func asAny[T any](m *T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return m, nil
}
