// Package record is the TLS 1.3 record layer of RFC 8446, Section 5:
// splitting the byte stream into records (Deframer), protecting and
// deprotecting records with a traffic secret (HalfConn), and writing the
// few records sent in the clear (AppendPlain).
//
// Receiving: write what the transport delivered into a Deframer, then take
// records until none is complete:
//
//	d.Write(p)
//	for {
//		typ, payload, ok, err := d.Next()
//		if err != nil { /* send the alert in err.(*alert.Error).Alert */ }
//		if !ok { break }
//		if typ == record.TypeApplicationData && in != nil {
//			inner, plain, err := in.Open(payload, record.MaxPlaintext)
//			...
//		}
//	}
//
// Sending: out, err = hc.Seal(out, record.TypeHandshake, msg, 0).
//
// Errors are *alert.Error (package tls13/internal/alert) and carry the alert the caller must send. Payloads and
// plaintexts returned by Next and Open alias the Deframer's buffer and are
// valid until the next call into it; once the buffers have grown to their
// working size nothing here allocates. Neither type is safe for concurrent
// use; a connection has one HalfConn per direction.
package record
