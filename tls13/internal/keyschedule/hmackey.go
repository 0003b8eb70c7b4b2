package keyschedule

import (
	"crypto"
	sha2 "crypto/sha256"
	sha5 "crypto/sha512"
	"encoding"
	"hash"
	"sync"
)

// maxHashState bounds a marshaled SHA-256 or SHA-384 state (crypto/sha512's
// is 4 bytes of magic, eight 64-bit words, a 128-byte block and a 64-bit
// length: 204 bytes; crypto/sha256's is 108).
const maxHashState = 4 + 8*8 + sha5.BlockSize + 8

// stateMagic and maxChain locate the chaining value, the eight state
// words, in a marshaled state: after the 4-byte magic, 32 bytes for
// SHA-256 and 64 for SHA-384.
const (
	stateMagic = 4
	maxChain   = 8 * 8
)

// hmacKey is HMAC-h keyed once (RFC 2104): the chaining values after the
// key's ipad block and after its opad block, taken from the digests'
// AppendBinary (the rest of such a state, an empty buffer and a length of
// one block, is the same for every key: padTemplates). Each MAC under the key restores them instead of hashing
// the two pad blocks again, so it costs two SHA compressions where
// sumHMAC spends four; a key that MACs several messages (a stage secret
// deriving its labels, a traffic secret its key and IV) pays the pad
// blocks once. The states are as secret as the key: an hmacKey lives
// where its key lives and is cleared with it. The zero value is no key.
type hmacKey struct {
	hash         crypto.Hash // zero: not keyed
	n            int         // length of each chaining value
	inner, outer [maxChain]byte
}

// stateHash is a digest whose running state can be saved and restored
// (every crypto/sha256 and crypto/sha512 digest).
type stateHash interface {
	hash.Hash
	encoding.BinaryAppender
	encoding.BinaryUnmarshaler
}

// worker is a pooled digest with scratch buffers: every slice handed to
// the digest's methods (an interface, so the compiler moves what it is
// given to the heap) is one of these, and the callers' buffers stay on
// their stacks. A worker is pooled wiped: an empty hash's state and
// cleared buffers, never a key's state or a message.
type worker struct {
	d     stateHash
	state [maxHashState]byte
	msg   [maxHMACBlock]byte
	sum   [maxHashSize]byte
}

// workers pools the workers of hmacKey, per hash.
var workers = [2]sync.Pool{
	{New: func() any { return newWorker(sha2.New()) }},
	{New: func() any { return newWorker(sha5.New384()) }},
}

func newWorker(d hash.Hash) *worker {
	s, ok := d.(stateHash)
	if !ok {
		return nil
	}
	return &worker{d: s}
}

// emptyStates are the marshaled states of fresh SHA-256 and SHA-384
// digests, restored into a worker's digest to wipe it before pooling;
// padTemplates those of digests that hashed one zero block, into which
// hmacKey copies its chaining values.
var (
	emptyStates  = [2][]byte{marshalState(sha2.New(), 0), marshalState(sha5.New384(), 0)}
	padTemplates = [2][]byte{marshalState(sha2.New(), sha2.BlockSize), marshalState(sha5.New384(), sha5.BlockSize)}
	chainLens    = [2]int{sha2.Size, sha5.Size}
)

func marshalState(d hash.Hash, n int) []byte {
	s, ok := d.(stateHash)
	if !ok {
		return nil
	}
	s.Write(make([]byte, n))
	b, _ := s.AppendBinary(nil)
	if len(b) > maxHashState {
		return nil
	}
	return b
}

// hashIndex is h's slot in workers and emptyStates, and its block size;
// ok is false for other hashes.
func hashIndex(h crypto.Hash) (i, block int, ok bool) {
	switch h {
	case crypto.SHA256:
		return 0, sha2.BlockSize, emptyStates[0] != nil && padTemplates[0] != nil
	case crypto.SHA384:
		return 1, sha5.BlockSize, emptyStates[1] != nil && padTemplates[1] != nil
	}
	return 0, 0, false
}

func getWorker(i int) *worker {
	w, _ := workers[i].Get().(*worker)
	return w
}

// putWorker wipes w (digest state, buffered bytes, length and scratch
// buffers) and pools it.
func putWorker(i int, w *worker) {
	clear(w.state[:])
	clear(w.msg[:])
	clear(w.sum[:])
	if w.d.UnmarshalBinary(emptyStates[i]) == nil {
		workers[i].Put(w)
	}
}

