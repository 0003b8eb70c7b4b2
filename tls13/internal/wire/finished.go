package wire

// Finished is the Finished message (RFC 8446, Section 4.4.4):
// opaque verify_data[Hash.length]. Parsing accepts any body length; the
// engine knows the hash and checks it.
type Finished struct {
	// Raw is exactly the bytes ParseFinished read, header included.
	Raw []byte
	// VerifyData is the whole body.
	VerifyData []byte
}

// ParseFinished parses a whole Finished message, header included.
func ParseFinished(msg []byte) (*Finished, error) {
	raw, s, err := readHeader(msg, TypeFinished, "Finished")
	if err != nil {
		return nil, err
	}
	return &Finished{Raw: raw, VerifyData: bytesOf(s)}, nil
}

// Marshal encodes the Finished message, header included.
func (m *Finished) Marshal() ([]byte, error) {
	return marshalMsg(TypeFinished, "Finished", func(b *Builder) {
		b.AddBytes(m.VerifyData)
	})
}

// EndOfEarlyData is the EndOfEarlyData message (RFC 8446, Section 4.5),
// whose body is empty.
type EndOfEarlyData struct {
	// Raw is exactly the bytes ParseEndOfEarlyData read, header included.
	Raw []byte
}

// ParseEndOfEarlyData parses a whole EndOfEarlyData message, header included.
func ParseEndOfEarlyData(msg []byte) (*EndOfEarlyData, error) {
	raw, s, err := readHeader(msg, TypeEndOfEarlyData, "EndOfEarlyData")
	if err != nil {
		return nil, err
	}
	if err := finish(s, "EndOfEarlyData"); err != nil {
		return nil, err
	}
	return &EndOfEarlyData{Raw: raw}, nil
}

// Marshal encodes the EndOfEarlyData message: its 4-byte header.
func (m *EndOfEarlyData) Marshal() ([]byte, error) {
	return marshalMsg(TypeEndOfEarlyData, "EndOfEarlyData", func(*Builder) {})
}

// KeyUpdate is the KeyUpdate message (RFC 8446, Section 4.6.3):
// KeyUpdateRequest request_update, update_not_requested(0) or
// update_requested(1); any other value is an illegal_parameter.
type KeyUpdate struct {
	// Raw is exactly the bytes ParseKeyUpdate read, header included.
	Raw []byte
	// UpdateRequested asks the peer to update its sending keys too.
	UpdateRequested bool
}

// ParseKeyUpdate parses a whole KeyUpdate message, header included.
func ParseKeyUpdate(msg []byte) (*KeyUpdate, error) {
	raw, s, err := readHeader(msg, TypeKeyUpdate, "KeyUpdate")
	if err != nil {
		return nil, err
	}
	var v uint8
	if !s.ReadUint8(&v) {
		return nil, decodeErr("KeyUpdate: empty")
	}
	if err := finish(s, "KeyUpdate"); err != nil {
		return nil, err
	}
	if v > 1 {
		return nil, illegalErr("KeyUpdate: request_update %d", v)
	}
	return &KeyUpdate{Raw: raw, UpdateRequested: v == 1}, nil
}

// Marshal encodes the KeyUpdate message, header included.
func (m *KeyUpdate) Marshal() ([]byte, error) {
	return marshalMsg(TypeKeyUpdate, "KeyUpdate", func(b *Builder) {
		if m.UpdateRequested {
			b.AddUint8(1)
		} else {
			b.AddUint8(0)
		}
	})
}
