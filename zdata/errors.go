package zdata

import (
	"errors"
	"fmt"
	"strings"
)

// Reason names why a client could not use Z-data and fell back to plain
// TLS 1.3 (docs/ztls-spec.md, Section 6). It is the text that goes into the
// connection report's fallback_reason.
type Reason string

// The fallback reasons Select and Verify report.
const (
	ReasonNone           Reason = ""
	ReasonNoZData        Reason = "no Z-data"
	ReasonMalformed      Reason = "malformed Z-data"
	ReasonExpired        Reason = "Z-data expired"
	ReasonNotYetValid    Reason = "Z-data not yet valid"
	ReasonWindowTooLong  Reason = "Z-data validity window too long"
	ReasonUnknownGroup   Reason = "unknown group"
	ReasonUnknownScheme  Reason = "unknown signature scheme"
	ReasonInvalidShare   Reason = "invalid key share"
	ReasonNoLeaf         Reason = "no TLSA 3 0 0 leaf"
	ReasonBadSignature   Reason = "bad signature"
	ReasonWrongService   Reason = "wrong host or port"
	ReasonUntrustedChain Reason = "untrusted chain"
	ReasonWrongName      Reason = "wrong name"
	ReasonRevoked        Reason = "revoked certificate"
	ReasonOther          Reason = "Z-data error"
)

// Sentinel errors. Each maps to one Reason through ReasonOf.
var (
	// ErrNotZTLS: the TXT record's first string is not v=ztls1; such
	// records are other data sharing the name and are ignored.
	ErrNotZTLS = errors.New("zdata: not a ztls1 record")
	// ErrExpired: the current time is past not-after.
	ErrExpired = errors.New("zdata: expired")
	// ErrNotYetValid: the current time is more than 60 s before not-before.
	ErrNotYetValid = errors.New("zdata: not yet valid")
	// ErrWindowTooLong: not-after is more than one hour after not-before
	// (or before it).
	ErrWindowTooLong = errors.New("zdata: validity window longer than 1h or reversed")
	// ErrBadSignature: the signature does not verify with the leaf's key.
	ErrBadSignature = errors.New("zdata: bad signature")
	// ErrUnknownScheme: the signature scheme is not one ztls v1 allows.
	ErrUnknownScheme = errors.New("zdata: unknown signature scheme")
	// ErrUnknownGroup: the key share group is not x25519 or secp256r1.
	ErrUnknownGroup = errors.New("zdata: unknown group")
	// ErrInvalidShare: the key share is not a valid public value.
	ErrInvalidShare = errors.New("zdata: invalid key share")
)

// Error is a Z-data failure with the fallback reason it stands for.
type Error struct {
	Reason Reason
	Err    error
}

// Error formats the reason and the cause.
func (e *Error) Error() string {
	if e.Err == nil {
		return "zdata: " + string(e.Reason)
	}
	// A cause that is itself a Z-data error for the same reason does
	// not say it again.
	cause := strings.TrimPrefix(trimPrefix(e.Err.Error()), string(e.Reason)+": ")
	return fmt.Sprintf("zdata: %s: %s", e.Reason, cause)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

func trimPrefix(s string) string {
	const p = "zdata: "
	if len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func reasonErr(r Reason, err error) error {
	if e, ok := err.(*Error); ok && e.Reason == r {
		return err // already says it
	}
	return &Error{Reason: r, Err: err}
}

// ReasonText is err as a connection report's fallback reason: its Reason,
// then what went wrong, each said once ("no Z-data: no ztls1 TXT record
// for _443._ztls.www.example.com"), without the package prefix that
// err.Error() carries. It is "" for nil.
func ReasonText(err error) string {
	if err == nil {
		return ""
	}
	r := string(ReasonOf(err))
	msg := err.Error()
	for {
		s := strings.TrimPrefix(strings.TrimPrefix(msg, "zdata: "), r+": ")
		if s == msg {
			break
		}
		msg = s
	}
	if msg == "" || msg == r {
		return r
	}
	return r + ": " + msg
}

// ReasonOf returns the fallback reason err stands for: ReasonNone for nil,
// the Reason of an *Error in err's chain, the reason of a sentinel error,
// and ReasonOther for anything else.
func ReasonOf(err error) Reason {
	if err == nil {
		return ReasonNone
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	switch {
	case errors.Is(err, ErrNotZTLS):
		return ReasonNoZData
	case errors.Is(err, ErrExpired):
		return ReasonExpired
	case errors.Is(err, ErrNotYetValid):
		return ReasonNotYetValid
	case errors.Is(err, ErrWindowTooLong):
		return ReasonWindowTooLong
	case errors.Is(err, ErrBadSignature):
		return ReasonBadSignature
	case errors.Is(err, ErrUnknownScheme):
		return ReasonUnknownScheme
	case errors.Is(err, ErrUnknownGroup):
		return ReasonUnknownGroup
	case errors.Is(err, ErrInvalidShare):
		return ReasonInvalidShare
	}
	return ReasonOther
}
