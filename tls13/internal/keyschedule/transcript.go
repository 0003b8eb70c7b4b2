package keyschedule

import (
	"crypto"
	"hash"
)

// typeMessageHash is the handshake type of the synthetic message_hash
// message that replaces ClientHello1 after a HelloRetryRequest
// (RFC 8446, Section 4.4.1).
const typeMessageHash = 254

// Transcript is the running hash of the handshake messages,
// Transcript-Hash of RFC 8446, Section 4.4.1. Feed it every handshake
// message, header included, in the order sent or received, from the exact
// bytes on the wire.
//
// A Transcript made by NewPendingTranscript buffers messages until SetHash
// names the hash (the client learns it from the ServerHello). The zero value
// is a pending transcript. A Transcript is not safe for concurrent use.
type Transcript struct {
	hash  crypto.Hash
	state hash.Hash // nil while pending

	// While pending: the raw messages, and the offsets in buf at which
	// RestartWithMessageHash was called, applied when the hash is known.
	buf      []byte
	restarts []int
}

// NewTranscript returns an empty transcript hashing with h.
func NewTranscript(h crypto.Hash) *Transcript {
	t := new(Transcript)
	t.SetHash(h)
	return t
}

// NewPendingTranscript returns an empty transcript that buffers messages
// until SetHash is called.
func NewPendingTranscript() *Transcript { return new(Transcript) }

// Hash returns the transcript's hash, or zero while it is pending.
func (t *Transcript) Hash() crypto.Hash {
	if t.state == nil {
		return 0
	}
	return t.hash
}

// Pending reports whether the transcript is still waiting for SetHash.
func (t *Transcript) Pending() bool { return t.state == nil }

// SetHash fixes the hash of a pending transcript: the buffered messages
// (with any HelloRetryRequest rewrite asked for meanwhile) are hashed and the
// buffer released. It does nothing if the hash is already set or h is not
// linked into the binary (the transcript then stays pending).
func (t *Transcript) SetHash(h crypto.Hash) {
	if t.state != nil || !h.Available() {
		return
	}
	t.hash = h
	t.state = h.New()
	start := 0
	for _, r := range t.restarts {
		t.state.Write(t.buf[start:r])
		t.restart()
		start = r
	}
	t.state.Write(t.buf[start:])
	clear(t.buf) // the buffer held the first flight; no reason to keep it
	t.buf, t.restarts = nil, nil
}

// Write appends one handshake message (4-byte header and body) to the
// transcript. Write never fails.
func (t *Transcript) Write(msg []byte) {
	if t.state == nil {
		t.buf = append(t.buf, msg...)
		return
	}
	t.state.Write(msg)
}

// Sum returns the transcript hash of the messages written so far, without
// changing the transcript. It returns nil while the transcript is pending.
func (t *Transcript) Sum() []byte {
	if t.state == nil {
		return nil
	}
	return t.state.Sum(nil)
}

// HashOf returns the transcript hash of the messages written so far followed
// by extra, without writing extra: for example the hash of the
// transcript with a truncated ClientHello for a PSK binder, or with the
// server Finished before deciding to keep it. It returns nil while pending.
func (t *Transcript) HashOf(extra []byte) []byte {
	if t.state == nil {
		return nil
	}
	d := cloneHash(t.hash, t.state)
	if d == nil {
		return nil
	}
	d.Write(extra)
	return d.Sum(nil)
}

// RestartWithMessageHash performs the HelloRetryRequest rewrite of
// RFC 8446, Section 4.4.1: the transcript so far (ClientHello1) is replaced
// by the synthetic message
//
//	message_hash(254) || 00 00 || Hash.length || Hash(ClientHello1)
//
// after which the HelloRetryRequest and later messages are written as usual.
// On a pending transcript the rewrite happens when SetHash is called.
func (t *Transcript) RestartWithMessageHash() {
	if t.state == nil {
		t.restarts = append(t.restarts, len(t.buf))
		return
	}
	t.restart()
}

func (t *Transcript) restart() {
	sum := t.state.Sum(nil)
	t.state.Reset()
	t.state.Write([]byte{typeMessageHash, 0, 0, byte(len(sum))})
	t.state.Write(sum)
}

// Clone returns an independent copy of the transcript, for example to try a
// message against the transcript before committing to it. It returns nil if
// the hash implementation cannot be copied (never for SHA-256 or SHA-384).
func (t *Transcript) Clone() *Transcript {
	c := &Transcript{hash: t.hash}
	if t.state != nil {
		c.state = cloneHash(t.hash, t.state)
		if c.state == nil {
			return nil
		}
		return c
	}
	c.buf = append([]byte(nil), t.buf...)
	c.restarts = append([]int(nil), t.restarts...)
	return c
}
