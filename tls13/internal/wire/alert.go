package wire

import (
	"fmt"
	"strconv"
)

// Alert is a TLS alert description (RFC 8446, Section 6).
type Alert uint8

// Alert descriptions defined for TLS 1.3 (RFC 8446, Section 6, and RFC 8449
// for record_size_limit's use of illegal_parameter).
const (
	AlertCloseNotify                  Alert = 0
	AlertUnexpectedMessage            Alert = 10
	AlertBadRecordMAC                 Alert = 20
	AlertRecordOverflow               Alert = 22
	AlertHandshakeFailure             Alert = 40
	AlertBadCertificate               Alert = 42
	AlertUnsupportedCertificate       Alert = 43
	AlertCertificateRevoked           Alert = 44
	AlertCertificateExpired           Alert = 45
	AlertCertificateUnknown           Alert = 46
	AlertIllegalParameter             Alert = 47
	AlertUnknownCA                    Alert = 48
	AlertAccessDenied                 Alert = 49
	AlertDecodeError                  Alert = 50
	AlertDecryptError                 Alert = 51
	AlertProtocolVersion              Alert = 70
	AlertInsufficientSecurity         Alert = 71
	AlertInternalError                Alert = 80
	AlertInappropriateFallback        Alert = 86
	AlertUserCanceled                 Alert = 90
	AlertMissingExtension             Alert = 109
	AlertUnsupportedExtension         Alert = 110
	AlertUnrecognizedName             Alert = 112
	AlertBadCertificateStatusResponse Alert = 113
	AlertUnknownPSKIdentity           Alert = 115
	AlertCertificateRequired          Alert = 116
	AlertNoApplicationProtocol        Alert = 120
)

var alertNames = map[Alert]string{
	AlertCloseNotify:                  "close_notify",
	AlertUnexpectedMessage:            "unexpected_message",
	AlertBadRecordMAC:                 "bad_record_mac",
	AlertRecordOverflow:               "record_overflow",
	AlertHandshakeFailure:             "handshake_failure",
	AlertBadCertificate:               "bad_certificate",
	AlertUnsupportedCertificate:       "unsupported_certificate",
	AlertCertificateRevoked:           "certificate_revoked",
	AlertCertificateExpired:           "certificate_expired",
	AlertCertificateUnknown:           "certificate_unknown",
	AlertIllegalParameter:             "illegal_parameter",
	AlertUnknownCA:                    "unknown_ca",
	AlertAccessDenied:                 "access_denied",
	AlertDecodeError:                  "decode_error",
	AlertDecryptError:                 "decrypt_error",
	AlertProtocolVersion:              "protocol_version",
	AlertInsufficientSecurity:         "insufficient_security",
	AlertInternalError:                "internal_error",
	AlertInappropriateFallback:        "inappropriate_fallback",
	AlertUserCanceled:                 "user_canceled",
	AlertMissingExtension:             "missing_extension",
	AlertUnsupportedExtension:         "unsupported_extension",
	AlertUnrecognizedName:             "unrecognized_name",
	AlertBadCertificateStatusResponse: "bad_certificate_status_response",
	AlertUnknownPSKIdentity:           "unknown_psk_identity",
	AlertCertificateRequired:          "certificate_required",
	AlertNoApplicationProtocol:        "no_application_protocol",
}

// String returns the alert's name as RFC 8446, Section 6 spells it, such as
// "handshake_failure", or "alert(N)" for a description this package does not know.
func (a Alert) String() string {
	if name, ok := alertNames[a]; ok {
		return name
	}
	return "alert(" + strconv.Itoa(int(a)) + ")"
}

// Error is a local protocol error that knows the alert to send to the peer.
// Every parser in this package returns its failures as *Error, so the engine
// can answer a malformed message with the right alert without guessing.
type Error struct {
	Alert Alert  // the alert this side sends because of the error
	Msg   string // what went wrong, without the "tls13: " prefix
}

// Error returns "tls13: " + Msg + " (" + alert name + ")".
func (e *Error) Error() string {
	return "tls13: " + e.Msg + " (" + e.Alert.String() + ")"
}

// Errorf builds an *Error carrying alert a, formatting its message as fmt.Sprintf does.
func Errorf(a Alert, format string, args ...any) *Error {
	return &Error{Alert: a, Msg: fmt.Sprintf(format, args...)}
}

// decodeErr, illegalErr and internalErr keep the common cases short; all of
// this package's messages start with "wire: ".
func decodeErr(format string, args ...any) *Error {
	return Errorf(AlertDecodeError, "wire: "+format, args...)
}

func illegalErr(format string, args ...any) *Error {
	return Errorf(AlertIllegalParameter, "wire: "+format, args...)
}

func internalErr(format string, args ...any) *Error {
	return Errorf(AlertInternalError, "wire: "+format, args...)
}
