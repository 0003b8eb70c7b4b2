//go:build amd64 && !purego

package mlkem768

import (
	"github.com/cloudflare/circl/kem/mlkem/mlkem768"
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
		return nil, errInvalidEncapsulationKey
	}
	return circlEK{pk}, nil
}

func (d circlDK) encapsulationKey(out []byte) { d.pk.Pack(out) }
func (d circlDK) decapsulate(ss, ct []byte)   { d.sk.DecapsulateTo(ss, ct) }

func (e circlEK) encapsulate(ss, ct, m []byte) error {
	e.pk.EncapsulateTo(ct, ss, m) // m nil: circl draws it from crypto/rand
	return nil
}
