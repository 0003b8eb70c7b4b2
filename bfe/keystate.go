package bfe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
	"github.com/consensys/gnark-crypto/ecc/bls12-381/fr"
)

// The key file of an epoch (see the package doc):
//
//	offset 0    magic "ZTLSBFE1"
//	offset 8    the public key's wire encoding (PublicKeySize bytes)
//	offset 119  SHA-256 of bytes 0..118
//	offset 151  zeros up to keyFileHeaderSize
//	offset 256  M slots of SlotSize bytes: slot i is sk_i = H_G1(pk, i)^alpha,
//	            compressed, or 48 zero bytes once punctured
const keyFileHeaderSize = 256

var keyFileMagic = []byte("ZTLSBFE1")

func slotOffset(i uint32) int64 { return keyFileHeaderSize + int64(i)*SlotSize }

func encodeKeyFileHeader(pk *PublicKey) []byte {
	h := make([]byte, keyFileHeaderSize)
	n := copy(h, keyFileMagic)
	n += copy(h[n:], pk.enc)
	sum := sha256.Sum256(h[:n])
	copy(h[n:], sum[:])
	return h
}

func parseKeyFileHeader(h []byte) (*PublicKey, error) {
	n := len(keyFileMagic) + PublicKeySize
	if len(h) != keyFileHeaderSize || !bytes.Equal(h[:len(keyFileMagic)], keyFileMagic) {
		return nil, errors.New("bfe: not a key file")
	}
	sum := sha256.Sum256(h[:n])
	if !bytes.Equal(h[n:n+len(sum)], sum[:]) || !allZero(h[n+len(sum):]) {
		return nil, errors.New("bfe: key file header is corrupt")
	}
	return ParsePublicKey(h[len(keyFileMagic):n])
}

func allZero(b []byte) bool {
	var acc byte
	for _, c := range b {
		acc |= c
	}
	return acc == 0
}

// slotFile is what a KeyState needs of its *os.File; the crash tests put a
// file in its place that loses what was not synced.
type slotFile interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Close() error
}

var (
	// ErrPunctured: every position of the ciphertext is punctured, so it
	// was decapsulated before (a replay) or collides with others (a false
	// positive, probability about p once the epoch has seen n). Early data
	// must be refused; the handshake goes on without it.
	ErrPunctured = errors.New("bfe: ciphertext's positions are punctured")
	// ErrClosed: the KeyState was closed.
	ErrClosed = errors.New("bfe: key state is closed")
)

// Options configure OpenKeyState. The zero value (or nil) is a server alone.
type Options struct {
	// Log, if not nil, is asked before each decapsulation to set the
	// ciphertext's positions (see PunctureLog); positions it had already
	// set are erased here too and never used. An error from it refuses the
	// ciphertext (fail closed).
	Log PunctureLog
}

// A KeyState is an epoch's secret key, punctured in place in its file. It is
// safe for concurrent use: of any number of concurrent Decapsulate calls with
// one ciphertext, at most one returns a key.
type KeyState struct {
	pk     *PublicKey
	log    PunctureLog
	points g1Source

	mu        sync.Mutex
	file      slotFile // guarded by mu for writes and for slot reads
	punctured []uint64 // bitmap of punctured slots, guarded by mu
	count     int      // set bits in punctured, guarded by mu
	closed    bool     // guarded by mu

	// hook, when tests set it, is called at each step of Decapsulate's
	// write-ahead protocol; a test crashes the process there by panicking.
	hook func(step string)
}

// OpenKeyState opens a key file written by GenerateKey for reading and
// puncturing, and locks it against a second opener. It loads the key's
// point table if there is one (decapsulation then skips k-1 hashes to the
// curve; 96 bytes of memory per slot); without it, it hashes.
func OpenKeyState(path string, opts *Options) (*KeyState, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("bfe: open key: %w", err)
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	ks, err := openKeyState(slotFileOf(f), opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%w (%s)", err, path)
	}
	points, err := loadPointTable(PointTablePath(path), ks.pk)
	switch {
	case err == nil:
		ks.points = func(i uint32) bls.G1Affine { return points[i] }
	case !errors.Is(err, os.ErrNotExist):
		f.Close()
		return nil, err
	}
	return ks, nil
}

