package tls13

import (
	"crypto/ecdh"
	"testing"
	"time"
)

// BenchmarkServerZTLSPostQuantum compares, side by side in one run, a
// server's work per accepted handshake (docs/ztls-spec.md, Section 9):
//
//   - ztls-x25519: classical ZTLS (an x25519 Z-data key), as today;
//   - ztls-x25519mlkem768: post-quantum ZTLS (an X25519MLKEM768 Z-data
//     key: one ML-KEM-768 decapsulation and one x25519 for ZS);
//   - full-tls13: a full TLS 1.3 handshake without ztls.
//
// Every client offers an X25519MLKEM768 key share for the handshake (the
// default configuration's first group), so the server's fresh exchange
// is the same ML-KEM-768 encapsulation and x25519 in all three; ECDSA
// P-256 leaf, AES-128-GCM, no tickets. The client flights are made before
// the timer starts: ns/op is the server's work from the ClientHello (and
// the early request) to its whole first flight, where every public-key
// operation of its handshake happens.
func BenchmarkServerZTLSPostQuantum(b *testing.B) {
	p := getPKI(b, "ecdsa-p256")
	classical, ckey := newZData(b, ecdh.X25519(), X25519, "localhost", "", p)
	pq, pqKey, _ := newPQZData(b, "localhost", nil, p)
	ccfg := benchClientConfig(p, X25519MLKEM768)
	ccfg.SessionTicketsDisabled = true
	scfg := serverConfig(p)
	scfg.ZData = &testZKeys{keys: []*ZDataKey{ckey, pqKey}}
	scfg.StrikeRegister = NewMemoryStrikeRegister(1<<30, time.Time{})
	scfg.SessionTicketsDisabled = true
	for _, m := range []struct {
		name  string
		offer *ZDataOffer
	}{{"ztls-x25519", classical}, {"ztls-x25519mlkem768", pq}, {"full-tls13", nil}} {
		b.Run(m.name, func(b *testing.B) { benchServerAccept(b, ccfg, scfg, m.offer) })
	}
}

// benchServerAccept times the server's first flight for b.N client
// flights made ahead with offer (nil: no ztls).
func benchServerAccept(b *testing.B, ccfg, scfg *Config, offer *ZDataOffer) {
	flights := make([][]byte, b.N)
	for i := range flights {
		cli := newEngine(ccfg, true)
		var early []byte
		if offer != nil {
			early = []byte("GET /")
		}
		if err := cli.startClient(nil, offer, early); err != nil {
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
		if len(srv.takeOutput()) == 0 || srv.info.ZTLS != (offer != nil) || srv.info.Group != X25519MLKEM768 {
			b.Fatalf("no server flight, or not as expected: ztls %v (%s), group %s", srv.info.ZTLS, srv.info.ZTLSRejectReason, srv.info.Group)
		}
	}
}
