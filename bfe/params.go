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

// Sizing is how NewParamsSized trades the secret key's size against the
// work per ciphertext. Both keep the false-positive rate at p after n
// decapsulations; they differ in the number of hash functions k, which is
// the number of pairings of an encapsulation and, less one, of a
// decapsulation's re-encryption.
type Sizing uint8

const (
	// FewestHashes, the zero value, takes the smallest k whose secret key
	// stays within KeyBytesPerConnection bytes per expected connection:
	// k = 5 and m = 17.4 n at p = 2^-10 (13.7 MB for n = 2^14), half the
	// pairings of SmallestKey for 1.2 times its key.
	FewestHashes Sizing = iota
	// SmallestKey takes the k that minimizes m, the optimum of DJSS18's
	// Bloom filter bounds: k = log2(1/p), m = n log2(1/p) / ln 2 (k = 10
	// and m = 14.4 n at p = 2^-10).
	SmallestKey
)

func (s Sizing) String() string {
	switch s {
	case FewestHashes:
		return "fewest-hashes"
	case SmallestKey:
		return "smallest-key"
	}
	return fmt.Sprintf("Sizing(%d)", uint8(s))
}

// MarshalText is the String of a known Sizing.
func (s Sizing) MarshalText() ([]byte, error) {
	if s > SmallestKey {
		return nil, fmt.Errorf("bfe: unknown %v", s)
	}
	return []byte(s.String()), nil
}

// UnmarshalText accepts "fewest-hashes" and "smallest-key".
func (s *Sizing) UnmarshalText(b []byte) error {
	for _, v := range []Sizing{FewestHashes, SmallestKey} {
		if string(b) == v.String() {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("bfe: unknown sizing %q: want %v or %v", b, FewestHashes, SmallestKey)
}

// KeyBytesPerConnection is FewestHashes' memory budget: the secret key may
// take up to this many bytes (20 slots) per connection the epoch expects,
// so that n = 2^14 stays under 16 MB. When no k fits (p below 2^-13.86,
// where even SmallestKey needs more), FewestHashes falls back to
// SmallestKey.
const KeyBytesPerConnection = 20 * SlotSize

// NewParams sizes a filter for n insertions (decapsulated ciphertexts per
// epoch) at false-positive rate p with the default Sizing, FewestHashes:
// m = 284 759 slots (13.7 MB of secret key) and k = 5 at n = 2^14 and
// p = 2^-10.
func NewParams(n int, p float64) (Params, error) {
	return NewParamsSized(n, p, FewestHashes)
}

// NewParamsSized sizes a filter for n insertions at false-positive rate p.
// A Bloom filter of m bits and k hash functions, after n insertions, gives
// a fresh element all k positions set with probability about
// (1 - e^(-kn/m))^k (DJSS18's Bloom filter bounds; Bloom 1970). Any k
// reaches p with
//
//	m(k) = ceil(-k n / ln(1 - p^(1/k)))
//
// which is smallest near k = log2(1/p) (the usual m = -n ln p / (ln 2)^2)
// and grows as k falls. s chooses k: SmallestKey the k of least m,
// FewestHashes the least k with m(k) SlotSize <= n KeyBytesPerConnection.
func NewParamsSized(n int, p float64, s Sizing) (Params, error) {
	if n < 1 || !(p > 0 && p < 1) || s > SmallestKey {
		return Params{}, fmt.Errorf("%w: n=%d p=%g %v", errParams, n, p, s)
	}
	budget := float64(n) * KeyBytesPerConnection / SlotSize
	var small, fast Params
	for k := 1; k <= MaxHashes; k++ {
		m := slotsFor(n, p, k)
		if !(m >= 1 && m <= MaxSlots) {
			continue
		}
		if fast.K == 0 && m <= budget {
			fast = Params{M: uint32(m), K: uint8(k)}
		}
		if small.K == 0 || uint32(m) < small.M {
			small = Params{M: uint32(m), K: uint8(k)}
		}
	}
	switch {
	case small.K == 0:
		return Params{}, fmt.Errorf("%w: n=%d p=%g needs more than %d slots or %d hashes", errParams, n, p, MaxSlots, MaxHashes)
	case s == FewestHashes && fast.K != 0:
		return fast, nil
	}
	return small, nil
}

// slotsFor is m(k) of NewParamsSized: the fewest slots at which k hashes
// keep the false-positive rate after n insertions at p.
func slotsFor(n int, p float64, k int) float64 {
	return math.Ceil(-float64(k) * float64(n) / math.Log1p(-math.Pow(p, 1/float64(k))))
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

// FillAt is the share of punctured slots at which a fresh ciphertext's
// false-positive rate, (punctured/M)^K, reaches rate: rate^(1/K). A filter
// sized for n insertions at rate p is that full after about its n: 1/2 at
// SmallestKey, 1/4 at FewestHashes' k = 5 for p = 2^-10.
func (p Params) FillAt(rate float64) float64 {
	return math.Pow(rate, 1/float64(p.K))
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
