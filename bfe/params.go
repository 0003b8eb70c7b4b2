package bfe

import (
	"errors"
	"fmt"
	"math"
)

// DefaultFalsePositiveRate is the p of NewParams when the caller has no
// reason to choose another: one fresh ciphertext in 1024 finds all of its
// positions punctured once the epoch has seen its expected n ciphertexts.
const DefaultFalsePositiveRate = 1.0 / 1024

const (
	// KeySize is the length of the key Encapsulate and Decapsulate return.
	KeySize = 32

	// SlotSize is one secret-key slot: a compressed G1 point.
	SlotSize = 48

	// MaxSlots bounds m so that a public key from the network cannot make a
	// peer size anything by it beyond reason (the client's work depends on k
	// only; this bound is for key files).
	MaxSlots = 1 << 26

	// MaxHashes bounds k, which is the client's cost: k pairings per
	// encapsulation. 32 is p = 2^-32.
	MaxHashes = 32

	g1Compressed = 48
	g2Compressed = 96
	maskSize     = KeySize
)

// Params is the Bloom filter of an epoch: M secret-key slots (bits) and K
// hash functions (positions per ciphertext, and K pairings to encapsulate).
// The zero value is invalid; use NewParams.
type Params struct {
	M uint32
	K uint8
}

var errParams = errors.New("bfe: invalid parameters")

// NewParams sizes a filter for n insertions (decapsulated ciphertexts per
// epoch) at false-positive rate p, as for any Bloom filter (Bloom 1970, and
// DJSS18's definition of Bloom filters, which BFE inherits):
//
//	m = ceil(-n ln p / (ln 2)^2),  k = round(m/n ln 2)
//
// With n = 2^14 and p = 2^-10 that is m = 236 372 slots (11.3 MB of secret
// key) and k = 10.
func NewParams(n int, p float64) (Params, error) {
	if n < 1 || !(p > 0 && p < 1) {
		return Params{}, fmt.Errorf("%w: n=%d p=%g", errParams, n, p)
	}
	m := math.Ceil(-float64(n) * math.Log(p) / (math.Ln2 * math.Ln2))
	if m > MaxSlots {
		return Params{}, fmt.Errorf("%w: n=%d p=%g needs %g slots (max %d)", errParams, n, p, m, MaxSlots)
	}
	k := math.Round(m / float64(n) * math.Ln2)
	if k < 1 {
		k = 1
	}
	if k > MaxHashes {
		return Params{}, fmt.Errorf("%w: p=%g needs %g hashes (max %d)", errParams, p, k, MaxHashes)
	}
	return Params{M: uint32(m), K: uint8(k)}, nil
}

func (p Params) check() error {
	if p.M < 1 || p.M > MaxSlots || p.K < 1 || p.K > MaxHashes {
		return fmt.Errorf("%w: m=%d k=%d", errParams, p.M, p.K)
	}
	return nil
}

// SecretKeySize is the size of an epoch's key file: a header and M slots.
func (p Params) SecretKeySize() int64 {
	return keyFileHeaderSize + int64(p.M)*SlotSize
}

// CiphertextSize is one G2 element and K masks of KeySize bytes.
func (p Params) CiphertextSize() int {
	return g2Compressed + int(p.K)*maskSize
}

// FalsePositiveRate is the probability that a fresh ciphertext finds all K
// of its positions punctured after n others were decapsulated:
// (1 - e^(-kn/m))^k.
func (p Params) FalsePositiveRate(n int) float64 {
	k := float64(p.K)
	return math.Pow(1-math.Exp(-k*float64(n)/float64(p.M)), k)
}

func (p Params) String() string {
	return fmt.Sprintf("m=%d k=%d", p.M, p.K)
}

// Suite names the pairing group and the hash functions of a key. It is on
// the wire in the public key.
type Suite uint16

// SuiteBLS12381SHA256: BLS12-381 with secret-key slots in G1 and the public
// key and ciphertexts in G2; H_G1 is RFC 9380 hash_to_curve with suite
// BLS12381G1_XMD:SHA-256_SSWU_RO_, every other hash is SHA-256, and the FO
// randomness is RFC 9380 hash_to_field into the scalar field
// (expand_message_xmd with SHA-256).
const SuiteBLS12381SHA256 Suite = 1

func (s Suite) String() string {
	switch s {
	case SuiteBLS12381SHA256:
		return "bls12381-sha256"
	}
	return fmt.Sprintf("Suite(%d)", uint16(s))
}
