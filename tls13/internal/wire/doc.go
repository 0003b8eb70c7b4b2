// Package wire encodes and decodes TLS 1.3 handshake messages (RFC 8446,
// Section 4) and the ztls extension (docs/ztls-spec.md, Section 2).
//
// Every message type has a Marshal method that returns the whole handshake
// message, 4-byte header included, and a ParseXxx function that takes the
// whole message and keeps exactly those bytes in Raw, so the transcript hash
// is always fed the bytes that crossed the wire:
//
//	msg, err := (&wire.Finished{VerifyData: vd}).Marshal()
//	...
//	fin, err := wire.ParseFinished(msg) // fin.Raw == msg
//
// Parsers are strict. Truncated, overlong or trailing bytes are a
// decode_error; duplicate extensions, a known extension in a message it
// does not belong to, pre_shared_key or ztls anywhere but last, and other
// values that parse but are forbidden are an illegal_parameter. Every
// failure is an *alert.Error that names the alert to send:
//
//	if err != nil {
//		var ae *alert.Error
//		errors.As(err, &ae) // ae.Alert is the alert for the peer
//	}
//
// Extensions this package understands are typed fields; the rest are kept
// opaque in Extra. Order records the wire order of a parsed message's
// extensions, and Marshal honours it, so a parsed message re-marshals to
// the same bytes. Leave Order nil when building a message to get a
// canonical order.
//
// Records carry handshake messages in any split, so the engine feeds record
// payloads to a HandshakeBuffer and takes whole messages out:
//
//	var hb wire.HandshakeBuffer
//	hb.Write(payload)
//	for {
//		typ, msg, ok, err := hb.Next()
//		if err != nil || !ok {
//			break // err: send err's alert; !ok: wait for more records
//		}
//		v, err := wire.Parse(msg) // *wire.ServerHello, *wire.Finished, ...
//		_, _ = typ, v
//	}
//
// PSK and ztls binders sign a ClientHello truncated just before them. Marshal
// the ClientHello with placeholder binders of the final lengths, compute
// each binder over msg[:len(msg)-ch.BindersLen()], then patch them in with
// UpdateBinders (or UpdateZTLSBinder).
package wire