func openKeyState(f slotFile, opts *Options) (*KeyState, error) {
	h := make([]byte, keyFileHeaderSize)
	if _, err := f.ReadAt(h, 0); err != nil {
		return nil, fmt.Errorf("bfe: read key header: %w", err)
	}
	pk, err := parseKeyFileHeader(h)
	if err != nil {
		return nil, err
	}
	ks := &KeyState{pk: pk, file: f, points: pk.hashPoint}
	if opts != nil {
		ks.log = opts.Log
	}
	m := pk.params.M
	ks.punctured = make([]uint64, (m+63)/64)
	// One pass over the slots finds the punctured ones (all zero); a slot
	// torn by a crash in mid-write is caught when it fails to decode.
	const chunk = 4096
	buf := make([]byte, chunk*SlotSize)
	defer clear(buf)
	for first := uint32(0); first < m; first += chunk {
		n := min(chunk, m-first)
		b := buf[:int(n)*SlotSize]
		if _, err := f.ReadAt(b, slotOffset(first)); err != nil {
			return nil, fmt.Errorf("bfe: key file is short: %w", err)
		}
		for i := range n {
			if allZero(b[i*SlotSize : (i+1)*SlotSize]) {
				ks.setPunctured(first + i)
			}
		}
	}
	var probe [1]byte
	if n, _ := f.ReadAt(probe[:], slotOffset(m)); n != 0 {
		return nil, errors.New("bfe: key file has trailing bytes")
	}
	return ks, nil
}

// PublicKey is the key whose secret this is.
func (ks *KeyState) PublicKey() *PublicKey { return ks.pk }

// Punctured is how many of the M slots are erased.
func (ks *KeyState) Punctured() int {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	return ks.count
}

// FalsePositiveRate is the probability that a fresh ciphertext now finds all
// of its K positions punctured, (punctured/M)^K: the rate at which honest
// early data is refused. Refuse early data before this passes the epoch's p.
func (ks *KeyState) FalsePositiveRate() float64 {
	f := float64(ks.Punctured()) / float64(ks.pk.params.M)
	r := 1.0
	for range ks.pk.params.K {
		r *= f
	}
	return r
}

// Close closes the key file. Decapsulate fails with ErrClosed afterwards.
func (ks *KeyState) Close() error {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.closed {
		return nil
	}
	ks.closed = true
	return ks.file.Close()
}

func (ks *KeyState) isPunctured(i uint32) bool { return ks.punctured[i/64]&(1<<(i%64)) != 0 }

func (ks *KeyState) setPunctured(i uint32) {
	if !ks.isPunctured(i) {
		ks.punctured[i/64] |= 1 << (i % 64)
		ks.count++
	}
}

func (ks *KeyState) step(name string) {
	if ks.hook != nil {
		ks.hook(name)
	}
}

// Decapsulate returns the key of a ciphertext from PublicKey.Encapsulate,
// once: every position of the ciphertext is erased from the key file, and
// the erasure synced, before the key is returned, so no crash can leave a
// returned key decapsulable again (see the package doc). The fsync runs
// while the pairings compute the key, which stays in this call's memory
// until the fsync has succeeded. It returns ErrPunctured for a replay or a
// false positive, ErrInvalidCiphertext for a ciphertext that was not made
// by Encapsulate for this key (whose positions are punctured too), and an
// I/O or PunctureLog error when the erasure could not be made durable (the
// ciphertext is refused).
func (ks *KeyState) Decapsulate(ctx context.Context, ciphertext []byte) ([]byte, error) {
	pk := ks.pk
	c0, err := pk.parseCiphertext(ciphertext)
	if err != nil {
		return nil, err
	}
	tag := ciphertext[:g2Compressed]
	var posBuf [MaxHashes]uint32
	pos := positions(&pk.digest, pk.params, tag, posBuf[:0])

	var wasSet []bool
	if ks.log != nil {
		if wasSet, err = ks.log.TestAndSet(ctx, pk.epoch, pos); err != nil {
			return nil, fmt.Errorf("bfe: puncture log: %w", err)
		}
		if len(wasSet) != len(pos) {
			return nil, errors.New("bfe: puncture log answered for the wrong number of positions")
		}
	}

	var slot [SlotSize]byte
	defer clear(slot[:])
	j, synced, err := ks.take(pos, wasSet, &slot)
	if err != nil {
		return nil, err
	}

	// From here on the slot exists only in this function's memory, which
	// is cleared before it returns, and nothing computed from it leaves
	// this function before synced reports the erasure durable.
	ks.step("compute")
	var key [KeySize]byte
	defer clear(key[:])
	if !ks.decryptComponent(&key, &slot, &c0, ciphertext, j, pos[j]) {
		if err := ks.awaitSync(synced); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: secret-key slot %d does not decode", ErrPunctured, pos[j])
	}

	// FO transform: re-encrypt with r = R(key) and compare everything,
	// in constant time, with what was received.
	r := foRandomness(&pk.digest, &key)
	defer func() { r = fr.Element{} }()
	expected := make([]byte, len(ciphertext))
	c := g2Compressed + j*maskSize
	copy(expected[c:c+maskSize], ciphertext[c:c+maskSize])
	if !r.IsZero() {
		// Component j need not be recomputed: with c0 = g2^r (checked
		// below), e(sk_i, c0) = e(H_G1(i)^alpha, g2^r) = e(H_G1(i), pk^r),
		// the value encrypt would hash, so it would write back exactly
		// the received c_j from which key was unmasked.
		pk.encrypt(expected, &key, &r, j, ks.points)
	}
	ok := subtle.ConstantTimeCompare(expected, ciphertext) == 1 && !r.IsZero()
	ks.step("verified")
	if err := ks.awaitSync(synced); err != nil {
		return nil, err
	}
	if !ok {
		return nil, ErrInvalidCiphertext
	}
	return outputKey(&pk.digest, &key, ciphertext), nil
}

