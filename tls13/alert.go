package tls13

import (
	"errors"
	"fmt"

	"github.com/ztls-project/ztls/tls13/internal/kex"
	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// Alert is a TLS alert description (RFC 8446, Section 6).
type Alert uint8

// String returns the RFC's name of the alert, such as "handshake_failure".
func (a Alert) String() string { return wire.Alert(a).String() }

// Alerts the application may want to compare with.
const (
	AlertCloseNotify          = Alert(wire.AlertCloseNotify)
	AlertUnexpectedMessage    = Alert(wire.AlertUnexpectedMessage)
	AlertBadRecordMAC         = Alert(wire.AlertBadRecordMAC)
	AlertRecordOverflow       = Alert(wire.AlertRecordOverflow)
	AlertHandshakeFailure     = Alert(wire.AlertHandshakeFailure)
	AlertBadCertificate       = Alert(wire.AlertBadCertificate)
	AlertCertificateExpired   = Alert(wire.AlertCertificateExpired)
	AlertCertificateRevoked   = Alert(wire.AlertCertificateRevoked)
	AlertIllegalParameter     = Alert(wire.AlertIllegalParameter)
	AlertUnknownCA            = Alert(wire.AlertUnknownCA)
	AlertDecodeError          = Alert(wire.AlertDecodeError)
	AlertDecryptError         = Alert(wire.AlertDecryptError)
	AlertProtocolVersion      = Alert(wire.AlertProtocolVersion)
	AlertCertificateRequired  = Alert(wire.AlertCertificateRequired)
	AlertNoApplicationProto   = Alert(wire.AlertNoApplicationProtocol)
	AlertMissingExtension     = Alert(wire.AlertMissingExtension)
	AlertUnsupportedExtension = Alert(wire.AlertUnsupportedExtension)
	AlertUnsupportedCert      = Alert(wire.AlertUnsupportedCertificate)
	AlertInternalError        = Alert(wire.AlertInternalError)
)

// AlertError is a fatal alert received from the peer.
type AlertError struct{ Alert Alert }

func (e *AlertError) Error() string { return "tls13: peer sent alert " + e.Alert.String() }

// LocalError is a failure found on this side; Alert is what was sent to the peer.
type LocalError struct {
	Alert Alert
	Err   error
}

func (e *LocalError) Error() string {
	return fmt.Sprintf("%v (sent %s alert)", e.Err, e.Alert)
}

func (e *LocalError) Unwrap() error { return e.Err }

// alertFor finds the alert an error from one of the internal packages
// carries; other errors map to internal_error.
func alertFor(err error) Alert {
	var we *wire.Error
	if errors.As(err, &we) {
		return Alert(we.Alert)
	}
	var re *record.Error
	if errors.As(err, &re) {
		return Alert(re.Alert)
	}
	var ke *kex.Error
	if errors.As(err, &ke) {
		return Alert(ke.Alert)
	}
	var se *sig.Error
	if errors.As(err, &se) {
		return Alert(se.Alert)
	}
	var le *LocalError
	if errors.As(err, &le) {
		return le.Alert
	}
	return Alert(wire.AlertInternalError)
}

// errorf makes a local protocol error with its alert.
func errorf(a Alert, format string, args ...any) error {
	return &LocalError{Alert: a, Err: fmt.Errorf("tls13: "+format, args...)}
}

// Sentinel errors named after what the peer did.
var (
	errPeerSelectedUnofferedSuite = errorf(AlertIllegalParameter, "server selected a cipher suite the client did not offer")
	errPeerSelectedUnofferedGroup = errorf(AlertIllegalParameter, "server selected a group the client did not offer a share for")
	errPeerSelectedUnofferedPSK   = errorf(AlertIllegalParameter, "server selected a PSK identity the client did not offer")
	errPeerSentUnexpectedMessage  = errorf(AlertUnexpectedMessage, "unexpected handshake message")
	errPeerBadFinished            = errorf(AlertDecryptError, "peer's Finished does not verify")
	errPeerBadBinder              = errorf(AlertDecryptError, "PSK binder does not verify")
	errPeerTLS12Only              = errorf(AlertProtocolVersion, "peer does not speak TLS 1.3 (ztls implements TLS 1.3 only)")
)

// ErrEarlyDataRejected is returned by Write when early data was queued
// but the server rejected it and the data was not resent (see Conn.SetEarlyData).
var ErrEarlyDataRejected = errors.New("tls13: the server rejected the early data")
