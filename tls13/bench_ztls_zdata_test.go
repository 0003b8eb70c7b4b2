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
	for _, mode := range []string{"full-tls13", "ztls"} {
		b.Run(mode, func(b *testing.B) {
			flights := make([][]byte, b.N)
			for i := range flights {
				cli := newEngine(ccfg, true)
				var z *ZDataOffer
				var early []byte
				if mode == "ztls" {
					z, early = offer, []byte("GET /")
				}
				if err := cli.startClient(nil, z, early); err != nil {
					b.Fatal(err)
				}
				flights[i] = cli.takeOutput()
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				srv := newEngine(scfg, false)
				srv.startServer()
				if err := srv.feed(flights[i]); err != nil {
					b.Fatal(err)
				}
				if len(srv.takeOutput()) == 0 || srv.info.ZTLS != (mode == "ztls") {
					b.Fatal("no server flight, or ZTLS not as expected")
				}
			}
		})
	}
}
