package tls13

import (
	"fmt"
	"testing"
)

func TestCodepointsPrintTheirNames(t *testing.T) {
	for _, c := range []struct {
		v    fmt.Stringer
		want string
	}{
		{X25519, "x25519"},
		{P256, "secp256r1"},
		{X25519MLKEM768, "X25519MLKEM768"},
		{CurveID(0x001e), "0x001e"},
		{TLS_AES_128_GCM_SHA256, "TLS_AES_128_GCM_SHA256"},
		{TLS_CHACHA20_POLY1305_SHA256, "TLS_CHACHA20_POLY1305_SHA256"},
		{CipherSuite(0x1305), "0x1305"},
		{ECDSAWithP256AndSHA256, "ecdsa_secp256r1_sha256"},
		{PSSPSSWithSHA256, "rsa_pss_pss_sha256"},
		{Ed25519, "ed25519"},
		{SignatureScheme(0x0808), "0x0808"},
		{AlertHandshakeFailure, "handshake_failure"},
		{PSKModeKE, "psk_ke"},
		{PSKModeDHEKE, "psk_dhe_ke"},
		{PSKMode(7), "0x07"},
		{ExtensionZTLS, "ztls"},
		{ExtensionType(0x0033), "key_share"},
		{ExtensionType(0xfe77), "0xfe77"},
	} {
		if got := c.v.String(); got != c.want {
			t.Errorf("%T(%d).String() = %q, want %q", c.v, c.v, got, c.want)
		}
		if got := fmt.Sprint(c.v); got != c.want {
			t.Errorf("fmt.Sprint = %q, want %q", got, c.want)
		}
	}
}
