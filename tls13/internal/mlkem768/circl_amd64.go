//go:build amd64 && !purego

package mlkem768

import (
	cryptorand "crypto/rand"
	"crypto/sha3"
	"fmt"
	"sync"

	"github.com/cloudflare/circl/kem/mlkem/mlkem768"
	pke "github.com/cloudflare/circl/pke/kyber/kyber768"
	"golang.org/x/sys/cpu"
)

// fast is circl's implementation where its AVX2 code runs; without AVX2
// circl falls back to generic Go, slower than crypto/mlkem, which then runs.
var fast impl = func() impl {
	if cpu.X86.HasAVX2 {
		return circl{}
	}
	return nil
}()

// circl is github.com/cloudflare/circl's kem/mlkem/mlkem768.
type circl struct{}

type circlDK struct {
	sk *mlkem768.PrivateKey
	pk *mlkem768.PublicKey
}
type circlEK struct{ pk *mlkem768.PublicKey }

func (circl) newDecapsulationKey(seed []byte) (dkImpl, error) {
	pk, sk := mlkem768.NewKeyFromSeed(seed)
	return circlDK{sk: sk, pk: pk}, nil
}

func (circl) newEncapsulationKey(b []byte) (ekImpl, error) {
	pk := new(mlkem768.PublicKey)
	if err := pk.Unpack(b); err != nil {
		return nil, ErrInvalidEncapsulationKey
	}
	return circlEK{pk}, nil
}

func (d circlDK) encapsulationKey(out []byte) { d.pk.Pack(out) }
func (d circlDK) decapsulate(ss, ct []byte)   { d.sk.DecapsulateTo(ss, ct) }

func (e circlEK) encapsulate(ss, ct, m []byte) error {
	e.pk.EncapsulateTo(ct, ss, m) // m nil: circl draws it from crypto/rand
	return nil
}

// pkePool holds parsed encapsulation keys of circl's K-PKE for reuse:
// UnpackMLKEM overwrites every field (t, the matrix, rho), and the keys are
// public, so a reused one needs no clearing.
var pkePool = sync.Pool{New: func() any { return new(pke.PublicKey) }}

// encapsulateOnce is ML-KEM.Encaps_internal (FIPS 203, Algorithm 17) over
// circl's K-PKE, as circl's KEM computes it, with the parsed key taken
// from pkePool instead of allocated: (K, r) = G(m || H(ek)), c =
// K-PKE.Encrypt(ek, m, r). H and G are crypto/sha3's SHA3-256 and
// SHA3-512. FuzzEncapsulate and TestACVP hold it to circl's KEM and
// crypto/mlkem.
func (circl) encapsulateOnce(ek, ss, ct, m []byte) error {
	pk := pkePool.Get().(*pke.PublicKey)
	defer pkePool.Put(pk)
	if err := pk.UnpackMLKEM(ek); err != nil {
		return ErrInvalidEncapsulationKey
	}
	var in [64]byte // m || H(ek)
	if m == nil {
		if _, err := cryptorand.Read(in[:32]); err != nil {
			return fmt.Errorf("mlkem768: encapsulation randomness: %w", err)
		}
	} else {
		copy(in[:32], m)
	}
	h := sha3.Sum256(ek)
	copy(in[32:], h[:])
	kr := sha3.Sum512(in[:])
	pk.EncryptTo(ct, in[:32], kr[32:])
	copy(ss, kr[:SharedKeySize])
	clear(in[:32])
	clear(kr[:])
	return nil
}
