package turbo

import "strconv"

// Fallback reasons: the text of a Miss, and of ClientResult.FallbackReason.
const (
	ReasonUDPTimeout    = "UDP flight incomplete when the wait after TCP connect ran out"
	ReasonUDPError      = "UDP unusable"
	ReasonFlightRefused = "the server's UDP flight failed the handshake"
	ReasonFlightAborted = "the server answered the ClientHello sent over UDP with an alert"
)

// MissKind says why the server's first flight did not finish the
// handshake over UDP.
type MissKind uint8

const (
	// MissUDPError: the UDP socket failed. It could not be opened, a
	// write or a read failed (the ICMP port unreachable of a port nobody
	// listens on among the causes), or the flight's fragments did not
	// fit together.
	MissUDPError MissKind = iota + 1
	// MissTimeout: the wait after TCP connected ran out before any of the
	// flight came.
	MissTimeout
	// MissIncomplete: the wait ran out with part of the flight in hand
	// (a response datagram lost, or the server's flight larger than the
	// datagrams the client asked for, and the top-up's round trip longer
	// than the wait).
	MissIncomplete
	// MissRefused: the flight came whole and failed the handshake.
	MissRefused
	// MissAborted: the flight came whole and is an alert, before any
	// ServerHello: the server aborted on the ClientHello, as servers that
	// don't know ztls may (docs/ztls-spec.md, Section 6).
	MissAborted
)

var missNames = [...]string{
	MissUDPError:   "udp_error",
	MissTimeout:    "timeout",
	MissIncomplete: "incomplete",
	MissRefused:    "refused",
	MissAborted:    "aborted",
}

func (k MissKind) String() string {
	if int(k) < len(missNames) && missNames[k] != "" {
		return missNames[k]
	}
	return "MissKind(" + strconv.Itoa(int(k)) + ")"
}

// A Miss says why the server's first flight did not finish the handshake
// over UDP (Outcome.Miss); the handshake is then the caller's to run over
// TCP. Its Error is the reason a report gives: one of the Reason
// constants, with Err's text after a colon where it has one.
type Miss struct {
	Kind MissKind
	// Err is the cause: the socket's error (MissUDPError), the client
	// engine's (MissRefused, MissAborted); nil for a wait that ran out.
	Err error
}

func (m *Miss) Error() string {
	var reason string
	switch m.Kind {
	case MissTimeout, MissIncomplete:
		return ReasonUDPTimeout
	case MissRefused:
		reason = ReasonFlightRefused
	case MissAborted:
		reason = ReasonFlightAborted
	default:
		reason = ReasonUDPError
	}
	if m.Err == nil {
		return reason
	}
	return reason + ": " + m.Err.Error()
}

// Unwrap returns Err.
func (m *Miss) Unwrap() error { return m.Err }
