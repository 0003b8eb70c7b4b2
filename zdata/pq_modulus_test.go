package zdata

// FIPS 203's modulus check of a v3 record's ML-KEM-768 encapsulation key
// (docs/ztls-spec.md, Section 9.1), held to crypto/mlkem's.

import (
	"bytes"
	"crypto/mlkem"
	"math/rand/v2"
	"testing"

	"github.com/ztls-project/ztls/tls13"
)

// mlkemAccepts is crypto/mlkem's verdict on ek.
func mlkemAccepts(ek []byte) bool {
	_, err := mlkem.NewEncapsulationKey768(ek)
	return err == nil
}

// TestMLKEMModulusCheckMatchesCryptoMLKEM: keys with coefficients set at
// and around q, and at random, in every position of the key (first and
// second coefficient of a 3-byte group), are accepted by mlkemModulusOK
// exactly when crypto/mlkem accepts them.
func TestMLKEMModulusCheckMatchesCryptoMLKEM(t *testing.T) {
	kem, err := tls13.GenerateZDataKEMKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	good := kem.Public()[:mlkem.EncapsulationKeySize768]
	if !mlkemModulusOK(good) {
		t.Fatal("a generated key fails the modulus check")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	set := func(ek []byte, i int, v uint16) { // coefficient i to v (12 bits)
		g := 3 * (i / 2)
		if i%2 == 0 {
			ek[g], ek[g+1] = byte(v), ek[g+1]&0xf0|byte(v>>8)
		} else {
			ek[g+1], ek[g+2] = ek[g+1]&0x0f|byte(v<<4), byte(v>>4)
		}
	}
	rejected := 0
	for n := 0; n < 3000; n++ {
		ek := bytes.Clone(good)
		i := rng.IntN(768)
		switch n % 3 {
		case 0:
			set(ek, i, uint16(mlkemQ-1+rng.IntN(3))) // q-1, q, q+1
		case 1:
			set(ek, i, uint16(rng.IntN(4096)))
		default:
			ek[rng.IntN(len(ek))] = byte(rng.Uint32()) // any byte, the seed's too
		}
		got, want := mlkemModulusOK(ek), mlkemAccepts(ek)
		if got != want {
			t.Fatalf("case %d: modulus check %v, crypto/mlkem %v", n, got, want)
		}
		if !got {
			rejected++
		}
	}
	if rejected < 500 {
		t.Fatalf("only %d of 3000 keys rejected: the cases do not reach the bound", rejected)
	}
	for _, ek := range [][]byte{good[:len(good)-1], append(bytes.Clone(good), 0), nil} {
		if mlkemModulusOK(ek) {
			t.Fatalf("a key of %d bytes passed", len(ek))
		}
	}
}

// FuzzMLKEMModulusCheck holds the modulus check to crypto/mlkem's on any
// bytes, of the key's length or not.
func FuzzMLKEMModulusCheck(f *testing.F) {
	kem, err := tls13.GenerateZDataKEMKey(nil)
	if err != nil {
		f.Fatal(err)
	}
	good := kem.Public()[:mlkem.EncapsulationKeySize768]
	f.Add(good)
	f.Add(bytes.Repeat([]byte{0xff}, mlkem.EncapsulationKeySize768))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, ek []byte) {
		if got, want := mlkemModulusOK(ek), mlkemAccepts(ek); got != want {
			t.Fatalf("%d bytes: modulus check %v, crypto/mlkem %v", len(ek), got, want)
		}
	})
}
