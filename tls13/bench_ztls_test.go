package tls13

import (
	"context"
	"crypto/ecdh"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/bfe"
)

// ztlsPair runs one ZTLS handshake (ClientHello + ztls + early request,
// server first flight with certificate omitted, client Finished) between
// two engines, timing each side.
func ztlsPair(ccfg, scfg *Config, offer *ZDataOffer, request []byte) (ct, st time.Duration, err error) {
	t0 := clock.Now()
	cli := newEngine(ccfg, true)
	if err := cli.startClient(nil, offer, request); err != nil {
		return 0, 0, err
	}
	first := cli.takeOutput()
	t1 := clock.Now()
	srv := newEngine(scfg, false)
	srv.startServer()
	if err := srv.feed(first); err != nil {
		return 0, 0, err
	}
	flight := srv.takeOutput()
	t2 := clock.Now()
	if err := cli.feed(flight); err != nil {
		return 0, 0, err
	}
	fin := cli.takeOutput()
	t3 := clock.Now()
	if err := srv.feed(fin); err != nil {
		return 0, 0, err
	}
	srv.takeOutput()
	t4 := clock.Now()
	if !cli.done || !srv.done || !cli.info.ZTLS {
		return 0, 0, errors.New("ZTLS handshake did not complete")
	}
	return t1.Sub(t0) + t3.Sub(t2), t2.Sub(t1) + t4.Sub(t3), nil
}

// ztlsBench is the ZTLS benchmarks' setup: a Z-data key (x25519) for a
// server whose leaf has key type leafKey, its offer, and the two configs
// (AES-128-GCM, no tickets, a strike register that never fills up).
func ztlsBench(b *testing.B, leafKey string) (offer *ZDataOffer, ccfg, scfg *Config) {
	p := getPKI(b, leafKey)
	offer, key := newZData(b, ecdh.X25519(), X25519, "localhost", "", p)
	ccfg = benchClientConfig(p, X25519)
	scfg = serverConfig(p)
	scfg.ZData = &testZKeys{keys: []*ZDataKey{key}}
	scfg.StrikeRegister = NewMemoryStrikeRegister(1<<30, time.Time{})
	scfg.SessionTicketsDisabled = true
	ccfg.SessionTicketsDisabled = true
	return offer, ccfg, scfg
}

// BenchmarkZTLS compares, in one run, a server's (and client's) cost of a
// ZTLS handshake with a full TLS 1.3 handshake: x25519, ECDSA P-256,
// AES-128-GCM. ZTLS adds one ECDH on each side and drops the Certificate.
func BenchmarkZTLS(b *testing.B) {
	offer, ccfg, scfg := ztlsBench(b, "ecdsa-p256")
	b.Run("full-tls13", func(b *testing.B) {
		b.ReportAllocs()
		var ct, st time.Duration
		for i := 0; i < b.N; i++ {
			_, _, c, s, err := enginePair(ccfg, scfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			ct, st = ct+c, st+s
		}
		reportSides(b, ct, st)
	})
	b.Run("ztls", func(b *testing.B) {
		b.ReportAllocs()
		var ct, st time.Duration
		for i := 0; i < b.N; i++ {
			c, s, err := ztlsPair(ccfg, scfg, offer, []byte("GET /"))
			if err != nil {
				b.Fatal(err)
			}
			ct, st = ct+c, st+s
		}
		reportSides(b, ct, st)
	})
}

// BenchmarkZTLSServerFirstFlight isolates the server's side: the client
// first flights (full ClientHello, or ClientHello + ztls + early request)
// are made before the timer starts, so ns/op is the server's work from
// the ClientHello to its whole first flight, where every public-key
// operation of its handshake happens.
// The leaf's key type sets the denominator: the server's signature.
func BenchmarkZTLSServerFirstFlight(b *testing.B) {
	for _, leafKey := range []string{"ecdsa-p256", "ed25519", "rsa2048"} {
		b.Run(leafKey, func(b *testing.B) { benchServerFirstFlight(b, leafKey) })
	}
}

func benchServerFirstFlight(b *testing.B, leafKey string) {
	offer, ccfg, scfg := ztlsBench(b, leafKey)
	benchServerModes(b, offer, ccfg, scfg)
}

// benchServerModes runs benchServerAccept as full-tls13 (no offer) and as
// ztls (offer), for the ratio in one run.
func benchServerModes(b *testing.B, offer *ZDataOffer, ccfg, scfg *Config) {
	for _, mode := range []string{"full-tls13", "ztls"} {
		b.Run(mode, func(b *testing.B) {
			var z *ZDataOffer
			if mode == "ztls" {
				z = offer
			}
			benchServerAccept(b, ccfg, scfg, z, func(b *testing.B, srv *engine, flight []byte) {
				if len(flight) == 0 || srv.info.ZTLS != (mode == "ztls") {
					b.Fatal("no server flight, or ZTLS not as expected")
				}
			})
		})
	}
}

// benchServerAccept times the server's first flight for b.N client
// flights made ahead with offer (nil: no ztls; else with an early
// request); check fails b when a server's flight is not as expected.
func benchServerAccept(b *testing.B, ccfg, scfg *Config, offer *ZDataOffer, check func(b *testing.B, srv *engine, flight []byte)) {
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
		check(b, srv, srv.takeOutput())
	}
}

