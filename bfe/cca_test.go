package bfe

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"
)

// TestMauledCiphertextsRejected flips one bit in every byte of a
// ciphertext, each time on a fresh copy of the key so that the positions
// the mauled ciphertext punctures do not hide the FO check. Every one must
// be refused: a bit in c0 moves it off the curve or out of the subgroup, or
// changes r; a bit in the component that was decrypted changes the key and
// so r; a bit in any other component is caught only by re-encryption.
func TestMauledCiphertextsRejected(t *testing.T) {
	file := keyFile(t, defaultTestParams)
	ks, _ := openMem(t, file)
	ct, key, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ct {
		for _, bit := range []byte{0x01, 0x80} {
			m := bytes.Clone(ct)
			m[i] ^= bit
			ks, _ := openMem(t, file)
			got, err := ks.Decapsulate(context.Background(), m)
			if err == nil || got != nil {
				t.Fatalf("byte %d bit %#x: mauled ciphertext decapsulated to %x (real key %x)", i, bit, got, key)
			}
			if !errors.Is(err, ErrInvalidCiphertext) {
				t.Fatalf("byte %d bit %#x: %v, want ErrInvalidCiphertext", i, bit, err)
			}
		}
	}
	// The untouched ciphertext still works on a fresh copy.
	ks, _ = openMem(t, file)
	if got, err := ks.Decapsulate(context.Background(), ct); err != nil || !bytes.Equal(got, key) {
		t.Fatalf("original: %x, %v", got, err)
	}
}

// TestMauledOtherComponentAfterPuncture: with the first positions punctured
// the decryption uses a later component; mauling an earlier one is still
// refused.
func TestMauledOtherComponentAfterPuncture(t *testing.T) {
	file, ct, _, pos := fileAndCiphertext(t)
	last := len(pos) - 1
	for j := range len(pos) {
		m := bytes.Clone(ct)
		m[g2Compressed+j*maskSize] ^= 1
		ks := openPunctured(t, file, pos, last) // leave only the last position
		if got, err := ks.Decapsulate(context.Background(), m); !errors.Is(err, ErrInvalidCiphertext) {
			t.Fatalf("component %d mauled, decrypting with %d: %x, %v", j, last, got, err)
		}
	}
}

// TestSwappedComponentsRejected swaps masks within a ciphertext and mixes
// the parts of two ciphertexts.
func TestSwappedComponentsRejected(t *testing.T) {
	file := keyFile(t, defaultTestParams)
	ks, _ := openMem(t, file)
	pk := ks.PublicKey()
	a, _, err := pk.Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := pk.Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	comp := func(ct []byte, j int) []byte { return ct[g2Compressed+j*maskSize : g2Compressed+(j+1)*maskSize] }
	var cases [][]byte
	k := int(pk.params.K)
	for j := 1; j < k; j++ {
		m := bytes.Clone(a)
		copy(comp(m, 0), comp(a, j))
		copy(comp(m, j), comp(a, 0))
		cases = append(cases, m)
	}
	m := bytes.Clone(a) // a's tag, b's masks
	copy(m[g2Compressed:], b[g2Compressed:])
	cases = append(cases, m)
	for j := range k { // one mask from b
		m := bytes.Clone(a)
		copy(comp(m, j), comp(b, j))
		cases = append(cases, m)
	}
	for n, m := range cases {
		ks, _ := openMem(t, file)
		if got, err := ks.Decapsulate(context.Background(), m); !errors.Is(err, ErrInvalidCiphertext) {
			t.Fatalf("case %d: %x, %v", n, got, err)
		}
	}
}

// TestForwardSecrecy takes, after a ciphertext was decapsulated, the whole
// key file as a thief would, and tries every slot left in it against every
// component of the recorded ciphertext: none yields a key that passes the
// FO check or equals the real one. The filter is tiny so that all m*k
// trials run in a moment.
func TestForwardSecrecy(t *testing.T) {
	params := Params{M: 48, K: 3}
	ks, path := newTestKeyState(t, params, nil)
	pk := ks.PublicKey()
	ct, key, err := pk.Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Decapsulate(context.Background(), ct); err != nil {
		t.Fatal(err)
	}
	stolen := readFile(t, path)

	thief, _ := openMem(t, stolen)
	if _, err := thief.Decapsulate(context.Background(), ct); !errors.Is(err, ErrPunctured) {
		t.Fatalf("thief's Decapsulate: %v, want ErrPunctured", err)
	}

	c0, err := parseG2(ct[:g2Compressed])
	if err != nil {
		t.Fatal(err)
	}
	pos := positions(&pk.digest, pk.params, ct[:g2Compressed], nil)
	left := 0
	for i := range params.M {
		slot := stolen[slotOffset(i) : slotOffset(i)+SlotSize]
		if allZero(slot) {
			continue
		}
		left++
		if containsPosition(pos, i) {
			t.Fatalf("slot %d of the ciphertext survived", i)
		}
		var sk bls.G1Affine
		if _, err := sk.SetBytes(slot); err != nil {
			t.Fatal(err)
		}
		y, err := bls.Pair([]bls.G1Affine{sk}, []bls.G2Affine{c0})
		if err != nil {
			t.Fatal(err)
		}
		for j := range int(params.K) {
			for _, asPos := range []uint32{pos[j], i} { // as the slot it is, or as the one it replaces
				mk := pk.mask(ct[:g2Compressed], j, asPos, &y)
				var cand [KeySize]byte
				for b := range cand {
					cand[b] = ct[g2Compressed+j*maskSize+b] ^ mk[b]
				}
				if bytes.Equal(outputKey(&pk.digest, &cand, ct), key) {
					t.Fatalf("slot %d as component %d recovers the key", i, j)
				}
				r := foRandomness(&pk.digest, &cand)
				expected := make([]byte, len(ct))
				pk.encrypt(expected, &cand, &r, -1, pk.hashPoint)
				if bytes.Equal(expected, ct) {
					t.Fatalf("slot %d as component %d passes the FO check", i, j)
				}
			}
		}
	}
	if left == 0 {
		t.Fatal("no slot left to try")
	}
	t.Logf("%d slots left in the stolen file, %d trials, none decrypts", left, left*int(params.K)*2)
}

