package ztlshttp

import (
	"bytes"
	"encoding/binary"
	"slices"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// What an HTTP/2 client sends early: the connection preface (RFC 9113,
// Section 3.4: the magic string, then SETTINGS), frames that only set
// the connection up, and the HEADERS of one request that ends there
// (END_STREAM), whole, with an idempotent method. A request with a body
// (its DATA frames) or a second request is sent after the handshake.

// h2Verdict says what to do with what an HTTP/2 client wrote so far.
type h2Verdict int

const (
	h2NeedMore h2Verdict = iota // a prefix of an early request: wait
	h2Whole                     // one whole idempotent request: send early
	h2NotEarly                  // anything else: send after the handshake
)

// maxEarlyH2 bounds what is held waiting for a whole request.
const maxEarlyH2 = 16 << 10

// frame header (RFC 9113, Section 4.1): Length (24), Type (8), Flags (8),
// Reserved (1), Stream Identifier (31).
const h2FrameHeaderLen = 9

type h2Header struct {
	length uint32
	typ    http2.FrameType
	flags  http2.Flags
	stream uint32
}

func parseH2Header(b []byte) h2Header {
	return h2Header{
		length: uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		typ:    http2.FrameType(b[3]),
		flags:  http2.Flags(b[4]),
		stream: binary.BigEndian.Uint32(b[5:9]) & (1<<31 - 1),
	}
}

// h2Early judges b, everything the client wrote before the connection
// opened.
func h2Early(b []byte) h2Verdict {
	if len(b) > maxEarlyH2 {
		return h2NotEarly
	}
	preface := []byte(http2.ClientPreface)
	if len(b) < len(preface) {
		if bytes.HasPrefix(preface, b) {
			return h2NeedMore
		}
		return h2NotEarly
	}
	if !bytes.HasPrefix(b, preface) {
		return h2NotEarly
	}
	b = b[len(preface):]
	var block []byte // the request's header block so far
	var stream uint32
	endStream := false
	for len(b) > 0 {
		if len(b) < h2FrameHeaderLen {
			return h2NeedMore
		}
		h := parseH2Header(b)
		if len(b) < h2FrameHeaderLen+int(h.length) {
			return h2NeedMore
		}
		payload := b[h2FrameHeaderLen : h2FrameHeaderLen+int(h.length)]
		b = b[h2FrameHeaderLen+int(h.length):]
		switch {
		case stream == 0 && (h.typ == http2.FrameSettings || h.typ == http2.FrameWindowUpdate) && h.stream == 0:
			// Connection set-up.
		case stream == 0 && h.typ == http2.FrameHeaders && h.stream != 0:
			frag, ok := headersFragment(h, payload)
			if !ok {
				return h2NotEarly
			}
			stream, endStream = h.stream, h.flags.Has(http2.FlagHeadersEndStream)
			block = append(block, frag...)
			if h.flags.Has(http2.FlagHeadersEndHeaders) {
				return wholeRequest(block, endStream, b)
			}
		case stream != 0 && h.typ == http2.FrameContinuation && h.stream == stream:
			block = append(block, payload...)
			if h.flags.Has(http2.FlagContinuationEndHeaders) {
				return wholeRequest(block, endStream, b)
			}
		default:
			return h2NotEarly
		}
	}
	return h2NeedMore
}

// wholeRequest: the header block is complete; the request goes early if
// it has no body, its method is idempotent, and nothing follows it.
func wholeRequest(block []byte, endStream bool, rest []byte) h2Verdict {
	if !endStream || len(rest) > 0 {
		return h2NotEarly
	}
	// The first header block of the connection: a fresh decoder has the
	// encoder's (empty) dynamic table.
	fields, err := hpack.NewDecoder(4096, nil).DecodeFull(block)
	if err != nil {
		return h2NotEarly
	}
	for _, f := range fields {
		if f.Name == ":method" {
			if slices.Contains(idempotentMethods, f.Value) {
				return h2Whole
			}
			return h2NotEarly
		}
	}
	return h2NotEarly
}

// headersFragment is a HEADERS frame's header block fragment (RFC 9113,
// Section 6.2: [Pad Length], [Exclusive, Stream Dependency, Weight],
// Field Block Fragment, Padding).
func headersFragment(h h2Header, p []byte) ([]byte, bool) {
	pad := 0
	if h.flags.Has(http2.FlagHeadersPadded) {
		if len(p) < 1 {
			return nil, false
		}
		pad, p = int(p[0]), p[1:]
	}
	if h.flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			return nil, false
		}
		p = p[5:]
	}
	if pad > len(p) {
		return nil, false
	}
	return p[:len(p)-pad], true
}
