package suite

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	_ "crypto/sha256" // registers crypto.SHA256 for Suite.Hash
	_ "crypto/sha512" // registers crypto.SHA384 for Suite.Hash
	"fmt"
	"runtime"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/sys/cpu"
)

// Cipher suite codepoints, RFC 8446, Section B.4.
const (
	TLS_AES_128_GCM_SHA256       uint16 = 0x1301
	TLS_AES_256_GCM_SHA384       uint16 = 0x1302
	TLS_CHACHA20_POLY1305_SHA256 uint16 = 0x1303
)

// Suite is one TLS 1.3 cipher suite: the AEAD that protects records and the
// hash that drives HKDF in the key schedule. The values returned by Lookup and
// All are shared by all callers; treat them as read-only.
type Suite struct {
	// ID is the codepoint sent on the wire.
	ID uint16
	// Name is the IANA name, e.g. "TLS_AES_128_GCM_SHA256".
	Name string
	// Hash is the key schedule and transcript hash (SHA-256 or SHA-384).
	Hash crypto.Hash
	// KeyLen is the AEAD key length in bytes (16 or 32).
	KeyLen int
}

// NewAEAD returns the record protection AEAD for a key of KeyLen bytes.
// Every AEAD of TLS 1.3 uses a 12-byte nonce and a 16-byte tag. It is a
// method that calls the constructors directly, rather than a function
// field, so the key does not escape: the record layer derives it into a
// stack buffer.
func (s *Suite) NewAEAD(key []byte) (cipher.AEAD, error) {
	switch s.ID {
	case TLS_AES_128_GCM_SHA256:
		return newGCM(key, 16)
	case TLS_AES_256_GCM_SHA384:
		return newGCM(key, 32)
	case TLS_CHACHA20_POLY1305_SHA256:
		return newChaCha20Poly1305(key)
	}
	return nil, fmt.Errorf("suite: no AEAD for cipher suite %s", Name(s.ID))
}

// String returns the suite's name.
func (s *Suite) String() string { return s.Name }

// newGCM builds AES-GCM for a key of exactly keyLen bytes, so that a caller
// passing a 32-byte key to the 128-bit suite is told rather than silently
// upgraded.
func newGCM(key []byte, keyLen int) (cipher.AEAD, error) {
	if len(key) != keyLen {
		return nil, fmt.Errorf("suite: AES-GCM key is %d bytes, want %d", len(key), keyLen)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("suite: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("suite: %w", err)
	}
	return aead, nil
}

func newChaCha20Poly1305(key []byte) (cipher.AEAD, error) {
	if len(key) != chacha20poly1305.KeySize {
		return nil, fmt.Errorf("suite: ChaCha20-Poly1305 key is %d bytes, want %d", len(key), chacha20poly1305.KeySize)
	}
	aead, err := chacha20poly1305.New(key)
	if err != nil {
		return nil, fmt.Errorf("suite: %w", err)
	}
	return aead, nil
}

var (
	aes128GCM = &Suite{
		ID:     TLS_AES_128_GCM_SHA256,
		Name:   "TLS_AES_128_GCM_SHA256",
		Hash:   crypto.SHA256,
		KeyLen: 16,
	}
	aes256GCM = &Suite{
		ID:     TLS_AES_256_GCM_SHA384,
		Name:   "TLS_AES_256_GCM_SHA384",
		Hash:   crypto.SHA384,
		KeyLen: 32,
	}
	chacha20 = &Suite{
		ID:     TLS_CHACHA20_POLY1305_SHA256,
		Name:   "TLS_CHACHA20_POLY1305_SHA256",
		Hash:   crypto.SHA256,
		KeyLen: chacha20poly1305.KeySize,
	}
)

// preference is computed once: the CPU does not change under us.
var preference = order(hasAESHardware())

// hasAESHardware reports whether AES-GCM runs in constant time and fast on
// this CPU (AES instructions plus carry-less multiply for GHASH). Without
// them ChaCha20-Poly1305 is both faster and safer against timing attacks.
func hasAESHardware() bool {
	switch runtime.GOARCH {
	case "amd64", "386":
		return cpu.X86.HasAES && cpu.X86.HasPCLMULQDQ
	case "arm64":
		return cpu.ARM64.HasAES && cpu.ARM64.HasPMULL
	case "s390x":
		return cpu.S390X.HasAES && cpu.S390X.HasAESGCM
	case "ppc64", "ppc64le":
		// POWER8 and later have vector AES, which Go's AES-GCM uses.
		return cpu.PPC64.IsPOWER8
	}
	return false
}

func order(aesFirst bool) []*Suite {
	if aesFirst {
		return []*Suite{aes128GCM, chacha20, aes256GCM}
	}
	return []*Suite{chacha20, aes128GCM, aes256GCM}
}

// Lookup returns the suite with codepoint id, or nil if ztls does not
// support it.
func Lookup(id uint16) *Suite {
	switch id {
	case TLS_AES_128_GCM_SHA256:
		return aes128GCM
	case TLS_AES_256_GCM_SHA384:
		return aes256GCM
	case TLS_CHACHA20_POLY1305_SHA256:
		return chacha20
	}
	return nil
}

// All returns every supported suite in the default order of preference:
// AES-128-GCM, ChaCha20-Poly1305, AES-256-GCM when the CPU has AES hardware,
// otherwise ChaCha20-Poly1305 first. The slice is a fresh copy the caller may
// reorder.
func All() []*Suite {
	return append([]*Suite(nil), preference...)
}

// Name returns the IANA name of a supported suite, or the codepoint in hex
// (e.g. "0x1305") for any other value, for logs and error messages.
func Name(id uint16) string {
	if s := Lookup(id); s != nil {
		return s.Name
	}
	return fmt.Sprintf("0x%04x", id)
}
