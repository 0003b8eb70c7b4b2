package wire

// EncryptedExtensions is the EncryptedExtensions message (RFC 8446,
// Section 4.3.1): Extension extensions<0..2^16-1>. Known extensions that
// do not belong here fail to parse with illegal_parameter; unknown ones
// land in Extra.
type EncryptedExtensions struct {
	// Raw is exactly the bytes ParseEncryptedExtensions read, header included.
	Raw []byte
	// ServerName says the server acknowledged server_name with an empty
	// extension (RFC 6066, Section 3).
	ServerName bool
	// ALPN is the selected protocol (RFC 7301, Section 3.1): a
	// ProtocolNameList of exactly one name; "" means absent.
	ALPN string
	// EarlyData says early_data is present: the server accepted 0-RTT
	// (RFC 8446, Section 4.2.10).
	EarlyData bool
	// RecordSizeLimit is record_size_limit (RFC 8449, Section 4); 0 means absent.
	RecordSizeLimit uint16
	// SupportedGroups is the server's group preference (RFC 8446,
	// Section 4.2.7), NamedGroup named_group_list<2..2^16-1>; optional.
	SupportedGroups []uint16
	// Extra holds unknown extensions, opaque.
	Extra []Extension
	// Order lists extension types in wire order; ParseEncryptedExtensions
	// fills it. When nil, Marshal writes server_name, supported_groups, ALPN,
	// record_size_limit, early_data, then Extra. When set, see ClientHello.Order.
	Order []uint16
}

// ParseEncryptedExtensions parses a whole EncryptedExtensions message, header included.
func ParseEncryptedExtensions(msg []byte) (*EncryptedExtensions, error) {
	const name = "EncryptedExtensions"
	raw, s, err := readHeader(msg, TypeEncryptedExtensions, name)
	if err != nil {
		return nil, err
	}
	m := &EncryptedExtensions{Raw: raw}
	exts, order, err := readLastExtensions(&s, name, inEE)
	if err != nil {
		return nil, err
	}
	m.Order = order
	for _, e := range exts {
		switch e.Type {
		case ExtServerName:
			err = readEmpty(e.Data, name+": server_name")
			m.ServerName = true
		case ExtALPN:
			var names []string
			names, err = readALPNList(e.Data, name)
			if err == nil && len(names) != 1 {
				err = illegalErr("%s: ALPN selects %d protocols", name, len(names))
			}
			if err == nil {
				m.ALPN = names[0]
			}
		case ExtEarlyData:
			err = readEmpty(e.Data, name+": early_data")
			m.EarlyData = true
		case ExtRecordSizeLimit:
			m.RecordSizeLimit, err = readRecordSizeLimit(e.Data, name)
		case ExtSupportedGroups:
			m.SupportedGroups, err = readUint16Vector(e.Data, name+": supported_groups")
		default:
			m.Extra = append(m.Extra, e)
		}
		if err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Marshal encodes the EncryptedExtensions message, header included.
func (m *EncryptedExtensions) Marshal() ([]byte, error) {
	const name = "EncryptedExtensions"
	var t []extBody
	add := func(typ uint16, w func(b *Builder)) { t = append(t, extBody{typ, w}) }
	if m.ServerName {
		add(ExtServerName, func(*Builder) {})
	}
	if len(m.SupportedGroups) > 0 {
		add(ExtSupportedGroups, func(b *Builder) { addUint16Vector(b, m.SupportedGroups) })
	}
	if m.ALPN != "" {
		add(ExtALPN, func(b *Builder) { addALPNList(b, []string{m.ALPN}, name) })
	}
	if m.RecordSizeLimit != 0 {
		add(ExtRecordSizeLimit, func(b *Builder) { b.AddUint16(m.RecordSizeLimit) })
	}
	if m.EarlyData {
		add(ExtEarlyData, func(*Builder) {})
	}
	exts, err := arrangeExtensions(name, t, len(t), m.Extra, m.Order)
	if err != nil {
		return nil, err
	}
	return marshalMsg(TypeEncryptedExtensions, name, func(b *Builder) {
		addExtensions(b, exts)
	})
}
