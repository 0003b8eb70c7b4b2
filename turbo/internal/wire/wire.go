// Package wire is TurboTLS's datagram layer (docs/turbotls-spec.md): the
// datagram and link record formats, their parsers, the fragmentation of a
// flight into datagrams and its reassembly. Package turbo is its only user.
package wire

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// The bytes on the wire (docs/turbotls-spec.md). Every UDP datagram, in
// both directions, is
//
//	uint8  type;             // TypeRequest (client) or TypeResponse (server)
//	opaque conn_id[12];      // chosen at random by the client
//	uint24 flight_length;    // total bytes of the sender's flight
//	uint24 offset;           // where this fragment starts in the flight
//	uint16 fragment_length;
//	opaque fragment[fragment_length];
//	opaque padding[];        // requests only: all zero, to the datagram's end
//
// A request with fragment_length 0 carries no flight bytes: it only buys
// the server room for one more response datagram (request-based
// fragmentation). The TCP connection of a TurboTLS handshake starts with a
// link record shaped as a TLS record of an unassigned content type, so a
// stream parser can always frame (and strip) it:
//
//	uint8  content_type = 0xCC; uint16 legacy_version = 0x0303;
//	uint16 length = 13; uint8 link_version = 1; opaque conn_id[12];

// Datagram types.
const (
	TypeRequest  = 0x01 // client to server
	TypeResponse = 0x02 // server to client
)

const (
	// MaxDatagram is the largest datagram either side sends (the minimum
	// path MTU QUIC assumes, RFC 9000, Section 14).
	MaxDatagram = 1200
	// HeaderLen is the size of the datagram header.
	HeaderLen = 1 + IDLen + 3 + 3 + 2
	// MaxFragment is the most flight bytes one datagram carries.
	MaxFragment = MaxDatagram - HeaderLen
	// IDLen is the length of a connection id.
	IDLen = 12
	// LinkLen is the length of the link record.
	LinkLen = 5 + 1 + IDLen
	// LinkContentType is the link record's TLS content type: not assigned
	// by IANA; a private choice of this protocol.
	LinkContentType = 0xCC
	// MaxFlight is the longest flight the uint24 flight_length can say.
	MaxFlight   = 1<<24 - 1
	linkVersion = 1
)

// ConnID names one TurboTLS handshake; the client picks it at random.
type ConnID [IDLen]byte

// NewConnID returns a random connection id.
func NewConnID() (ConnID, error) {
	var id ConnID
	if _, err := rand.Read(id[:]); err != nil {
		return id, fmt.Errorf("turbo: connection id: %w", err)
	}
	return id, nil
}

// String is the id in hex.
func (id ConnID) String() string { return hex.EncodeToString(id[:]) }

// Datagram is one parsed datagram. Fragment aliases the parsed buffer.
type Datagram struct {
	Type         uint8
	ID           ConnID
	FlightLength int
	Offset       int
	Fragment     []byte
	Padding      int // zero bytes after the fragment (requests only)
}

// Errors of the datagram parser.
var (
	ErrShortDatagram = errors.New("turbo: datagram shorter than its header")
	ErrBadType       = errors.New("turbo: unknown datagram type")
	ErrBadFragment   = errors.New("turbo: fragment outside the flight")
	ErrBadPadding    = errors.New("turbo: non-zero padding")
	ErrTooLong       = errors.New("turbo: datagram longer than 1200 bytes")
	ErrTrailing      = errors.New("turbo: bytes after the fragment of a response")
)

