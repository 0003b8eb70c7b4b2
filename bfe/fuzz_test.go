package bfe

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func FuzzParsePublicKey(f *testing.F) {
	pk := testPublicKey(f)
	f.Add(pk.Bytes())
	f.Add(make([]byte, PublicKeySize))
	f.Fuzz(func(t *testing.T, b []byte) {
		pk, err := ParsePublicKey(b)
		if err != nil {
			return
		}
		if !bytes.Equal(pk.Bytes(), b) { // only canonical encodings parse
			t.Fatalf("parsed %x re-encodes as %x", b, pk.Bytes())
		}
		if _, err := ParsePublicKey(b[:len(b)-1]); err == nil {
			t.Fatal("a truncated public key parses")
		}
	})
}

func FuzzParseCiphertext(f *testing.F) {
	pk := testPublicKey(f)
	ct, _, err := pk.Encapsulate(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ct)
	f.Add(ct[:g2Compressed])
	f.Fuzz(func(t *testing.T, b []byte) {
		c0, err := pk.parseCiphertext(b)
		if err != nil {
			return
		}
		enc := c0.Bytes()
		if len(b) != pk.params.CiphertextSize() || !bytes.Equal(enc[:], b[:g2Compressed]) || c0.IsInfinity() || !c0.IsInSubGroup() {
			t.Fatalf("accepted %x", b)
		}
	})
}

func FuzzParseKeyFileHeader(f *testing.F) {
	pk := testPublicKey(f)
	f.Add(encodeKeyFileHeader(pk))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseKeyFileHeader(b)
		if err == nil && !bytes.Equal(encodeKeyFileHeader(got), b) {
			t.Fatalf("header %x re-encodes differently", b)
		}
	})
}

// FuzzDecapsulate feeds arbitrary ciphertexts to a fresh key state: nothing
// panics, nothing but ErrInvalidCiphertext or ErrPunctured comes back for
// what Encapsulate did not make, and a ciphertext that does decapsulate
// never does so twice.
func FuzzDecapsulate(f *testing.F) {
	file := keyFile(f, defaultTestParams)
	ks, _ := openMem(f, file)
	ct, _, err := ks.PublicKey().Encapsulate(nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ct)
	f.Fuzz(func(t *testing.T, b []byte) {
		ks, _ := openMem(t, file)
		_, err := ks.Decapsulate(context.Background(), b)
		switch {
		case err == nil:
			if _, err := ks.Decapsulate(context.Background(), b); !errors.Is(err, ErrPunctured) {
				t.Fatalf("decapsulated twice: %v", err)
			}
		case !errors.Is(err, ErrInvalidCiphertext) && !errors.Is(err, ErrPunctured):
			t.Fatalf("unexpected error %v", err)
		}
	})
}
