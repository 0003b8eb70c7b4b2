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
		b.Run(m.name, func(b *testing.B) {
			benchServerAccept(b, ccfg, scfg, m.offer, checkPQAccept(m.offer != nil))
		})
	}
}

// checkPQAccept fails b unless the server sent its first flight, took
// ztls as offered (wantZTLS) and used X25519MLKEM768 for the handshake.
func checkPQAccept(wantZTLS bool) func(b *testing.B, srv *engine, flight []byte) {
	return func(b *testing.B, srv *engine, flight []byte) {
		if len(flight) == 0 || srv.info.ZTLS != wantZTLS || srv.info.Group != X25519MLKEM768 {
			b.Fatalf("no server flight, or not as expected: ztls %v (%s), group %s", srv.info.ZTLS, srv.info.ZTLSRejectReason, srv.info.Group)
		}
	}
}
