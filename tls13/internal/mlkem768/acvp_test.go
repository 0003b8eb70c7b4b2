package mlkem768

import (
	"bytes"
	"crypto/sha3"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
)

// hexBytes is a hex string in the ACVP files.
type hexBytes []byte

func (h *hexBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := hex.DecodeString(s)
	*h = v
	return err
}

type acvpVectors struct {
	KeyGen []struct {
		TcID     int `json:"tcId"`
		D, Z, EK hexBytes
	} `json:"keyGen"`
	Encapsulation []struct {
		TcID        int `json:"tcId"`
		EK, M, C, K hexBytes
	} `json:"encapsulation"`
	Decapsulation struct {
		DK    hexBytes `json:"dk"`
		Tests []struct {
			TcID int `json:"tcId"`
			C, K hexBytes
		} `json:"tests"`
	} `json:"decapsulation"`
}

func loadACVP(t *testing.T) *acvpVectors {
	t.Helper()
	b, err := os.ReadFile("testdata/acvp-mlkem768.json")
	if err != nil {
		t.Fatal(err)
	}
	var v acvpVectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.KeyGen) == 0 || len(v.Encapsulation) == 0 || len(v.Decapsulation.Tests) == 0 {
		t.Fatal("testdata/acvp-mlkem768.json lacks a kind of test")
	}
	return &v
}

// TestACVP checks NIST's ACVP answers (testdata/README.md) on every
// implementation this build has: key generation from d || z,
// encapsulation with a given m, and decapsulation of valid and modified
// ciphertexts (implicit rejection) where the implementation can load
// ACVP's expanded decapsulation key.
func TestACVP(t *testing.T) {
	v := loadACVP(t)
	for _, im := range impls() {
		t.Run(name(im), func(t *testing.T) {
			for _, tc := range v.KeyGen {
				dk, err := newDecapsulationKey(im, append(append([]byte{}, tc.D...), tc.Z...))
				if err != nil {
					t.Fatalf("keyGen tcId %d: %v", tc.TcID, err)
				}
				if !bytes.Equal(dk.EncapsulationKey(), tc.EK) {
					t.Errorf("keyGen tcId %d: wrong encapsulation key", tc.TcID)
				}
			}
			for _, tc := range v.Encapsulation {
				ek, err := newEncapsulationKey(im, tc.EK)
				if err != nil {
					t.Fatalf("encapsulation tcId %d: %v", tc.TcID, err)
				}
				k, c, err := ek.Encapsulate(tc.M)
				if err != nil || !bytes.Equal(k, tc.K) || !bytes.Equal(c, tc.C) {
					t.Errorf("encapsulation tcId %d: wrong key or ciphertext (%v)", tc.TcID, err)
				}
				k, c, err = encapsulateOnce(im, tc.EK, tc.M)
				if err != nil || !bytes.Equal(k, tc.K) || !bytes.Equal(c, tc.C) {
					t.Errorf("encapsulation tcId %d in one call: wrong key or ciphertext (%v)", tc.TcID, err)
				}
			}
			testACVPDecapsulation(t, im, v)
		})
	}
}

func testACVPDecapsulation(t *testing.T, im impl, v *acvpVectors) {
	dk := expandedKey(t, im, v.Decapsulation.DK)
	if dk == nil {
		return
	}
	// FIPS 203, Algorithm 18: the rejection key is J(z || c), z the last
	// 32 bytes of the expanded key.
	z := v.Decapsulation.DK[len(v.Decapsulation.DK)-32:]
	rejected := 0
	for _, tc := range v.Decapsulation.Tests {
		k, err := dk.Decapsulate(tc.C)
		if err != nil || !bytes.Equal(k, tc.K) {
			t.Errorf("decapsulation tcId %d: wrong key (%v)", tc.TcID, err)
		}
		if bytes.Equal(sha3.SumSHAKE256(append(append([]byte{}, z...), tc.C...), 32), tc.K) {
			rejected++
		}
	}
	if rejected == 0 || rejected == len(v.Decapsulation.Tests) {
		t.Errorf("%d of %d decapsulation tests are implicit rejections: the subset must have both kinds", rejected, len(v.Decapsulation.Tests))
	}
}

// TestSelection: the build and CPU pick one implementation, and the API
// refuses wrong lengths whatever it is.
func TestSelection(t *testing.T) {
	t.Logf("Fast() = %v", Fast())
	if _, err := NewDecapsulationKey(make([]byte, 63)); err == nil {
		t.Error("a 63-byte seed was accepted")
	}
	if _, err := NewEncapsulationKey(make([]byte, EncapsulationKeySize-1)); err == nil {
		t.Error("a short encapsulation key was accepted")
	}
	bad := bytes.Repeat([]byte{0xff}, EncapsulationKeySize) // coefficients 4095 >= q
	for _, im := range impls() {
		if _, err := newEncapsulationKey(im, bad); err == nil {
			t.Errorf("%s: an encapsulation key with coefficients above q was accepted", name(im))
		}
	}
	dk, err := NewDecapsulationKey(make([]byte, SeedSize))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dk.Decapsulate(make([]byte, CiphertextSize+1)); err == nil {
		t.Error("a long ciphertext was decapsulated")
	}
	ek, err := NewEncapsulationKey(dk.EncapsulationKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := ek.Encapsulate(make([]byte, 31)); err == nil {
		t.Error("31 bytes of randomness were accepted")
	}
	k1, c1, err := ek.Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	k2, c2, _ := ek.Encapsulate(nil)
	if bytes.Equal(c1, c2) || bytes.Equal(k1, k2) {
		t.Error("two encapsulations with system randomness gave the same ciphertext")
	}
	if got, _ := dk.Decapsulate(c1); !bytes.Equal(got, k1) {
		t.Error("decapsulation does not give the encapsulated key")
	}
}

func name(im impl) string {
	if _, ok := im.(portable); ok {
		return "crypto-mlkem"
	}
	return "fast"
}