// ParseDatagram parses b. It never keeps b beyond the returned Fragment.
func ParseDatagram(b []byte) (Datagram, error) {
	var d Datagram
	if len(b) > MaxDatagram {
		return d, ErrTooLong
	}
	if len(b) < HeaderLen {
		return d, ErrShortDatagram
	}
	d.Type = b[0]
	if d.Type != TypeRequest && d.Type != TypeResponse {
		return d, ErrBadType
	}
	copy(d.ID[:], b[1:1+IDLen])
	p := b[1+IDLen:]
	d.FlightLength = int(p[0])<<16 | int(p[1])<<8 | int(p[2])
	d.Offset = int(p[3])<<16 | int(p[4])<<8 | int(p[5])
	n := int(p[6])<<8 | int(p[7])
	rest := p[8:]
	if n > len(rest) || d.Offset+n > d.FlightLength || d.FlightLength == 0 {
		return d, ErrBadFragment
	}
	if n == 0 && d.Offset != 0 {
		return d, ErrBadFragment
	}
	if n == 0 && d.Type == TypeResponse {
		return d, ErrBadFragment // responses always carry flight bytes
	}
	d.Fragment = rest[:n]
	pad := rest[n:]
	if d.Type == TypeResponse && len(pad) > 0 {
		return d, ErrTrailing
	}
	for _, c := range pad {
		if c != 0 {
			return d, ErrBadPadding
		}
	}
	d.Padding = len(pad)
	return d, nil
}

// Errors of CheckOpening.
var (
	ErrNotPadded  = errors.New("turbo: a request opening a handshake must be padded to 1200 bytes")
	ErrNotOpening = errors.New("turbo: a request opening a handshake must start a ClientHello flight")
)

// TLS codepoints an opening request is checked against.
const (
	recordHandshake     = 22 // RFC 8446, Section 5.1: ContentType handshake
	handshakeHello      = 1  // RFC 8446, Section 4: HandshakeType client_hello
	maxRecordPlaintext  = 1 << 14
	minClientHelloBody  = 2 + 32 + 1 + 2 + 2 + 1 + 1 + 2 // version, random, the vectors at their least
	openingPrefixLength = 5 + 4 + 2                      // record and handshake headers, legacy_version
)

// CheckOpening reports whether request d, n bytes long as received, may
// open a server's table entry (docs/turbotls-spec.md, Section 2): it must
// be padded to MaxDatagram bytes, as QUIC requires of a datagram carrying
// an Initial packet (RFC 9000, Section 14.1), so that a spoofer pays for
// the state it makes in bytes; and its fragment must start the flight
// with a ClientHello:
//
//	// RFC 8446, Section 5.1: TLSPlaintext
//	ContentType type = handshake(22); ProtocolVersion legacy_record_version = 0x0301 or 0x0303;
//	uint16 length;  // 1..2^14, within the flight
//	// RFC 8446, Section 4: Handshake
//	HandshakeType msg_type = client_hello(1); uint24 length;  // within the flight
//	// RFC 8446, Section 4.1.2: ClientHello
//	ProtocolVersion legacy_version = 0x0303;
//
// Requests for an entry that exists are not held to it.
func CheckOpening(d Datagram, n int) error {
	if d.Type != TypeRequest {
		return ErrBadType
	}
	if n != MaxDatagram {
		return ErrNotPadded
	}
	f := d.Fragment
	if d.Offset != 0 || len(f) < openingPrefixLength {
		return ErrNotOpening
	}
	recordLen := int(f[3])<<8 | int(f[4])
	helloLen := int(f[6])<<16 | int(f[7])<<8 | int(f[8])
	switch {
	case f[0] != recordHandshake || f[1] != 3 || (f[2] != 1 && f[2] != 3):
		return fmt.Errorf("%w: no handshake record", ErrNotOpening)
	case recordLen == 0 || recordLen > maxRecordPlaintext || 5+recordLen > d.FlightLength:
		return fmt.Errorf("%w: record length %d in a flight of %d bytes", ErrNotOpening, recordLen, d.FlightLength)
	case f[5] != handshakeHello:
		return fmt.Errorf("%w: handshake message %d", ErrNotOpening, f[5])
	case helloLen < minClientHelloBody || 5+4+helloLen > d.FlightLength:
		return fmt.Errorf("%w: ClientHello length %d in a flight of %d bytes", ErrNotOpening, helloLen, d.FlightLength)
	case f[9] != 3 || f[10] != 3:
		return fmt.Errorf("%w: legacy_version %#02x%02x", ErrNotOpening, f[9], f[10])
	}
	return nil
}

