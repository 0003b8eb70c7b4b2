package tls13

import (
	"strings"

	"github.com/ztls-project/ztls/tls13/internal/alert"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// Alert is a TLS alert description (RFC 8446, Section 6). Its String
// method returns the RFC's name, such as "handshake_failure".
type Alert = alert.Alert

// Alerts the application may want to compare with.
const (
	AlertCloseNotify          = alert.CloseNotify
	AlertUnexpectedMessage    = alert.UnexpectedMessage
	AlertBadRecordMAC         = alert.BadRecordMAC
	AlertRecordOverflow       = alert.RecordOverflow
	AlertHandshakeFailure     = alert.HandshakeFailure
	AlertBadCertificate       = alert.BadCertificate
	AlertCertificateExpired   = alert.CertificateExpired
	AlertCertificateRevoked   = alert.CertificateRevoked
	AlertIllegalParameter     = alert.IllegalParameter
	AlertUnknownCA            = alert.UnknownCA
	AlertDecodeError          = alert.DecodeError
	AlertDecryptError         = alert.DecryptError
	AlertProtocolVersion      = alert.ProtocolVersion
	AlertCertificateRequired  = alert.CertificateRequired
	AlertNoApplicationProto   = alert.NoApplicationProtocol
	AlertMissingExtension     = alert.MissingExtension
	AlertUnsupportedExtension = alert.UnsupportedExtension
	AlertUnsupportedCert      = alert.UnsupportedCertificate
	AlertInternalError        = alert.InternalError
	AlertECHRequired          = alert.ECHRequired
)

// AlertError is a fatal alert received from the peer.
type AlertError struct{ Alert Alert }

func (e *AlertError) Error() string { return "tls13: peer sent alert " + e.Alert.String() }

// LocalError is a failure found on this side: its Alert field is the alert
// sent to the peer, its Err field the cause (Unwrap returns it). The
// engine and its internal packages (parsers, record layer, key exchange,
// signatures) all report failures with this one type.
type LocalError = alert.Error

// unexpectedMessage is the error for a handshake message the current state
// does not take (unexpected_message, RFC 8446, Section 6.2). It names what
// arrived and what the state was waiting for, such as "unexpected message:
// got Certificate, want EncryptedExtensions".
func unexpectedMessage(got uint8, want ...uint8) error {
	names := make([]string, len(want))
	for i, w := range want {
		names[i] = wire.TypeName(w)
	}
	list := strings.Join(names, " or ")
	if len(names) > 2 {
		list = strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	}
	return errorf(AlertUnexpectedMessage, "unexpected message: got %s, want %s", wire.TypeName(got), list)
}

// errorf makes a local protocol error with its alert.
func errorf(a Alert, format string, args ...any) error {
	return alert.Errorf(a, format, args...)
}

// Sentinel errors named after what the peer did.
var (
	errPeerSelectedUnofferedSuite = errorf(AlertIllegalParameter, "server selected a cipher suite the client did not offer")
	errPeerSelectedUnofferedGroup = errorf(AlertIllegalParameter, "server selected a group the client did not offer a share for")
	errPeerSelectedUnofferedPSK   = errorf(AlertIllegalParameter, "server selected a PSK identity the client did not offer")
	errPeerBadFinished            = errorf(AlertDecryptError, "peer's Finished does not verify")
	errPeerBadBinder              = errorf(AlertDecryptError, "PSK binder does not verify")
	errPeerTLS12Only              = errorf(AlertProtocolVersion, "peer does not speak TLS 1.3 (ztls implements TLS 1.3 only)")
)