// TestConcurrentDecapsulate races decapsulations of one ciphertext on one
// key: exactly one returns the key.
func TestConcurrentDecapsulate(t *testing.T) {
	ks, _ := newTestKeyState(t, defaultTestParams, nil)
	for range 3 {
		ct, key, err := ks.PublicKey().Encapsulate(nil)
		if err != nil {
			t.Fatal(err)
		}
		wins := raceDecapsulate(t, []*KeyState{ks, ks, ks, ks, ks, ks, ks, ks}, ct, key)
		if wins != 1 {
			t.Fatalf("%d decapsulations succeeded, want 1", wins)
		}
	}
}

// TestFleetSharedLog: two servers with copies of one key file and one
// PunctureLog; a ciphertext raced to both is decapsulated by exactly one,
// and the other erases the positions it learned. Without the log both
// would succeed, which is why a fleet needs one.
func TestFleetSharedLog(t *testing.T) {
	file := keyFile(t, defaultTestParams)
	log := &MemoryPunctureLog{}
	a, err := openKeyState(newMemFile(file), &Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	b, err := openKeyState(newMemFile(file), &Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		ct, key, err := a.PublicKey().Encapsulate(nil)
		if err != nil {
			t.Fatal(err)
		}
		if wins := raceDecapsulate(t, []*KeyState{a, b}, ct, key); wins != 1 {
			t.Fatalf("%d fleet members decapsulated, want 1", wins)
		}
		assertErased(t, a, ct)
		assertErased(t, b, ct)
	}

	alone1, _ := openMem(t, file)
	alone2, _ := openMem(t, file)
	ct, key, _ := alone1.PublicKey().Encapsulate(nil)
	if wins := raceDecapsulate(t, []*KeyState{alone1, alone2}, ct, key); wins != 2 {
		t.Fatalf("without a shared log %d members decapsulated; the test's premise is wrong", wins)
	}
}

func raceDecapsulate(t *testing.T, members []*KeyState, ct, key []byte) int {
	t.Helper()
	var wg sync.WaitGroup
	results := make(chan error, len(members))
	start := make(chan struct{})
	for _, ks := range members {
		wg.Go(func() {
			<-start
			got, err := ks.Decapsulate(context.Background(), ct)
			if err == nil && !bytes.Equal(got, key) {
				err = errors.New("wrong key")
			}
			results <- err
		})
	}
	close(start)
	wg.Wait()
	close(results)
	wins := 0
	for err := range results {
		switch {
		case err == nil:
			wins++
		case !errors.Is(err, ErrPunctured):
			t.Fatalf("losing decapsulation: %v, want ErrPunctured", err)
		}
	}
	return wins
}

type failingLog struct{}

func (failingLog) TestAndSet(context.Context, uint64, []uint32) ([]bool, error) {
	return nil, errors.New("redis: connection refused")
}

// TestPunctureLogDownFailsClosed: when the shared log cannot answer, the
// ciphertext is refused and no key comes back.
func TestPunctureLogDownFailsClosed(t *testing.T) {
	ks, err := openKeyState(newMemFile(keyFile(t, defaultTestParams)), &Options{Log: failingLog{}})
	if err != nil {
		t.Fatal(err)
	}
	ct, _, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	if key, err := ks.Decapsulate(context.Background(), ct); err == nil || key != nil {
		t.Fatalf("with the log down: %x, %v", key, err)
	}
}

// TestDecapsulateWithSomePunctured: a valid ciphertext some of whose
// positions other ciphertexts have punctured still decapsulates to its key,
// with the first slot left, however many are gone before it.
func TestDecapsulateWithSomePunctured(t *testing.T) {
	file, ct, key, pos := fileAndCiphertext(t)
	for gone := 1; gone < len(pos); gone++ {
		ks := openPunctured(t, file, pos, gone)
		if got, err := ks.Decapsulate(context.Background(), ct); err != nil || !bytes.Equal(got, key) {
			t.Fatalf("%d of %d positions punctured: %x, %v; want %x", gone, len(pos), got, err, key)
		}
	}
}

// fileAndCiphertext makes a test key file and a ciphertext for it, with
// the ciphertext's key and positions.
func fileAndCiphertext(t *testing.T) (file, ct, key []byte, pos []uint32) {
	t.Helper()
	file = keyFile(t, defaultTestParams)
	ks, _ := openMem(t, file)
	pk := ks.PublicKey()
	ct, key, err := pk.Encapsulate(nil)
	if err != nil {
		t.Fatal(err)
	}
	return file, ct, key, positions(&pk.digest, pk.params, ct[:g2Compressed], nil)
}

// openPunctured opens a fresh copy of file with the first n of pos
// punctured in memory, except any equal to the last position, which stays.
func openPunctured(t *testing.T, file []byte, pos []uint32, n int) *KeyState {
	t.Helper()
	ks, _ := openMem(t, file)
	for _, i := range pos[:n] {
		if i != pos[len(pos)-1] {
			ks.setPunctured(i)
		}
	}
	return ks
}