// AppendDatagram appends d's encoding, padded with zeros to padTo bytes
// (requests only; 0 means no padding).
func AppendDatagram(b []byte, d Datagram, padTo int) ([]byte, error) {
	if d.Type != TypeRequest && d.Type != TypeResponse {
		return b, ErrBadType
	}
	n := len(d.Fragment)
	if d.FlightLength <= 0 || d.FlightLength > MaxFlight || d.Offset < 0 || d.Offset+n > d.FlightLength ||
		n > MaxFragment || (n == 0 && (d.Offset != 0 || d.Type == TypeResponse)) {
		return b, ErrBadFragment
	}
	if d.Type == TypeResponse && padTo > 0 {
		return b, errors.New("turbo: responses are not padded")
	}
	start := len(b)
	b = append(b, d.Type)
	b = append(b, d.ID[:]...)
	b = append(b, byte(d.FlightLength>>16), byte(d.FlightLength>>8), byte(d.FlightLength))
	b = append(b, byte(d.Offset>>16), byte(d.Offset>>8), byte(d.Offset))
	b = append(b, byte(n>>8), byte(n))
	b = append(b, d.Fragment...)
	if padTo > MaxDatagram {
		padTo = MaxDatagram
	}
	for len(b)-start < padTo {
		b = append(b, 0)
	}
	return b, nil
}

// Fragment cuts flight into datagrams of type typ for id, each at most
// MaxDatagram bytes; requests are padded to MaxDatagram.
func Fragment(typ uint8, id ConnID, flight []byte) ([][]byte, error) {
	if len(flight) == 0 || len(flight) > MaxFlight {
		return nil, fmt.Errorf("turbo: flight of %d bytes cannot be sent", len(flight))
	}
	pad := 0
	if typ == TypeRequest {
		pad = MaxDatagram
	}
	var out [][]byte
	for off := 0; off < len(flight); off += MaxFragment {
		end := min(off+MaxFragment, len(flight))
		d, err := AppendDatagram(make([]byte, 0, MaxDatagram), Datagram{Type: typ, ID: id, FlightLength: len(flight), Offset: off, Fragment: flight[off:end]}, pad)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// PaddingRequest is a request datagram without flight bytes: it only
// lets the server send one more response datagram.
func PaddingRequest(id ConnID, flightLength int) []byte {
	b, _ := AppendDatagram(make([]byte, 0, MaxDatagram), Datagram{Type: TypeRequest, ID: id, FlightLength: flightLength}, MaxDatagram)
	return b
}

// DatagramsFor is how many datagrams a flight of n bytes needs.
func DatagramsFor(n int) int { return (n + MaxFragment - 1) / MaxFragment }

// AppendLink appends the link record for id.
func AppendLink(b []byte, id ConnID) []byte {
	b = append(b, LinkContentType, 0x03, 0x03, 0, 1+IDLen, linkVersion)
	return append(b, id[:]...)
}

// Errors of the link record parser.
var (
	ErrNotLink     = errors.New("turbo: not a link record")
	ErrBadLink     = errors.New("turbo: malformed link record")
	ErrShortLink   = errors.New("turbo: link record truncated")
	ErrLinkVersion = errors.New("turbo: unknown link record version")
)

// ParseLink parses a link record at the start of b. ErrNotLink means b
// starts with something else (a TLS record: plain TLS over TCP).
func ParseLink(b []byte) (ConnID, error) {
	var id ConnID
	if len(b) == 0 {
		return id, ErrShortLink
	}
	if b[0] != LinkContentType {
		return id, ErrNotLink
	}
	if len(b) < LinkLen {
		return id, ErrShortLink
	}
	if b[1] != 0x03 || b[2] != 0x03 || b[3] != 0 || b[4] != 1+IDLen {
		return id, ErrBadLink
	}
	if b[5] != linkVersion {
		return id, ErrLinkVersion
	}
	copy(id[:], b[6:LinkLen])
	return id, nil
}
