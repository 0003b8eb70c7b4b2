package record

import (
	"slices"

	"github.com/ztls-project/ztls/tls13/internal/alert"
)

// Deframer splits a received byte stream into records, RFC 8446,
// Section 5.1. The zero value is ready to use.
//
// It checks each header as soon as its five bytes arrive: a content type
// other than the four of TLS 1.3 is an unexpected_message (RFC 8446,
// Section 5), once Protected is set an application_data record (a
// TLSCiphertext) whose legacy_record_version is not 0x0303 a decode_error
// (every other record's version is ignored); a length over MaxCiphertext, or over
// MaxPlaintext for the types that TLS 1.3 never protects (handshake, alert,
// change_cipher_spec), is a record_overflow. Errors are sticky: after one,
// Next keeps returning it and Write discards its input.
//
// The buffer holds at most the records written but not yet taken with Next;
// a caller that calls Next until it reports no complete record after every
// Write keeps it below one record plus one Write. Consumed bytes are
// reclaimed on the next Write, so steady-state use does not allocate.
type Deframer struct {
	// Protected says the reader has a key, so application_data records are
	// TLSCiphertext and their legacy_record_version is checked. Before any
	// key an application_data record is a TLSPlaintext, whose version
	// RFC 8446, Appendix D says to ignore: the caller refuses the record
	// itself (unexpected_message, Section 5), not its header.
	Protected bool

	buf   []byte // buf[start:] is unconsumed
	start int
	err   *alert.Error
}

// Write appends bytes received from the transport; p is copied.
func (d *Deframer) Write(p []byte) {
	if d.err != nil || len(p) == 0 {
		return
	}
	if d.start > 0 {
		// Reclaim the records already returned. This invalidates the
		// payload of the last Next, as documented.
		n := copy(d.buf, d.buf[d.start:])
		d.buf = d.buf[:n]
		d.start = 0
	}
	d.buf = append(d.buf, p...)
}

// Space returns free room of at least n bytes after the buffered bytes,
// for a caller that reads from the transport straight into the Deframer
// instead of handing Write a copy; Commit then adds what was read. Like
// Write, it invalidates the payload of the last Next. It returns nil after
// an error.
func (d *Deframer) Space(n int) []byte {
	if d.err != nil {
		return nil
	}
	if d.start > 0 {
		m := copy(d.buf, d.buf[d.start:])
		d.buf = d.buf[:m]
		d.start = 0
	}
	d.buf = slices.Grow(d.buf, n)
	return d.buf[len(d.buf):cap(d.buf)]
}

// Commit adds the first k bytes of the room Space returned to the
// buffered bytes, as Write would have added them.
func (d *Deframer) Commit(k int) {
	if d.err != nil || k <= 0 {
		return
	}
	d.buf = d.buf[:len(d.buf)+k]
}

// Release drops the buffer when every record in it was returned, so that
// an idle connection holds none; the next Write starts a new one.
func (d *Deframer) Release() {
	if d.start == len(d.buf) {
		d.buf, d.start = nil, 0
	}
}

// Ready reports whether a complete record is buffered, for a caller that
// left records behind to come back for them.
func (d *Deframer) Ready() bool {
	if d.err != nil {
		return false
	}
	avail := d.buf[d.start:]
	return len(avail) >= HeaderLen && len(avail) >= HeaderLen+(int(avail[3])<<8|int(avail[4]))
}

// Buffered returns the number of received bytes not yet returned by Next.
func (d *Deframer) Buffered() int { return len(d.buf) - d.start }

// Missing returns how many more bytes complete the first record not yet
// returned: 0 when it is complete or nothing is buffered; while its header
// is incomplete, the rest of the header and of the largest record.
func (d *Deframer) Missing() int {
	avail := d.buf[d.start:]
	switch {
	case len(avail) == 0:
		return 0
	case len(avail) < HeaderLen:
		return HeaderLen + MaxCiphertext - len(avail)
	}
	return max(0, HeaderLen+(int(avail[3])<<8|int(avail[4]))-len(avail))
}

