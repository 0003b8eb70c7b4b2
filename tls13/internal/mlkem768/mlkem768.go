package mlkem768

import (
	"crypto/fips140"
	"crypto/mlkem"
	"crypto/mlkem/mlkemtest"
	"errors"
	"fmt"
)

// Sizes in bytes (FIPS 203, Section 8, Table 3, ML-KEM-768).
const (
	SeedSize             = mlkem.SeedSize                // d || z
	EncapsulationKeySize = mlkem.EncapsulationKeySize768 // 1184
	CiphertextSize       = mlkem.CiphertextSize768       // 1088
	SharedKeySize        = mlkem.SharedKeySize           // 32
	RandomnessSize       = 32                            // m of ML-KEM.Encaps_internal
)

// impl is one implementation of the three algorithms.
type impl interface {
	newDecapsulationKey(seed []byte) (dkImpl, error)
	newEncapsulationKey(ek []byte) (ekImpl, error)
	// encapsulateOnce parses and checks ek (its length already checked)
	// and encapsulates to it with m, or crypto/rand when m is nil.
	encapsulateOnce(ek, ss, ct, m []byte) error
}

type dkImpl interface {
	encapsulationKey(out []byte)
	decapsulate(ss, ct []byte)
}

type ekImpl interface {
	// encapsulate with m, or with crypto/rand when m is nil.
	encapsulate(ss, ct, m []byte) error
}

// current is the implementation the build and the CPU select.
func current() impl {
	if fast != nil && !fips140.Enabled() {
		return fast
	}
	return portable{}
}

// Fast reports whether the accelerated implementation (circl's AVX2 code)
// runs, not crypto/mlkem.
func Fast() bool { _, ok := current().(portable); return !ok }

// DecapsulationKey is an ML-KEM-768 private key with its encapsulation key.
// It is safe for concurrent use.
type DecapsulationKey struct {
	k  dkImpl
	ek [EncapsulationKeySize]byte
}

// NewDecapsulationKey derives a key from its 64-byte seed d || z
// (ML-KEM.KeyGen_internal, FIPS 203, Algorithm 16).
func NewDecapsulationKey(seed []byte) (*DecapsulationKey, error) {
	return newDecapsulationKey(current(), seed)
}

func newDecapsulationKey(im impl, seed []byte) (*DecapsulationKey, error) {
	if len(seed) != SeedSize {
		return nil, fmt.Errorf("mlkem768: seed is %d bytes, want %d", len(seed), SeedSize)
	}
	k, err := im.newDecapsulationKey(seed)
	if err != nil {
		return nil, err
	}
	dk := &DecapsulationKey{k: k}
	k.encapsulationKey(dk.ek[:])
	return dk, nil
}

// EncapsulationKey returns a copy of the encapsulation key's bytes.
func (dk *DecapsulationKey) EncapsulationKey() []byte {
	return append([]byte(nil), dk.ek[:]...)
}

// AppendEncapsulationKey appends the encapsulation key's bytes to b.
func (dk *DecapsulationKey) AppendEncapsulationKey(b []byte) []byte {
	return append(b, dk.ek[:]...)
}

var errCiphertextSize = errors.New("mlkem768: ciphertext is not 1088 bytes")

// Decapsulate returns the shared key of a ciphertext (ML-KEM.Decaps,
// FIPS 203, Algorithm 18). Only a ciphertext of the wrong length is an
// error; any other is implicitly rejected: its key is unrelated to the
// encapsulated one, and it is still returned.
func (dk *DecapsulationKey) Decapsulate(ct []byte) ([]byte, error) {
	if len(ct) != CiphertextSize {
		return nil, errCiphertextSize
	}
	ss := make([]byte, SharedKeySize)
	dk.k.decapsulate(ss, ct)
	return ss, nil
}

// EncapsulationKey is a peer's ML-KEM-768 public key, parsed and checked.
// It is safe for concurrent use.
type EncapsulationKey struct{ k ekImpl }

// NewEncapsulationKey parses an encapsulation key with FIPS 203's input
// check (Section 7.2: the length, and every coefficient below q).
func NewEncapsulationKey(b []byte) (*EncapsulationKey, error) {
	return newEncapsulationKey(current(), b)
}

func newEncapsulationKey(im impl, b []byte) (*EncapsulationKey, error) {
	if err := checkEncapsulationKeyLen(b); err != nil {
		return nil, err
	}
	k, err := im.newEncapsulationKey(b)
	if err != nil {
		return nil, err
	}
	return &EncapsulationKey{k: k}, nil
}

