package tls13

// Split mode (RFC 9849, Section 3.1): a client-facing server holds the
// ECH keys, decrypts the ClientHelloOuter and forwards the
// ClientHelloInner to the backend that serves the inner name; the
// backend (Config.ECHBackend) runs the whole handshake on it and
// confirms ECH. The client-facing server sees the inner ClientHello (the
// name, and a ZTLS offer's record id) but no key of the connection: the
// early data and everything after it are under the backend's keys.

import (
	"errors"
	"fmt"

	"github.com/ztls-project/ztls/tls13/internal/ech"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// ErrECHNotOpened is OpenECHClientHello's error for a ClientHello it
// cannot forward: it has no ECH extension, or one that no key decrypts
// (a stale config, GREASE). The client-facing server then completes the
// handshake itself as the public name, with retry configs (a Config with
// the same ECHKeySet does that).
var ErrECHNotOpened = errors.New("tls13: the ClientHello has no ECH extension a key of this server decrypts")

// ECHForward is a ClientHello a client-facing server opened: the
// ClientHelloInner to forward to the backend of ServerName.
type ECHForward struct {
	// Inner is the ClientHelloInner handshake message (type and length
	// included), to be sent to the backend in handshake records.
	Inner []byte
	// ServerName is the inner ClientHello's server_name: which backend.
	ServerName string
	ctx        *ech.ServerContext
	ext        *ech.ClientExtension
	sessionID  []byte
}

// OpenECHClientHello decrypts the ECH ClientHelloOuter msg (a
// ClientHello handshake message, type and length included) with the
// set's keys and rebuilds the ClientHelloInner (RFC 9849, Section 7.1).
// It returns ErrECHNotOpened when the ClientHello has no outer ECH
// extension or none of the keys opens it; any other error is a
// malformed or illegal ClientHello, for which the connection is closed.
func (s *ECHKeySet) OpenECHClientHello(msg []byte) (*ECHForward, error) {
	l := s.cur.Load()
	if l == nil || len(l.keys) == 0 {
		return nil, ErrECHNotOpened
	}
	outer, err := wire.ParseClientHello(msg)
	if err != nil {
		return nil, err
	}
	if _, ok := findExtension(outer.Extra, ech.ExtEncryptedClientHello); !ok {
		return nil, ErrECHNotOpened
	}
	aad, _, ext, err := ech.OuterAAD(msg[4:])
	if err != nil {
		return nil, fmt.Errorf("tls13: ECH ClientHello: %w", err)
	}
	encoded, sc, err := openECH(l.keys, ext, aad)
	if err != nil {
		return nil, ErrECHNotOpened
	}
	f := &ECHForward{ctx: sc, ext: ext, sessionID: outer.SessionID}
	if err := f.rebuild(encoded, msg); err != nil {
		return nil, err
	}
	return f, nil
}

// OpenSecond opens the second ClientHelloOuter, after the backend's
// HelloRetryRequest, with the first's HPKE context (RFC 9849, Section
// 7.1.1), and sets Inner to the second ClientHelloInner.
func (f *ECHForward) OpenSecond(msg []byte) error {
	if _, err := wire.ParseClientHello(msg); err != nil {
		return fmt.Errorf("tls13: second ECH ClientHello: %w", err)
	}
	aad, _, ext, err := ech.OuterAAD(msg[4:])
	if err != nil {
		return fmt.Errorf("tls13: second ECH ClientHello: %w", err)
	}
	if ext.ConfigID != f.ext.ConfigID || ext.Suite != f.ext.Suite || len(ext.Enc) != 0 {
		return errors.New("tls13: second ClientHelloOuter with another ECH config, suite or a non-empty enc")
	}
	encoded, err := f.ctx.Open(aad, ext.Payload)
	if err != nil {
		return fmt.Errorf("tls13: second ClientHelloOuter: %w", err)
	}
	return f.rebuild(encoded, msg)
}

// rebuild sets Inner and ServerName from the decrypted
// EncodedClientHelloInner and the outer ClientHello msg it came in.
func (f *ECHForward) rebuild(encoded, msg []byte) error {
	body, err := ech.DecodeInner(encoded, msg[4:])
	if err != nil {
		return fmt.Errorf("tls13: %w", err)
	}
	n := len(body)
	inner := append([]byte{wire.TypeClientHello, byte(n >> 16), byte(n >> 8), byte(n)}, body...)
	ch, err := wire.ParseClientHello(inner)
	if err != nil {
		return fmt.Errorf("tls13: the ClientHelloInner: %w", err)
	}
	if string(ch.SessionID) != string(f.sessionID) {
		return errors.New("tls13: inner ClientHello with another legacy_session_id")
	}
	f.Inner, f.ServerName = inner, ch.ServerName
	return nil
}
