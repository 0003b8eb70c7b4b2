package kex

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"testing"

	"github.com/ztls-project/ztls/tls13/internal/mlkem768"
	"github.com/ztls-project/ztls/tls13/internal/sig"
)

// BenchmarkKeyExchange times each group's three operations as a handshake
// runs them, named as bench/rustls's --primitives mode names rustls's
// (ring and aws-lc-rs through rustls's SupportedKxGroup), so the two sit
// side by side: keygen makes a client share and its public bytes; client
// makes a share and computes the secret with a server's answer; server
// answers a client's share (ServerShare). Randomness is crypto/rand's, as
// in a handshake. ML-KEM is package mlkem768's choice here (mlkem768.Fast).
// ecdsa-p256/sign is the server's other public-key operation, its
// CertificateVerify signature (package sig: p256sign for a P-256 key), beside
// the same signature by rustls's providers (--primitives with a key).
func BenchmarkKeyExchange(b *testing.B) {
	b.Logf("mlkem768.Fast() = %v", mlkem768.Fast())
	for _, g := range []struct {
		name  string
		group uint16
	}{{"x25519", X25519}, {"x25519mlkem768", X25519MLKEM768}} {
		cs, err := GenerateClientShare(g.group, nil)
		if err != nil {
			b.Fatal(err)
		}
		clientPub := cs.Public()
		serverPub, _, err := ServerShare(g.group, clientPub, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(g.name+"/keygen/ztls", func(b *testing.B) {
			for b.Loop() {
				cs, err := GenerateClientShare(g.group, nil)
				if err != nil {
					b.Fatal(err)
				}
				_ = cs.Public()
			}
		})
		b.Run(g.name+"/client/ztls", func(b *testing.B) {
			for b.Loop() {
				cs, err := GenerateClientShare(g.group, nil)
				if err != nil {
					b.Fatal(err)
				}
				_ = cs.Public()
				if _, err := cs.Shared(serverPub); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(g.name+"/server/ztls", func(b *testing.B) {
			for b.Loop() {
				if _, _, err := ServerShare(g.group, clientPub, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("ecdsa-p256/sign/ztls", func(b *testing.B) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		th := make([]byte, 32)
		for b.Loop() {
			if _, err := sig.Sign(rand.Reader, key, 0x0403, "TLS 1.3, server CertificateVerify", th); err != nil {
				b.Fatal(err)
			}
		}
	})
}
