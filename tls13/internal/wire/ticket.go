package wire

import (
	"golang.org/x/crypto/cryptobyte"
)

// NewSessionTicket is the NewSessionTicket message (RFC 8446, Section 4.6.1).
type NewSessionTicket struct {
	// Raw is exactly the bytes ParseNewSessionTicket read, header included.
	Raw []byte
	// Lifetime is uint32 ticket_lifetime, in seconds.
	Lifetime uint32
	// AgeAdd is uint32 ticket_age_add.
	AgeAdd uint32
	// Nonce is opaque ticket_nonce<0..255>.
	Nonce []byte
	// Ticket is opaque ticket<1..2^16-1>.
	Ticket []byte
	// MaxEarlyData is early_data's uint32 max_early_data_size
	// (RFC 8446, Section 4.2.10); HasEarlyData tells presence. Marshal also
	// writes it when MaxEarlyData is not 0.
	MaxEarlyData uint32
	HasEarlyData bool
	// Extra holds unknown extensions, opaque. Marshal writes early_data first.
	Extra []Extension
}

// ParseNewSessionTicket parses a whole NewSessionTicket message, header included.
func ParseNewSessionTicket(msg []byte) (*NewSessionTicket, error) {
	const name = "NewSessionTicket"
	raw, s, err := readHeader(msg, TypeNewSessionTicket, name)
	if err != nil {
		return nil, err
	}
	m := &NewSessionTicket{Raw: raw}
	var nonce, ticket cryptobyte.String
	if !s.ReadUint32(&m.Lifetime) || !s.ReadUint32(&m.AgeAdd) ||
		!s.ReadUint8LengthPrefixed(&nonce) || !s.ReadUint16LengthPrefixed(&ticket) {
		return nil, decodeErr("%s: truncated", name)
	}
	if ticket.Empty() {
		return nil, decodeErr("%s: empty ticket", name)
	}
	m.Nonce, m.Ticket = bytesOf(nonce), bytesOf(ticket)
	exts, err := readExtensions(&s, name, inNST)
	if err != nil {
		return nil, err
	}
	if err := finish(s, name); err != nil {
		return nil, err
	}
	for _, e := range exts {
		if e.Type != ExtEarlyData {
			m.Extra = append(m.Extra, e)
			continue
		}
		d := cryptobyte.String(e.Data)
		if !d.ReadUint32(&m.MaxEarlyData) || !d.Empty() {
			return nil, decodeErr("%s: malformed early_data", name)
		}
		m.HasEarlyData = true
	}
	return m, nil
}

// Marshal encodes the NewSessionTicket message, header included.
func (m *NewSessionTicket) Marshal() ([]byte, error) {
	const name = "NewSessionTicket"
	if len(m.Ticket) == 0 {
		return nil, internalErr("%s: empty ticket", name)
	}
	var t []extBody
	if m.HasEarlyData || m.MaxEarlyData != 0 {
		t = append(t, extBody{ExtEarlyData, func(b *Builder) { b.AddUint32(m.MaxEarlyData) }})
	}
	exts, err := arrangeExtensions(name, t, len(t), m.Extra, nil)
	if err != nil {
		return nil, err
	}
	return marshalMsg(TypeNewSessionTicket, name, func(b *Builder) {
		b.AddUint32(m.Lifetime)
		b.AddUint32(m.AgeAdd)
		b.AddUint8LengthPrefixed(func(b *Builder) { b.AddBytes(m.Nonce) })
		b.AddUint16LengthPrefixed(func(b *Builder) { b.AddBytes(m.Ticket) })
		addExtensions(b, exts)
	})
}
