package zdata

import (
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"testing"
)

// TestSmallOrderTable: every listed x25519 u-coordinate (and its encoding
// with the top bit set) makes crypto/ecdh refuse the exchange as low
// order, so the table refuses nothing crypto/ecdh would accept; random
// shares and a real public key pass.
func TestSmallOrderTable(t *testing.T) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range x25519SmallOrder {
		for _, top := range []byte{0, 0x80} {
			enc := u
			enc[31] |= top
			pub, err := ecdh.X25519().NewPublicKey(enc[:])
			if err != nil {
				t.Fatal(err)
			}
			if _, err := priv.ECDH(pub); err == nil {
				t.Errorf("entry %d (top bit %#x): crypto/ecdh accepts it, so it is not of small order", i, top)
			}
			if !x25519LowOrder(enc[:]) {
				t.Errorf("entry %d (top bit %#x) not refused", i, top)
			}
			if err := ValidateShare(GroupX25519, enc[:]); !errors.Is(err, ErrInvalidShare) {
				t.Errorf("entry %d: ValidateShare = %v", i, err)
			}
		}
	}
	for i := 0; i < 64; i++ {
		k, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if err := ValidateShare(GroupX25519, k.PublicKey().Bytes()); err != nil {
			t.Fatalf("a real public key refused: %v", err)
		}
	}
}