// Fit moves the unreturned bytes into a buffer with room for n more when
// the one they are in is more than twice that size: a connection that
// waits for the rest of a record then holds no more than the record. Like
// Space, it invalidates the payload of the last Next.
func (d *Deframer) Fit(n int) {
	if d.err != nil {
		return
	}
	need := d.Buffered() + n
	if cap(d.buf) <= 2*need {
		return
	}
	buf := make([]byte, d.Buffered(), need)
	copy(buf, d.buf[d.start:])
	clear(d.buf[:cap(d.buf)]) // decrypted payloads of returned records too
	d.buf, d.start = buf, 0
}

// Next returns the next complete record: its content type and fragment.
// ok is false when no complete record is buffered yet. payload aliases the
// Deframer's buffer and stays valid until the next call to Write or Space
// (Next, Release and a failure leave the bytes of returned records where
// they are); the caller may decrypt it in place. err is a *alert.Error
// carrying the alert to send.
func (d *Deframer) Next() (typ ContentType, payload []byte, ok bool, err error) {
	if d.err != nil {
		return 0, nil, false, d.err
	}
	avail := d.buf[d.start:]
	if len(avail) < HeaderLen {
		if len(avail) > 0 {
			// Reject a bad type or version without waiting for the rest.
			if e := checkHeader(avail, d.Protected); e != nil {
				d.fail(e)
				return 0, nil, false, e
			}
		}
		return 0, nil, false, nil
	}
	if e := checkHeader(avail, d.Protected); e != nil {
		d.fail(e)
		return 0, nil, false, e
	}
	n := int(avail[3])<<8 | int(avail[4])
	if len(avail) < HeaderLen+n {
		return 0, nil, false, nil
	}
	d.start += HeaderLen + n
	if d.start == len(d.buf) {
		// Everything consumed: the next Write starts at the front without
		// copying. The returned payload still points into these bytes
		// until then.
		d.buf, d.start = d.buf[:0], 0
	}
	return ContentType(avail[0]), avail[HeaderLen : HeaderLen+n : HeaderLen+n], true, nil
}

func (d *Deframer) fail(e *alert.Error) {
	d.err = e
	clear(d.buf[d.start:]) // not the records returned: their payloads stay valid
	d.buf, d.start = nil, 0
}

var (
	errBadType    = alert.New(alert.UnexpectedMessage, "record has an unknown content type")
	errBadVersion = alert.New(alert.DecodeError, "protected record has a legacy_record_version other than 0x0303")
)

// checkHeader validates the bytes of a record header that have arrived
// (one to five); protected: the reader has a key.
func checkHeader(h []byte, protected bool) *alert.Error {
	typ := ContentType(h[0])
	switch typ {
	case TypeChangeCipherSpec, TypeAlert, TypeHandshake, TypeApplicationData:
	default:
		return errBadType
	}
	// RFC 8446, Section 5.1 and Appendix D: an unprotected record's
	// legacy_record_version "MUST be ignored", whatever its value. A
	// protected record's (TLSCiphertext: once there is a key, every
	// application_data record) is always 0x0303 (Section 5.2) and is part
	// of the additional data, which HalfConn.Open builds with 0x0303:
	// Appendix D lets it be validated, so it is, as OpenSSL does
	// (decode_error). Before any key nothing is protected, so an
	// application_data record's version is ignored like the others'.
	if protected && typ == TypeApplicationData && (len(h) >= 2 && h[1] != 3 || len(h) >= 3 && h[2] != 3) {
		return errBadVersion
	}
	if len(h) < HeaderLen {
		return nil
	}
	n := int(h[3])<<8 | int(h[4])
	if n > MaxCiphertext {
		return alert.Errorf(alert.RecordOverflow, "record length %d exceeds %d", n, MaxCiphertext)
	}
	if typ != TypeApplicationData && n > MaxPlaintext {
		// Only application_data records can be protected in TLS 1.3.
		return alert.Errorf(alert.RecordOverflow, "%v record length %d exceeds %d", typ, n, MaxPlaintext)
	}
	return nil
}
