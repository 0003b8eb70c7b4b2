// Package alert holds TLS alert descriptions and the one error type of the
// TLS 1.3 engine and its internal packages: a failure found on this side
// together with the alert it sends to the peer (RFC 8446, Section 6).
//
// The parsers (wire), the record layer (record), key exchange (kex) and
// signatures (sig) return *Error; the engine sends its Alert and returns
// the error to the application, where package tls13 names it LocalError.
package alert

import (
	"errors"
	"fmt"
	"strconv"
)

// Alert is a TLS alert description (RFC 8446, Section 6: enum
// AlertDescription).
type Alert uint8

// Alert descriptions defined for TLS 1.3 (RFC 8446, Section 6; RFC 8449
// uses illegal_parameter for record_size_limit; RFC 8879 bad_certificate
// for a bad CompressedCertificate).
const (
	CloseNotify                  Alert = 0
	UnexpectedMessage            Alert = 10
	BadRecordMAC                 Alert = 20
	RecordOverflow               Alert = 22
	HandshakeFailure             Alert = 40
	BadCertificate               Alert = 42
	UnsupportedCertificate       Alert = 43
	CertificateRevoked           Alert = 44
	CertificateExpired           Alert = 45
	CertificateUnknown           Alert = 46
	IllegalParameter             Alert = 47
	UnknownCA                    Alert = 48
	AccessDenied                 Alert = 49
	DecodeError                  Alert = 50
	DecryptError                 Alert = 51
	ProtocolVersion              Alert = 70
	InsufficientSecurity         Alert = 71
	InternalError                Alert = 80
	InappropriateFallback        Alert = 86
	UserCanceled                 Alert = 90
	MissingExtension             Alert = 109
	UnsupportedExtension         Alert = 110
	UnrecognizedName             Alert = 112
	BadCertificateStatusResponse Alert = 113
	UnknownPSKIdentity           Alert = 115
	CertificateRequired          Alert = 116
	NoApplicationProtocol        Alert = 120
	ECHRequired                  Alert = 121 // RFC 9849, Section 11.2
)

var names = map[Alert]string{
	CloseNotify:                  "close_notify",
	UnexpectedMessage:            "unexpected_message",
	BadRecordMAC:                 "bad_record_mac",
	RecordOverflow:               "record_overflow",
	HandshakeFailure:             "handshake_failure",
	BadCertificate:               "bad_certificate",
	UnsupportedCertificate:       "unsupported_certificate",
	CertificateRevoked:           "certificate_revoked",
	CertificateExpired:           "certificate_expired",
	CertificateUnknown:           "certificate_unknown",
	IllegalParameter:             "illegal_parameter",
	UnknownCA:                    "unknown_ca",
	AccessDenied:                 "access_denied",
	DecodeError:                  "decode_error",
	DecryptError:                 "decrypt_error",
	ProtocolVersion:              "protocol_version",
	InsufficientSecurity:         "insufficient_security",
	InternalError:                "internal_error",
	InappropriateFallback:        "inappropriate_fallback",
	UserCanceled:                 "user_canceled",
	MissingExtension:             "missing_extension",
	UnsupportedExtension:         "unsupported_extension",
	UnrecognizedName:             "unrecognized_name",
	BadCertificateStatusResponse: "bad_certificate_status_response",
	UnknownPSKIdentity:           "unknown_psk_identity",
	CertificateRequired:          "certificate_required",
	NoApplicationProtocol:        "no_application_protocol",
	ECHRequired:                  "ech_required",
}

// String returns the alert's name as RFC 8446, Section 6 spells it, such as
// "handshake_failure", or "alert(N)" for a description it does not define.
func (a Alert) String() string {
	if name, ok := names[a]; ok {
		return name
	}
	return "alert(" + strconv.Itoa(int(a)) + ")"
}

// Error is a failure found on this side; Alert is what the engine sends to
// the peer because of it (and has sent, once the application sees it).
type Error struct {
	Alert Alert
	Err   error
}

func (e *Error) Error() string { return fmt.Sprintf("%v (sent %s alert)", e.Err, e.Alert) }

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error carrying a, its message formatted as fmt.Errorf
// does (so %w wraps) after the "tls13: " prefix, the package the
// application talks to.
func Errorf(a Alert, format string, args ...any) *Error {
	return &Error{Alert: a, Err: fmt.Errorf("tls13: "+format, args...)}
}

// New is Errorf without formatting, for errors made once (sentinels).
func New(a Alert, msg string) *Error {
	return &Error{Alert: a, Err: errors.New("tls13: " + msg)}
}

// Of returns the alert err carries, or internal_error for an error that
// carries none (a failure that is not the peer's doing).
func Of(err error) Alert {
	var e *Error
	if errors.As(err, &e) {
		return e.Alert
	}
	return InternalError
}