// Encapsulate returns a shared key and its ciphertext. m is the 32 bytes
// of randomness of ML-KEM.Encaps_internal (FIPS 203, Algorithm 17), for
// reproducible handshakes; nil draws them from crypto/rand (ML-KEM.Encaps,
// Algorithm 17's caller).
func (ek *EncapsulationKey) Encapsulate(m []byte) (sharedKey, ciphertext []byte, err error) {
	ss, ct, err := newEncapsulation(m)
	if err != nil {
		return nil, nil, err
	}
	if err := ek.k.encapsulate(ss, ct, m); err != nil {
		return nil, nil, err
	}
	return ss, ct, nil
}

// newEncapsulation checks the randomness m (nil or 32 bytes) and returns
// the buffers an encapsulation fills.
func newEncapsulation(m []byte) (ss, ct []byte, err error) {
	if m != nil && len(m) != RandomnessSize {
		return nil, nil, fmt.Errorf("mlkem768: encapsulation randomness is %d bytes, want %d", len(m), RandomnessSize)
	}
	return make([]byte, SharedKeySize), make([]byte, CiphertextSize), nil
}

// checkEncapsulationKeyLen refuses an encapsulation key of the wrong length.
func checkEncapsulationKeyLen(b []byte) error {
	if len(b) != EncapsulationKeySize {
		return fmt.Errorf("mlkem768: encapsulation key is %d bytes, want %d", len(b), EncapsulationKeySize)
	}
	return nil
}

// Encapsulate parses ek with FIPS 203's input check (as
// NewEncapsulationKey) and encapsulates to it (as Encapsulate) in one
// call: what a TLS server does with a client's key share, which it uses
// once. circl's path parses into a reused key (its matrix alone is 4.6 kB)
// instead of a new one each time; m as for Encapsulate.
func Encapsulate(ek, m []byte) (sharedKey, ciphertext []byte, err error) {
	return encapsulateOnce(current(), ek, m)
}

func encapsulateOnce(im impl, ek, m []byte) (sharedKey, ciphertext []byte, err error) {
	if err := checkEncapsulationKeyLen(ek); err != nil {
		return nil, nil, err
	}
	ss, ct, err := newEncapsulation(m)
	if err != nil {
		return nil, nil, err
	}
	if err := im.encapsulateOnce(ek, ss, ct, m); err != nil {
		return nil, nil, err
	}
	return ss, ct, nil
}

// portable is Go's crypto/mlkem.
type portable struct{}

type portableDK struct{ k *mlkem.DecapsulationKey768 }
type portableEK struct{ k *mlkem.EncapsulationKey768 }

func (portable) newDecapsulationKey(seed []byte) (dkImpl, error) {
	k, err := mlkem.NewDecapsulationKey768(seed)
	if err != nil {
		return nil, fmt.Errorf("mlkem768: %w", err)
	}
	return portableDK{k}, nil
}

func (portable) newEncapsulationKey(b []byte) (ekImpl, error) {
	k, err := mlkem.NewEncapsulationKey768(b)
	if err != nil {
		return nil, ErrInvalidEncapsulationKey
	}
	return portableEK{k}, nil
}

// ErrInvalidEncapsulationKey is the error for an encapsulation key that
// fails FIPS 203's modulus check.
var ErrInvalidEncapsulationKey = errors.New("mlkem768: invalid encapsulation key (a coefficient is not below q)")

func (p portable) encapsulateOnce(ek, ss, ct, m []byte) error {
	k, err := p.newEncapsulationKey(ek)
	if err != nil {
		return err
	}
	return k.encapsulate(ss, ct, m)
}

func (d portableDK) encapsulationKey(out []byte) { copy(out, d.k.EncapsulationKey().Bytes()) }

func (d portableDK) decapsulate(ss, ct []byte) {
	k, err := d.k.Decapsulate(ct)
	if err != nil {
		panic("mlkem768: crypto/mlkem refused a ciphertext of the right length: " + err.Error())
	}
	copy(ss, k)
}

func (e portableEK) encapsulate(ss, ct, m []byte) error {
	var k, c []byte
	if m == nil {
		k, c = e.k.Encapsulate()
	} else {
		var err error
		if k, c, err = mlkemtest.Encapsulate768(e.k, m); err != nil {
			return fmt.Errorf("mlkem768: %w", err)
		}
	}
	copy(ss, k)
	copy(ct, c)
	return nil
}