// awaitSync waits for the fsync that take started and reports whether the
// erasure is durable.
func (ks *KeyState) awaitSync(synced <-chan error) error {
	if err := <-synced; err != nil {
		return fmt.Errorf("bfe: puncture: %w", err)
	}
	ks.step("synced")
	return nil
}

// decryptComponent is the Boneh-Franklin decryption of component j with
// the secret-key slot: key = c_j XOR G'(e(sk_i, c0)).
func (ks *KeyState) decryptComponent(key *[KeySize]byte, slot *[SlotSize]byte, c0 *bls.G2Affine, ciphertext []byte, j int, i uint32) bool {
	sk := make([]bls.G1Affine, 1)
	defer clear(sk)
	if _, err := sk[0].SetBytes(slot[:]); err != nil || sk[0].IsInfinity() {
		return false
	}
	clear(slot[:])
	y, err := bls.Pair(sk, []bls.G2Affine{*c0})
	if err != nil {
		return false
	}
	m := ks.pk.mask(ciphertext[:g2Compressed], j, i, &y)
	y = bls.GT{}
	c := ciphertext[g2Compressed+j*maskSize:]
	for b := range key {
		key[b] = c[b] ^ m[b]
	}
	return true
}

// take chooses the slot to decrypt with and punctures, write-ahead, every
// position of the ciphertext. Under ks.mu it
//
//  1. picks the first position that is not punctured here (nor, with a
//     PunctureLog, set there before this ciphertext) and copies its slot,
//  2. marks all the ciphertext's positions punctured in memory, so that no
//     other call can pick them even if the disk write below fails,
//  3. overwrites them with zeros in the file,
//
// and then starts the fsync that makes step 3 durable. It returns the index
// j of the chosen position and a channel that delivers the fsync's result;
// the caller may compute with the slot meanwhile but must not let anything
// derived from it go before a nil arrives. A crash before then returns
// nothing: the slots may survive on disk, but no key left the process. A
// crash after it leaves them erased. When there is no slot to use, take
// syncs the erasure it wrote before it returns the error.
func (ks *KeyState) take(pos []uint32, wasSet []bool, slot *[SlotSize]byte) (int, <-chan error, error) {
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if ks.closed {
		return -1, nil, ErrClosed
	}
	use := -1
	var eraseBuf [MaxHashes]uint32
	erase := eraseBuf[:0]
	for j, i := range pos {
		if ks.isPunctured(i) {
			continue
		}
		if !containsPosition(erase, i) {
			erase = append(erase, i)
		}
		if use < 0 && (wasSet == nil || !wasSet[j]) {
			use = j
		}
	}
	if len(erase) == 0 {
		return -1, nil, ErrPunctured
	}
	var readErr error
	if use >= 0 {
		ks.step("read")
		if _, readErr = ks.file.ReadAt(slot[:], slotOffset(pos[use])); readErr != nil || allZero(slot[:]) {
			use = -1
		}
	}
	for _, i := range erase {
		ks.setPunctured(i)
	}
	var zero [SlotSize]byte
	for _, i := range erase {
		ks.step("erase")
		if _, err := ks.file.WriteAt(zero[:], slotOffset(i)); err != nil {
			clear(slot[:])
			return -1, nil, fmt.Errorf("bfe: puncture: %w", err)
		}
	}
	ks.step("sync")
	if readErr != nil || use < 0 {
		clear(slot[:])
		if err := ks.file.Sync(); err != nil {
			return -1, nil, fmt.Errorf("bfe: puncture: %w", err)
		}
		ks.step("synced")
		if readErr != nil {
			return -1, nil, fmt.Errorf("bfe: read key slot: %w", readErr)
		}
		return -1, nil, ErrPunctured
	}
	synced := make(chan error, 1)
	go func(f slotFile) { synced <- f.Sync() }(ks.file)
	// Let the fsync start now: with one P (GOMAXPROCS=1) the goroutine
	// would otherwise wait for the pairings, which do not yield, and the
	// two would run one after the other. Once it blocks in the system
	// call the runtime gives the P back to the pairings.
	runtime.Gosched()
	return use, synced, nil
}

func containsPosition(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Inspect reads a key file without locking or changing it and returns its
// public key and how many slots are punctured, for monitoring (`ztls zdata
// show`) while a server holds the key. The count is a snapshot; a slot
// being erased at that moment may be counted either way.
func Inspect(path string) (*PublicKey, int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("bfe: open key: %w", err)
	}
	defer f.Close()
	ks, err := openKeyState(f, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("%w (%s)", err, path)
	}
	return ks.pk, ks.count, nil
}
