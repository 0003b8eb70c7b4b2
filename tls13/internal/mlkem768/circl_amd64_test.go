//go:build amd64 && !purego

package mlkem768

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cloudflare/circl/kem/mlkem/mlkem768"
)

// impls are both implementations: circl runs here even without AVX2 (its
// generic code), so the differential tests need no particular CPU.
func impls() []impl { return []impl{portable{}, circl{}} }

// expandedKey loads ACVP's 2400-byte decapsulation key (FIPS 203's
// dk_PKE || ek || H(ek) || z) into circl; crypto/mlkem loads keys from
// seeds only, so for it the decapsulation vectors are skipped and
// FuzzDecapsulate holds it to circl.
func expandedKey(t *testing.T, im impl, dk []byte) *DecapsulationKey {
	t.Helper()
	if _, ok := im.(circl); !ok {
		t.Log("crypto/mlkem cannot load ACVP's expanded decapsulation key: its decapsulation is held to circl's by FuzzDecapsulate")
		return nil
	}
	sk := new(mlkem768.PrivateKey)
	if err := sk.Unpack(dk); err != nil {
		t.Fatal(err)
	}
	pk := new(mlkem768.PublicKey)
	if err := pk.Unpack(dk[1152 : 1152+EncapsulationKeySize]); err != nil {
		t.Fatal(err)
	}
	return &DecapsulationKey{k: circlDK{sk: sk, pk: pk}}
}

// fit returns b cut or zero-padded to n bytes.
func fit(b []byte, n int) []byte {
	out := make([]byte, n)
	copy(out, b)
	return out
}

func seedBytes(v byte) []byte { return bytes.Repeat([]byte{v}, SeedSize) }

