package suite

import (
	"bytes"
	"crypto"
	"encoding/hex"
	"testing"
)

func TestLookup(t *testing.T) {
	tests := []struct {
		id     uint16
		name   string
		hash   crypto.Hash
		keyLen int
	}{
		{TLS_AES_128_GCM_SHA256, "TLS_AES_128_GCM_SHA256", crypto.SHA256, 16},
		{TLS_AES_256_GCM_SHA384, "TLS_AES_256_GCM_SHA384", crypto.SHA384, 32},
		{TLS_CHACHA20_POLY1305_SHA256, "TLS_CHACHA20_POLY1305_SHA256", crypto.SHA256, 32},
	}
	for _, tt := range tests {
		s := Lookup(tt.id)
		if s == nil {
			t.Fatalf("Lookup(%#04x) = nil", tt.id)
		}
		if s.ID != tt.id || s.Name != tt.name || s.Hash != tt.hash || s.KeyLen != tt.keyLen {
			t.Errorf("Lookup(%#04x) = {%#04x %q %v %d}, want {%#04x %q %v %d}",
				tt.id, s.ID, s.Name, s.Hash, s.KeyLen, tt.id, tt.name, tt.hash, tt.keyLen)
		}
		if !s.Hash.Available() {
			t.Errorf("%s: hash %v not linked in", s.Name, s.Hash)
		}
		if got := Name(tt.id); got != tt.name {
			t.Errorf("Name(%#04x) = %q, want %q", tt.id, got, tt.name)
		}
		if s.String() != tt.name {
			t.Errorf("String() = %q", s.String())
		}
	}
}

func TestLookupUnsupported(t *testing.T) {
	for _, id := range []uint16{0x0000, 0x1304, 0x1305, 0xc02f, 0xffff} {
		if s := Lookup(id); s != nil {
			t.Errorf("Lookup(%#04x) = %s, want nil", id, s.Name)
		}
	}
	if got := Name(0x1305); got != "0x1305" {
		t.Errorf("Name(0x1305) = %q", got)
	}
	if got := Name(0x0a0a); got != "0x0a0a" {
		t.Errorf("Name(0x0a0a) = %q", got)
	}
}

func ids(ss []*Suite) []uint16 {
	var out []uint16
	for _, s := range ss {
		out = append(out, s.ID)
	}
	return out
}

func TestOrder(t *testing.T) {
	withAES := ids(order(true))
	want := []uint16{TLS_AES_128_GCM_SHA256, TLS_CHACHA20_POLY1305_SHA256, TLS_AES_256_GCM_SHA384}
	if !equalIDs(withAES, want) {
		t.Errorf("order(true) = %x, want %x", withAES, want)
	}
	without := ids(order(false))
	want = []uint16{TLS_CHACHA20_POLY1305_SHA256, TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384}
	if !equalIDs(without, want) {
		t.Errorf("order(false) = %x, want %x", without, want)
	}
	if got, want := ids(All()), ids(order(hasAESHardware())); !equalIDs(got, want) {
		t.Errorf("All() = %x, want %x", got, want)
	}
}

func equalIDs(a, b []uint16) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAllIsACopy(t *testing.T) {
	a := All()
	first := a[0]
	a[0], a[1] = a[1], a[0]
	if All()[0] != first {
		t.Fatal("reordering the slice from All changed the default preference")
	}
}

func TestNewAEAD(t *testing.T) {
	for _, s := range All() {
		key := bytes.Repeat([]byte{0x42}, s.KeyLen)
		aead, err := s.NewAEAD(key)
		if err != nil {
			t.Fatalf("%s: %v", s.Name, err)
		}
		if aead.NonceSize() != 12 || aead.Overhead() != 16 {
			t.Errorf("%s: nonce %d overhead %d, want 12 and 16", s.Name, aead.NonceSize(), aead.Overhead())
		}
		nonce := make([]byte, 12)
		msg := []byte("hello, record layer")
		ct := aead.Seal(nil, nonce, msg, []byte("ad"))
		pt, err := aead.Open(nil, nonce, ct, []byte("ad"))
		if err != nil || !bytes.Equal(pt, msg) {
			t.Errorf("%s: round trip = %q, %v", s.Name, pt, err)
		}
		for _, n := range []int{0, 15, s.KeyLen - 1, s.KeyLen + 1, 24} {
			if n == s.KeyLen {
				continue
			}
			if _, err := s.NewAEAD(make([]byte, n)); err == nil {
				t.Errorf("%s: NewAEAD accepted a %d-byte key", s.Name, n)
			}
		}
	}
}

// TestAES128GCMKnownAnswer checks the AES-128-GCM wiring against the
// NIST GCM test case 3 (McGrew and Viega, "The Galois/Counter Mode of
// Operation", Appendix B), so the suite is not only self-consistent.
func TestAES128GCMKnownAnswer(t *testing.T) {
	key := unhex(t, "feffe9928665731c6d6a8f9467308308")
	nonce := unhex(t, "cafebabefacedbaddecaf888")
	pt := unhex(t, "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b391aafd255")
	want := unhex(t, "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091473f5985"+
		"4d5c2af327cd64a62cf35abd2ba6fab4")
	aead, err := Lookup(TLS_AES_128_GCM_SHA256).NewAEAD(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := aead.Seal(nil, nonce, pt, nil); !bytes.Equal(got, want) {
		t.Errorf("Seal = %x, want %x", got, want)
	}
}

// TestChaCha20Poly1305KnownAnswer uses the AEAD test vector of RFC 8439,
// Section 2.8.2.
func TestChaCha20Poly1305KnownAnswer(t *testing.T) {
	key := unhex(t, "808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
	nonce := unhex(t, "070000004041424344454647")
	ad := unhex(t, "50515253c0c1c2c3c4c5c6c7")
	pt := []byte("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.")
	want := unhex(t, "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116"+
		"1ae10b594f09e26a7e902ecbd0600691")
	aead, err := Lookup(TLS_CHACHA20_POLY1305_SHA256).NewAEAD(key)
	if err != nil {
		t.Fatal(err)
	}
	if got := aead.Seal(nil, nonce, pt, ad); !bytes.Equal(got, want) {
		t.Errorf("Seal = %x, want %x", got, want)
	}
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatalf("bad hex %q: %v", s, err)
	}
	return b
}
