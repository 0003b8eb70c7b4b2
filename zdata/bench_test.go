package zdata

import (
	"testing"
	"time"
)

func BenchmarkParseTXT(b *testing.B) {
	f := newFixture(b, "ecdsa-p256", Options{}, nil)
	txt := f.issue(b, t0).Record.TXT()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseTXT(txt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSelect is the client's whole Z-data check: parse, share,
// validity, signature, chain and name.
func BenchmarkSelect(b *testing.B) {
	for _, keyType := range []string{"ecdsa-p256", "ed25519", "rsa2048"} {
		b.Run(keyType, func(b *testing.B) {
			f := newFixture(b, keyType, Options{}, nil)
			k := f.issue(b, t0)
			txt, tlsa, roots := txtOf(k), f.tlsa(), f.roots()
			for b.Loop() {
				if _, _, err := selectOne(txt, tlsa, nil, testHost, testPort, roots, t0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkIssue(b *testing.B) {
	f := newFixture(b, "ecdsa-p256", Options{}, nil)
	for b.Loop() {
		f.issue(b, t0)
	}
}

// BenchmarkLookupZData is the server's per-handshake cost: the lookup and
// the semi-static ECDH.
func BenchmarkLookupZData(b *testing.B) {
	f := newFixture(b, "ecdsa-p256", Options{}, nil)
	k := f.issue(b, t0)
	f.svc.Keyring.Add(k)
	h := k.Record.ZDataHash()
	share, _ := clientSecret(b, k.Record.Group, k.Record.KeyShare)
	now := t0.Add(time.Minute)
	b.ReportAllocs()
	for b.Loop() {
		zk := f.svc.Keyring.LookupZData(k.Record.ID, h, now)
		if _, err := zk.ECDH(share); err != nil {
			b.Fatal(err)
		}
	}
}
