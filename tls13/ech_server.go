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
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// echServer is what a server decided about ECH for one ClientHello.
type echServer struct {
	status ECHStatus // accepted or rejected
	retry  []byte    // the retry configs to send on rejection
}

// acceptECH opens an ECH ClientHello and continues with its inner
// ClientHello; see the file comment.
func (hs *serverHandshake) acceptECH() error {
	x, ok := findExtension(hs.ch.Extra, ech.ExtEncryptedClientHello)
	if !ok {
		return nil
	}
	if len(x.Data) > 0 && x.Data[0] == ech.TypeInner {
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
		// We never ask for a retry after accepting (refuseECHRetry): the
		// first ClientHello was rejected, and so is this one.
		return nil
	}
	encoded, err := openECH(keys, ext, aad)
	if err != nil {
		return nil // RFC 9849, Section 7.1: go on with the outer ClientHello
	}
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
	hs.ech = &echServer{status: ECHAccepted}
	hs.e.info.ECH = ECHAccepted
	return nil
}

// openECH decrypts the payload with the keys of the client's config_id,
// or with every key when none has it (RFC 9849, Section 7.1 allows trial
// decryption); any failure is ech.ErrDecrypt.
func openECH(keys []*ech.Key, x *ech.ClientExtension, aad []byte) ([]byte, error) {
	try := func(k *ech.Key) ([]byte, error) {
		sc, err := ech.NewServerContext(k, x.Suite, x.Enc)
		if err != nil {
			return nil, err
		}
		return sc.Open(aad, x.Payload)
	}
	matched := false
	for _, k := range keys {
		if k.Config.ConfigID == x.ConfigID {
			matched = true
			if pt, err := try(k); err == nil {
				return pt, nil
			}
		}
	}
	if !matched {
		for _, k := range keys {
			if pt, err := try(k); err == nil {
				return pt, nil
			}
		}
	}
	return nil, ech.ErrDecrypt
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

// refuseECHRetry: a HelloRetryRequest after accepting ECH needs the
// retry's own signal and a second, empty-enc outer ClientHello (RFC
// 9849, Sections 6.1.5 and 7.2.1), which this server does not implement.
func (hs *serverHandshake) refuseECHRetry() error {
	if hs.ech != nil && hs.ech.status == ECHAccepted {
		return errorf(AlertHandshakeFailure, "the Encrypted ClientHello's key shares are all for groups the server does not take, and this server does not implement HelloRetryRequest with ECH: add a group the client offers to Config.Groups")
	}
	return nil
}

// addECHRetryConfigs puts the retry configs in EncryptedExtensions after
// a rejection (RFC 9849, Section 7.1).
func (hs *serverHandshake) addECHRetryConfigs(ee *wire.EncryptedExtensions) {
	if hs.ech != nil && hs.ech.status == ECHRejected && hs.ech.retry != nil {
		ee.Extra = append(ee.Extra, wire.Extension{Type: ech.ExtEncryptedClientHello, Data: hs.ech.retry})
	}
}
