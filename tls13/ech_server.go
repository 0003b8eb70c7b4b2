package tls13

// The server's Encrypted ClientHello (RFC 9849, Section 7). A
// ClientHello with an outer encrypted_client_hello extension is opened
// with the key its config_id names (or, when none does, each key in
// turn); the inner ClientHello rebuilt from it replaces the outer one,
// so the rest of the handshake (SNI, certificate, ALPN, PSK, ztls, early
// data) is the inner's, and ServerHello.random carries the acceptance
// signal. When nothing opens, the handshake goes on with the outer
// ClientHello (its SNI, the public name, picks the certificate) and
// EncryptedExtensions carries the retry configs.

import (
	"crypto/hmac"
	"errors"

	"github.com/ztls-project/ztls/tls13/internal/ech"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// echServer is what a server decided about ECH for one ClientHello.
type echServer struct {
	status ECHStatus          // accepted or rejected
	retry  []byte             // the retry configs to send on rejection
	ctx    *ech.ServerContext // accepted: opens the second ClientHello after a retry
	ext    *ech.ClientExtension
}

// acceptECH opens an ECH ClientHello and continues with its inner
// ClientHello; see the file comment.
func (hs *serverHandshake) acceptECH() error {
	var first *echServer // the first ClientHello's, when this is the second
	if hs.hrr != nil {
		first = hs.hrr.ech
	}
	x, ok := findExtension(hs.ch.Extra, ech.ExtEncryptedClientHello)
	if !ok {
		if first != nil && first.status == ECHAccepted {
			return errorf(AlertIllegalParameter, "second ClientHello without encrypted_client_hello after ECH was accepted")
		}
		return nil
	}
	if len(x.Data) > 0 && x.Data[0] == ech.TypeInner {
		if hs.cfg.ECHBackend {
			return hs.acceptBackendECH(x, first)
		}
		return errorf(AlertIllegalParameter, "inner encrypted_client_hello extension in a ClientHello that was not encrypted")
	}
	keys, retry, err := hs.cfg.echKeys()
	if err != nil {
		return &LocalError{Alert: AlertInternalError, Err: err}
	}
	if len(keys) == 0 {
		return nil // a server without ECH: an unknown extension, ignored
	}
	aad, _, ext, err := ech.OuterAAD(hs.ch.Raw[4:])
	switch {
	case errors.Is(err, ech.ErrIllegal):
		return errorf(AlertIllegalParameter, "%v", err)
	case err != nil:
		return errorf(AlertDecodeError, "%v", err)
	}
	hs.ech = &echServer{status: ECHRejected, retry: retry}
	hs.e.info.ECH = ECHRejected
	if hs.hrr != nil {
		if first == nil || first.status != ECHAccepted {
			return nil // RFC 9849, Section 7.1.1: rejected in the first, ignored in the second
		}
		return hs.openSecondECH(first, ext, aad)
	}
	encoded, sc, err := openECH(keys, ext, aad)
	if err != nil {
		return nil // RFC 9849, Section 7.1: go on with the outer ClientHello
	}
	return hs.useInner(encoded, &echServer{status: ECHAccepted, ctx: sc, ext: ext})
}

// acceptBackendECH is a split-mode backend's (RFC 9849, Section 7.2):
// the ClientHello is the ClientHelloInner the client-facing server
// decrypted, its inner extension empty; the backend confirms ECH in its
// ServerHello (and HelloRetryRequest) as a server that decrypted it
// itself would. A second ClientHello has the inner extension exactly
// when the first had.
func (hs *serverHandshake) acceptBackendECH(x wire.Extension, first *echServer) error {
	if len(x.Data) != 1 {
		return errorf(AlertDecodeError, "inner encrypted_client_hello extension with a payload")
	}
	if hs.hrr != nil && (first == nil || first.status != ECHAccepted) {
		return errorf(AlertIllegalParameter, "second ClientHello with an inner encrypted_client_hello after a first without")
	}
	hs.ech = &echServer{status: ECHAccepted}
	hs.e.info.ECH = ECHAccepted
	return nil
}

// openSecondECH opens the second ClientHelloOuter after a retry for an
// accepted first (RFC 9849, Section 7.1.1): same config and suite, an
// empty enc, sealed with the first one's HPKE context.
func (hs *serverHandshake) openSecondECH(first *echServer, ext *ech.ClientExtension, aad []byte) error {
	if ext.ConfigID != first.ext.ConfigID || ext.Suite != first.ext.Suite || len(ext.Enc) != 0 {
		return errorf(AlertIllegalParameter, "second ClientHelloOuter with another ECH config, suite or a non-empty enc")
	}
	encoded, err := first.ctx.Open(aad, ext.Payload)
	if err != nil {
		return errorf(AlertDecryptError, "second ClientHelloOuter: %v", err)
	}
	return hs.useInner(encoded, first)
}

// useInner replaces the outer ClientHello by the inner one rebuilt from
// the decrypted EncodedClientHelloInner.
func (hs *serverHandshake) useInner(encoded []byte, st *echServer) error {
	outer := hs.ch
	inner, err := ech.DecodeInner(encoded, outer.Raw[4:])
	if err != nil {
		return errorf(AlertIllegalParameter, "%v", err)
	}
	n := len(inner)
	msg := append([]byte{wire.TypeClientHello, byte(n >> 16), byte(n >> 8), byte(n)}, inner...)
	if err := hs.readClientHello(msg); err != nil {
		return err
	}
	if !hmac.Equal(hs.ch.SessionID, outer.SessionID) {
		return errorf(AlertIllegalParameter, "inner ClientHello with another legacy_session_id")
	}
	hs.ech = st
	hs.e.info.ECH = ECHAccepted
	return nil
}

// openECH decrypts the payload with the keys of the client's config_id,
// or with every key when none has it (RFC 9849, Section 7.1 allows trial
// decryption); any failure is ech.ErrDecrypt.
func openECH(keys []*ech.Key, x *ech.ClientExtension, aad []byte) ([]byte, *ech.ServerContext, error) {
	try := func(k *ech.Key) ([]byte, *ech.ServerContext, error) {
		sc, err := ech.NewServerContext(k, x.Suite, x.Enc)
		if err != nil {
			return nil, nil, err
		}
		pt, err := sc.Open(aad, x.Payload)
		return pt, sc, err
	}
	matched := false
	for _, k := range keys {
		if k.Config.ConfigID == x.ConfigID {
			matched = true
			if pt, sc, err := try(k); err == nil {
				return pt, sc, nil
			}
		}
	}
	if !matched {
		for _, k := range keys {
			if pt, sc, err := try(k); err == nil {
				return pt, sc, nil
			}
		}
	}
	return nil, nil, ech.ErrDecrypt
}

func findExtension(exts []wire.Extension, typ uint16) (wire.Extension, bool) {
	for _, x := range exts {
		if x.Type == typ {
			return x, true
		}
	}
	return wire.Extension{}, false
}

// confirmECH writes the acceptance signal into the marshalled
// ServerHello shRaw (RFC 9849, Section 7.2): the last 8 bytes of its
// random, over the inner ClientHello and the ServerHello with those
// bytes zero. The transcript holds the inner ClientHello.
func (hs *serverHandshake) confirmECH(shRaw []byte) {
	if hs.ech == nil || hs.ech.status != ECHAccepted {
		return
	}
	at := 4 + 2 + 32 - ech.ConfirmationLen
	clear(shRaw[at : at+ech.ConfirmationLen])
	c := ech.AcceptConfirmation(hs.suite.Hash, hs.ch.Random[:], hs.transcript.HashOf(shRaw))
	copy(shRaw[at:], c)
}

// addECHRetrySignal gives a HelloRetryRequest for an accepted ECH
// ClientHello its encrypted_client_hello extension, 8 zero bytes that
// confirmECHRetry fills (RFC 9849, Section 7.2.1). It has no cookie:
// Go's client (1.26) compresses the cookie out of its second
// ClientHelloInner but leaves it out of the ClientHelloOuter, so a
// cookie fails every Go ECH client after a retry; the engine keeps the
// retry's state anyway, the cookie is only a second check of it.
func (hs *serverHandshake) addECHRetrySignal(hrr *wire.ServerHello) {
	if hs.ech != nil && hs.ech.status == ECHAccepted {
		hrr.Cookie = nil
		hrr.Extra = append(hrr.Extra, wire.Extension{Type: ech.ExtEncryptedClientHello, Data: make([]byte, ech.ConfirmationLen)})
	}
}

// confirmECHRetry writes the signal into the marshalled HelloRetryRequest:
// over the transcript t (message_hash of the inner ClientHello) and the
// HelloRetryRequest with the signal zero. Marshal writes Extra last.
func (hs *serverHandshake) confirmECHRetry(t *keyschedule.Transcript, raw []byte) {
	if hs.ech == nil || hs.ech.status != ECHAccepted {
		return
	}
	at := len(raw) - ech.ConfirmationLen
	c := ech.AcceptConfirmationHRR(hs.suite.Hash, hs.ch.Random[:], t.HashOf(raw))
	copy(raw[at:], c)
}

// addECHRetryConfigs puts the retry configs in EncryptedExtensions after
// a rejection (RFC 9849, Section 7.1).
func (hs *serverHandshake) addECHRetryConfigs(ee *wire.EncryptedExtensions) {
	if hs.ech != nil && hs.ech.status == ECHRejected && hs.ech.retry != nil {
		ee.Extra = append(ee.Extra, wire.Extension{Type: ech.ExtEncryptedClientHello, Data: hs.ech.retry})
	}
}