// BenchmarkZTLSAfterIdle times the two steps of a ZTLS handshake that
// sit on the testbed's critical path, the server's first flight and the
// client's processing of it, once back to back ("busy", as every other
// benchmark here runs) and once after the process sat idle ("idle-20ms":
// a visit's one-way delay at 39.8 ms RTT, during which the testbed's client
// and server wait). ns/op includes the idle time; server-flight-ns/op
// and client-flight-ns/op are the two steps alone. The difference is what
// a core that did something else meanwhile costs (caches, predictors):
// docs/testbed.md, "Prefetch and prevalidate", where the testbed's excess
// over whole round trips is taken apart.
func BenchmarkZTLSAfterIdle(b *testing.B) {
	offer, ccfg, scfg := ztlsBench(b, "ecdsa-p256")
	for _, idle := range []time.Duration{0, 20 * time.Millisecond} {
		name := "busy"
		if idle > 0 {
			name = "idle-" + idle.String()
		}
		b.Run(name, func(b *testing.B) {
			var st, ct time.Duration
			for i := 0; i < b.N; i++ {
				cli := newEngine(ccfg, true)
				if err := cli.startClient(nil, offer, []byte("GET /")); err != nil {
					b.Fatal(err)
				}
				first := cli.takeOutput()
				time.Sleep(idle)
				t0 := clock.Now()
				srv := newEngine(scfg, false)
				srv.startServer()
				if err := srv.feed(first); err != nil {
					b.Fatal(err)
				}
				flight := srv.takeOutput()
				st += clock.Since(t0)
				time.Sleep(idle)
				t1 := clock.Now()
				if err := cli.feed(flight); err != nil {
					b.Fatal(err)
				}
				cli.takeOutput()
				ct += clock.Since(t1)
				if !cli.done || !cli.info.ZTLS || !cli.info.EarlyDataAccepted {
					b.Fatal("the ZTLS handshake did not complete with its early data")
				}
			}
			b.ReportMetric(float64(st.Nanoseconds())/float64(b.N), "server-flight-ns/op")
			b.ReportMetric(float64(ct.Nanoseconds())/float64(b.N), "client-flight-ns/op")
		})
	}
}

// BenchmarkZTLSBFE is BenchmarkZTLS with a BFE key on the record
// (docs/ztls-spec.md, Section 7) at the default false-positive rate, sized
// both ways (bfe.FewestHashes, the default: k = 5; bfe.SmallestKey:
// k = 10): the server decapsulates (pairings and an fsync), the client
// encapsulates either in the handshake or ahead ("prepared", as package
// dial does: not timed). Each key holds 1024 connections: run with
// -benchtime=Nx, N < 1024.
func BenchmarkZTLSBFE(b *testing.B) {
	p := getPKI(b, "ecdsa-p256")
	for _, sizing := range []bfe.Sizing{bfe.FewestHashes, bfe.SmallestKey} {
		b.Run(sizing.String(), func(b *testing.B) { benchmarkZTLSBFE(b, p, sizing) })
	}
}

func benchmarkZTLSBFE(b *testing.B, p *testPKI, sizing bfe.Sizing) {
	offer, key := newZData(b, ecdh.X25519(), X25519, "localhost", "", p)
	ccfg := benchClientConfig(p, X25519)
	scfg := serverConfig(p)
	scfg.ZData = &testZKeys{keys: []*ZDataKey{key}}
	scfg.SessionTicketsDisabled = true
	ccfg.SessionTicketsDisabled = true
	params, err := bfe.NewParamsSized(1024, bfe.DefaultFalsePositiveRate, sizing)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "epoch.bfe")
	pk, err := bfe.GenerateKey(context.Background(), path, bfe.KeyGenConfig{Params: params, Workers: 2})
	if err != nil {
		b.Fatal(err)
	}
	ks, err := bfe.OpenKeyState(path, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer ks.Close()
	offer.BFE = pk
	key.Decapsulate = func(ct []byte) ([]byte, error) { return ks.Decapsulate(context.Background(), ct) }
	for _, prepared := range []bool{false, true} {
		name := "in-handshake"
		if prepared {
			name = "prepared"
		}
		b.Run(name, func(b *testing.B) {
			var ct, st time.Duration
			for i := 0; i < b.N; i++ {
				o := *offer
				if prepared {
					o.Prepared = PrepareZData(o.Group, o.Share, nil)
					if err := o.Prepared.EncapsulateBFE(pk, nil); err != nil {
						b.Fatal(err)
					}
				}
				c, s, err := ztlsPair(ccfg, scfg, &o, []byte("GET /"))
				if err != nil {
					b.Fatal(err)
				}
				ct, st = ct+c, st+s
			}
			reportSides(b, ct, st)
		})
	}
}
