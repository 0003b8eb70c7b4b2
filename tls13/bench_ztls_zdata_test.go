package tls13

import (
	"crypto/ecdh"
	"crypto/rand"
	"testing"
)

// BenchmarkZTLSServerFirstFlightZData is BenchmarkZTLSServerFirstFlight's
// ecdsa-p256 case with the Z-data key's ZS computed as package zdata's
// server computes it (zdata.SharedSecret: X25519SharedSecret, the
// engine's ladder) rather than with crypto/ecdh as the tests' helper
// newZData does: the first flight of a server run from a zdata key ring.
// full-tls13 is the same server without ztls, for the ratio in one run.
func BenchmarkZTLSServerFirstFlightZData(b *testing.B) {
	offer, ccfg, scfg := ztlsBench(b, "ecdsa-p256")
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	scalar := priv.Bytes()
	offer.Share = priv.PublicKey().Bytes()
	scfg.ZData.(*testZKeys).keys[0].ECDH = func(peer []byte) ([]byte, error) {
		return X25519SharedSecret(scalar, peer)
	}
	benchServerModes(b, offer, ccfg, scfg)
}
