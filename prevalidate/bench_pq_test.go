package prevalidate_test

// Client CPU from the click for post-quantum ZTLS (docs/ztls-spec.md,
// Section 9), side by side in one run with classical ZTLS and a full
// TLS 1.3 handshake whose key exchange is X25519MLKEM768 (the default
// groups), cold and prefetched, on the harness of BenchmarkCriticalPathCPU
// (bench_prefetch_test.go: nothing waits on a network, only the
// client's work is timed):
//
//	flock /tmp/bench.lock go test ./prevalidate -run '^$' -bench ClientPQFromClick -cpu 1 -count 5
//
//   - ztls-x25519: a classical service's records (v1, x25519 Z-data);
//   - ztls-x25519mlkem768: a service publishing v3 records beside
//     announcing classical ones; the client selects the v3 record. Cold,
//     the click pays the 4.1 kB TXT answer's unpacking, the v3 record's
//     checks (FIPS 203's on its key among them) and the encapsulation;
//     prefetched, the encapsulation was made ahead (one kem_share per
//     ClientHello, made off the clock here as the cache makes it in the
//     background);
//   - tls13: a full handshake, from the click to the request sent after
//     the server's flight (the classical service's answers).
//
// Every client uses the default groups: its ClientHello carries an
// X25519MLKEM768 key share for the handshake (ML-KEM key generation at
// the click, not made ahead). flight-B is the first flight's size: the
// ClientHello and, for ZTLS, the early request's record.

import (
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

func BenchmarkClientPQFromClick(b *testing.B) {
	classical := newBenchService(b)
	pq := newBenchServiceWith(b, lab.Options{PostQuantum: true})
	for _, v := range []struct {
		name string
		s    *benchService
	}{{"ztls-x25519", classical}, {"ztls-x25519mlkem768", pq}} {
		b.Run(v.name+"/cold", func(b *testing.B) { v.s.ztls(b, v.s.cfg, false) })
		b.Run(v.name+"/prefetched", func(b *testing.B) { v.s.ztls(b, v.s.cfg, true) })
	}
	b.Run("tls13/cold", func(b *testing.B) { classical.tls13(b, classical.cfg, false) })
	b.Run("tls13/prefetched", func(b *testing.B) { classical.tls13(b, classical.cfg, true) })
}