// restore sets w's digest to the state after a pad block whose chaining
// value is chain.
func (w *worker) restore(i int, chain []byte) bool {
	n := copy(w.state[:], padTemplates[i])
	copy(w.state[stateMagic:], chain)
	return w.d.UnmarshalBinary(w.state[:n]) == nil
}

// write feeds msg to w's digest through w.msg.
func (w *worker) write(msg []byte) {
	for len(msg) > 0 {
		n := copy(w.msg[:], msg)
		w.d.Write(w.msg[:n])
		msg = msg[n:]
	}
}

// padState hashes the key's pad block (key XOR c, block bytes long) from
// a fresh digest and saves the chaining value into dst, checking that the
// rest of the state is padTemplates[i]'s.
func (w *worker) padState(dst *[maxChain]byte, i int, key []byte, c byte) (int, bool) {
	block := len(padTemplates[i]) - stateMagic - chainLens[i] - 8 // buffer and length follow the chain
	clear(w.msg[:])
	copy(w.msg[:], key)
	for j := range block {
		w.msg[j] ^= c
	}
	w.d.Reset()
	w.d.Write(w.msg[:block])
	st, err := w.d.AppendBinary(w.state[:0])
	t, n := padTemplates[i], stateMagic+chainLens[i]
	if err != nil || len(st) != len(t) || string(st[:stateMagic]) != string(t[:stateMagic]) || string(st[n:]) != string(t[n:]) {
		return 0, false
	}
	return copy(dst[:], st[stateMagic:n]), true
}

// init keys k with key for HMAC-h. It reports false, leaving k unkeyed,
// for a hash other than SHA-256 and SHA-384 or a key longer than the
// hash's block, which callers MAC with sumHMAC's fallbacks.
func (k *hmacKey) init(h crypto.Hash, key []byte) bool {
	k.hash = 0
	i, block, ok := hashIndex(h)
	if !ok || len(key) > block {
		return false
	}
	w := getWorker(i)
	if w == nil {
		return false
	}
	defer putWorker(i, w)
	n, ok := w.padState(&k.inner, i, key, 0x36)
	m, ok2 := w.padState(&k.outer, i, key, 0x5c)
	if !ok || !ok2 || n != m {
		k.clear()
		return false
	}
	k.hash, k.n = h, n
	return true
}

// keyed reports whether init keyed k.
func (k *hmacKey) keyed() bool { return k != nil && k.hash != 0 }

// clear forgets the key.
func (k *hmacKey) clear() {
	k.hash, k.n = 0, 0
	clear(k.inner[:])
	clear(k.outer[:])
}

// sum writes HMAC(key, msg) into out and returns it as a slice of out;
// ok is false if k is not keyed or a saved state does not restore.
func (k *hmacKey) sum(out *[maxHashSize]byte, msg []byte) (_ []byte, ok bool) {
	if !k.keyed() {
		return nil, false
	}
	i, _, _ := hashIndex(k.hash)
	w := getWorker(i)
	if w == nil {
		return nil, false
	}
	defer putWorker(i, w)
	if !w.restore(i, k.inner[:k.n]) {
		return nil, false
	}
	w.write(msg)
	inner := w.d.Sum(w.sum[:0])
	if !w.restore(i, k.outer[:k.n]) {
		return nil, false
	}
	w.d.Write(inner)
	mac := w.d.Sum(w.sum[:0])
	return out[:copy(out[:], mac)], true
}

// expandLabelBlock is expandLabelBlock under k: HKDF-Expand-Label of at
// most one hash block, T(1) = HMAC(key, HkdfLabel || 0x01).
func (k *hmacKey) expandLabelBlock(out *[maxHashSize]byte, label string, context []byte, length int) (_ []byte, ok bool, _ error) {
	if !k.keyed() || length > k.hash.Size() {
		return nil, false, nil
	}
	var ib [maxHkdfLabel + 1]byte
	info, err := appendHkdfLabel(ib[:0], label, context, length)
	if err != nil {
		return nil, false, err
	}
	sum, ok := k.sum(out, append(info, 1))
	if !ok {
		return nil, false, nil
	}
	return sum[:length], true, nil
}

// expandInto is ExpandLabelInto(out, k's hash, key, label, nil) for an
// out no longer than the hash; it reports whether it could.
func (k *hmacKey) expandInto(out []byte, label string) bool {
	var sum [maxHashSize]byte
	b, ok, _ := k.expandLabelBlock(&sum, label, nil, len(out))
	copy(out, b)
	clear(sum[:])
	return ok
}