// keyPair is seed's decapsulation key in portable (a) and in circl (b).
func keyPair(t *testing.T, seed []byte) (a, b *DecapsulationKey) {
	t.Helper()
	a, err := newDecapsulationKey(portable{}, seed)
	if err != nil {
		t.Fatal(err)
	}
	b, err = newDecapsulationKey(circl{}, seed)
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// FuzzKeyGen: the same seed gives the same encapsulation key.
func FuzzKeyGen(f *testing.F) {
	f.Add(seedBytes(0))
	f.Add(seedBytes(0xff))
	f.Add([]byte("a seed shorter than sixty-four bytes"))
	f.Fuzz(func(t *testing.T, seed []byte) {
		seed = fit(seed, SeedSize)
		a, b := keyPair(t, seed)
		if !bytes.Equal(a.EncapsulationKey(), b.EncapsulationKey()) {
			t.Fatalf("seed %x: the encapsulation keys differ", seed)
		}
	})
}

// FuzzEncapsulate: any 1184 bytes are accepted or refused by both (FIPS
// 203's modulus check), and an accepted key with the same randomness gives
// the same ciphertext and key.
func FuzzEncapsulate(f *testing.F) {
	for i := range 3 {
		dk, err := newDecapsulationKey(portable{}, seedBytes(byte(i)))
		if err != nil {
			f.Fatal(err)
		}
		ek := dk.EncapsulationKey()
		f.Add(ek, bytes.Repeat([]byte{byte(i)}, 32))
		bad := append([]byte{}, ek...)
		bad[100] |= 0xf0 // a coefficient of 3840 or more: above q
		f.Add(bad, make([]byte, 32))
	}
	f.Fuzz(func(t *testing.T, ekb, m []byte) {
		ekb, m = fit(ekb, EncapsulationKeySize), fit(m, RandomnessSize)
		a, errA := newEncapsulationKey(portable{}, ekb)
		b, errB := newEncapsulationKey(circl{}, ekb)
		kc, cc, errC := encapsulateOnce(circl{}, ekb, m)
		if (errA == nil) != (errB == nil) || (errA == nil) != (errC == nil) {
			t.Fatalf("crypto/mlkem says %v, circl says %v, circl in one call %v", errA, errB, errC)
		}
		if errA != nil {
			return
		}
		ka, ca, err := a.Encapsulate(m)
		if err != nil {
			t.Fatal(err)
		}
		kb, cb, err := b.Encapsulate(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ka, kb) || !bytes.Equal(ca, cb) {
			t.Fatal("same key and randomness, different ciphertext or shared key")
		}
		if !bytes.Equal(ka, kc) || !bytes.Equal(ca, cc) {
			t.Fatal("circl in one call (the pooled K-PKE key) differs from crypto/mlkem")
		}
	})
}

// FuzzDecapsulate: a key from the same seed gives the same shared key for
// any ciphertext, a mauled one (implicit rejection) as well as a valid one.
func FuzzDecapsulate(f *testing.F) {
	for i := range 3 {
		dk, err := newDecapsulationKey(portable{}, seedBytes(byte(i)))
		if err != nil {
			f.Fatal(err)
		}
		ek, _ := newEncapsulationKey(portable{}, dk.EncapsulationKey())
		_, ct, err := ek.Encapsulate(bytes.Repeat([]byte{byte(i + 7)}, 32))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(seedBytes(byte(i)), ct)
		mauled := append([]byte{}, ct...)
		mauled[i*300] ^= 1
		f.Add(seedBytes(byte(i)), mauled)
	}
	f.Fuzz(func(t *testing.T, seed, ct []byte) {
		seed, ct = fit(seed, SeedSize), fit(ct, CiphertextSize)
		a, b := keyPair(t, seed)
		ka, errA := a.Decapsulate(ct)
		kb, errB := b.Decapsulate(ct)
		if errA != nil || errB != nil || !bytes.Equal(ka, kb) {
			t.Fatalf("the shared keys differ (%v, %v)", errA, errB)
		}
	})
}

// TestCrossImplementations: a ciphertext made by one decapsulates to the
// same key with the other, and an implicit rejection is the same on both.
func TestCrossImplementations(t *testing.T) {
	for i := range 8 {
		seed := seedBytes(byte(i * 31))
		for _, pair := range [][2]impl{{portable{}, circl{}}, {circl{}, portable{}}} {
			enc, dec := pair[0], pair[1]
			dk, err := newDecapsulationKey(dec, seed)
			if err != nil {
				t.Fatal(err)
			}
			ek, err := newEncapsulationKey(enc, dk.EncapsulationKey())
			if err != nil {
				t.Fatal(err)
			}
			k, ct, err := ek.Encapsulate(nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := dk.Decapsulate(ct); !bytes.Equal(got, k) {
				t.Fatalf("%s's ciphertext decapsulates to another key with %s", name(enc), name(dec))
			}
			ct[len(ct)-1] ^= 0x80
			other, _ := newDecapsulationKey(enc, seed)
			r1, _ := dk.Decapsulate(ct)
			r2, _ := other.Decapsulate(ct)
			if bytes.Equal(r1, k) || !bytes.Equal(r1, r2) {
				t.Fatal("a mauled ciphertext gave the encapsulated key, or different rejection keys")
			}
		}
	}
}

// TestCirclAssemblyIsStraightLine reviews the assembly circl runs here
// for constant time: the ML-KEM arithmetic (NTT, inverse NTT, base
// multiplication, reductions) has no jump, label or CMOV, no indexed
// addressing and only data-independent vector and move instructions; the
// four-way Keccak's only jumps are its round loop (a constant count) and
// the choice of round count by its turbo parameter, neither a secret.
func TestCirclAssemblyIsStraightLine(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cloudflare/circl").Output()
	if err != nil {
		t.Skipf("go list cannot locate circl's source (%v): run from the module with the go command on PATH", err)
	}
	dir := strings.TrimSpace(string(out))
	allowed := regexp.MustCompile(`^(V(MOVDQU|MOVDQA|MOVD|MOVSLDUP|PMULHW|PMULLW|PADDW|PSUBW|PXOR|POR|PAND|PANDN|PSRLQ|PSLLQ|PSRLD|PSLLD|PSRAW|PERM2I128|PBLENDW|PBLENDD|PBROADCASTW|PBROADCASTQ|PUNPCKLQDQ|PUNPCKHQDQ)|MOVQ|MOVL|MOVBQZX|LEAQ|ADDQ|SUBQ|TESTQ|RET)$`)
	for file, jumps := range map[string][]string{
		"pke/kyber/internal/common/amd64.s": nil,
		"simd/keccakf1600/f1600x4_amd64.s":  {"JZ loop", "JNZ loop"},
	} {
		src, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		var seen []string
		for n, line := range strings.Split(string(src), "\n") {
			line = strings.Join(strings.Fields(line), " ")
			switch {
			case line == "" || strings.HasPrefix(line, "//") || strings.HasPrefix(line, "#") ||
				strings.HasPrefix(line, "TEXT ") || line == "loop:" && jumps != nil:
				continue
			case strings.HasPrefix(line, "J"):
				seen = append(seen, line)
				continue
			}
			op := strings.Fields(line)[0]
			if !allowed.MatchString(op) {
				t.Errorf("%s:%d: %q is not on the list of data-independent instructions", file, n+1, line)
			}
			if regexp.MustCompile(`\([A-Z0-9]+\*[0-9]\)`).MatchString(line) {
				t.Errorf("%s:%d: %q uses an index register", file, n+1, line)
			}
		}
		if strings.Join(seen, "; ") != strings.Join(jumps, "; ") {
			t.Errorf("%s: jumps %q, want %q", file, seen, jumps)
		}
	}
}

// BenchmarkMLKEM768 puts crypto/mlkem and circl side by side in one run
// (issue 32): key generation from a seed (with the encapsulation key's
// bytes), encapsulation as a TLS server does it (parse the client's key,
// then encapsulate) and decapsulation.
func BenchmarkMLKEM768(b *testing.B) {
	b.Logf("Fast() = %v", Fast())
	seed := seedBytes(7)
	m := bytes.Repeat([]byte{9}, 32)
	ref, _ := newDecapsulationKey(portable{}, seed)
	ekb := ref.EncapsulationKey()
	refEK, _ := newEncapsulationKey(portable{}, ekb)
	_, ct, _ := refEK.Encapsulate(m)
	for _, im := range impls() {
		b.Run("keygen/"+name(im), func(b *testing.B) {
			for b.Loop() {
				if _, err := newDecapsulationKey(im, seed); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, im := range impls() {
		b.Run("encaps/"+name(im), func(b *testing.B) {
			for b.Loop() {
				ek, err := newEncapsulationKey(im, ekb)
				if err != nil {
					b.Fatal(err)
				}
				if _, _, err := ek.Encapsulate(m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	for _, im := range impls() {
		dk, _ := newDecapsulationKey(im, seed)
		b.Run("decaps/"+name(im), func(b *testing.B) {
			for b.Loop() {
				if _, err := dk.Decapsulate(ct); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestEncapsulateOnceReusesKeys runs the one-call encapsulation on keys in
// turn, a refused one between them, so that the pooled K-PKE key is reused
// after another key and after a failed parse: each answer must still be
// crypto/mlkem's.
func TestEncapsulateOnceReusesKeys(t *testing.T) {
	var eks [][]byte
	for i := range 3 {
		dk, err := newDecapsulationKey(portable{}, seedBytes(byte(10+i)))
		if err != nil {
			t.Fatal(err)
		}
		eks = append(eks, dk.EncapsulationKey())
	}
	bad := append([]byte{}, eks[1]...)
	bad[7] |= 0xf0 // a coefficient above q
	m := bytes.Repeat([]byte{0x42}, RandomnessSize)
	for i, ek := range [][]byte{eks[0], bad, eks[1], eks[2], eks[0], bad, eks[2]} {
		kc, cc, errC := encapsulateOnce(circl{}, ek, m)
		kp, cp, errP := encapsulateOnce(portable{}, ek, m)
		if (errC == nil) != (errP == nil) {
			t.Fatalf("step %d: circl %v, crypto/mlkem %v", i, errC, errP)
		}
		if errC == nil && (!bytes.Equal(kc, kp) || !bytes.Equal(cc, cp)) {
			t.Fatalf("step %d: circl's pooled key gave another ciphertext or key than crypto/mlkem", i)
		}
	}
}
