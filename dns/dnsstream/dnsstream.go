package dnsstream

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// MaxMessageSize is the largest DNS message a two-byte length prefix can
// announce (RFC 1035, Section 4.2.2).
const MaxMessageSize = 65535

// ErrFrameTooLarge reports a frame whose announced length exceeds the
// reader's buffer. The stream is no longer aligned on a frame boundary
// after it, so the connection should be closed.
var ErrFrameTooLarge = errors.New("dnsstream: frame larger than buffer")

// ErrMessageTooLarge reports a message that does not fit a two-byte length.
var ErrMessageTooLarge = errors.New("dnsstream: message longer than 65535 bytes")

// ErrEmptyFrame reports a frame of length zero, which carries no DNS message.
var ErrEmptyFrame = errors.New("dnsstream: empty frame")

// ReadFrame reads one length-prefixed message from r into buf and returns
// the message, which aliases buf. It returns io.EOF if r ends cleanly
// before a frame starts, io.ErrUnexpectedEOF if r ends inside a frame,
// ErrFrameTooLarge if the announced length exceeds len(buf) (the body is
// not read) and ErrEmptyFrame for a zero length. The maximum message size
// is therefore len(buf); pass a MaxMessageSize buffer to accept all.
func ReadFrame(r io.Reader, buf []byte) ([]byte, error) {
	var prefix [2]byte
	if _, err := io.ReadFull(r, prefix[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(prefix[:]))
	if n == 0 {
		return nil, ErrEmptyFrame
	}
	if n > len(buf) {
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf[:n], nil
}

// AppendFrame appends msg preceded by its two-byte length to dst and
// returns the extended slice. It fails with ErrMessageTooLarge if msg is
// longer than MaxMessageSize, and with ErrEmptyFrame if msg is empty.
func AppendFrame(dst, msg []byte) ([]byte, error) {
	if len(msg) > MaxMessageSize {
		return dst, fmt.Errorf("%w (%d)", ErrMessageTooLarge, len(msg))
	}
	if len(msg) == 0 {
		return dst, ErrEmptyFrame
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(msg)))
	return append(dst, msg...), nil
}
