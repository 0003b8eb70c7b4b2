// Package dnsstream frames DNS messages on stream transports: TCP
// (RFC 1035, Section 4.2.2; RFC 7766) and DNS over TLS (RFC 7858).
//
// Each message on a stream is preceded by its length as a two-byte
// big-endian integer. The helpers here own that framing and nothing else,
// so the resolver and the authoritative server share one implementation.
//
// Writing: build the frame in one buffer and write it with one call, so
// concurrent writers holding a lock never interleave half frames:
//
//	frame, err := dnsstream.AppendFrame(nil, packed)
//	if err != nil { ... }
//	_, err = conn.Write(frame)
//
// Reading: reuse one buffer of MaxMessageSize bytes per connection; the
// returned slice aliases it and is valid until the next call:
//
//	buf := make([]byte, dnsstream.MaxMessageSize)
//	for {
//		msg, err := dnsstream.ReadFrame(conn, buf)
//		if err != nil { ... } // io.EOF: the peer closed between frames
//		handle(msg)
//	}
//
// ReadFrame refuses a frame larger than its buffer with ErrFrameTooLarge
// without reading the body, so a peer announcing a giant length costs two
// bytes, not a 64 KiB allocation; a caller with a small buffer thereby sets
// its own maximum message size.
package dnsstream
