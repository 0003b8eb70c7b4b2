package kex

import (
	"bytes"
	"crypto/ecdh"
	"testing"
)

// TestX25519Shared: the function for keys held outside the package gives
// crypto/ecdh's secret, refuses a low-order peer and wrong lengths, and
// leaves the caller's scalar alone.
func TestX25519Shared(t *testing.T) {
	scalar := bytes.Repeat([]byte{0x42}, 32)
	priv, err := ecdh.X25519().NewPrivateKey(scalar)
	if err != nil {
		t.Fatal(err)
	}
	peer, _ := ecdh.X25519().NewPrivateKey(bytes.Repeat([]byte{0x17}, 32))
	want, _ := priv.ECDH(peer.PublicKey())
	got, err := X25519Shared(scalar, peer.PublicKey().Bytes())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("X25519Shared = %x, %v; crypto/ecdh %x", got, err, want)
	}
	if !bytes.Equal(scalar, bytes.Repeat([]byte{0x42}, 32)) {
		t.Fatal("the caller's scalar was changed")
	}
	if _, err := X25519Shared(scalar, make([]byte, 32)); err == nil {
		t.Fatal("the all-zero result of u = 0 was accepted")
	}
	if _, err := X25519Shared(scalar[:31], peer.PublicKey().Bytes()); err == nil {
		t.Fatal("a 31-byte scalar was accepted")
	}
	if _, err := X25519Shared(scalar, peer.PublicKey().Bytes()[:31]); err == nil {
		t.Fatal("a 31-byte peer was accepted")
	}
}
