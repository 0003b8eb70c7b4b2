package tls13

import (
	"runtime"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/cputime"
)

// benchEnginePairs runs b.N sequential engine-pair handshakes on one locked
// OS thread and reports each side's working time and two CPU times per
// handshake pair: cpu-ns/op of that thread (the handshakes' own work, not
// the time they waited for a core on a shared machine) and proc-cpu-ns/op
// of the whole process (a pool's refills and the garbage collector too).
func benchEnginePairs(b *testing.B, ccfg, scfg *Config, group CurveID) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	var ct, st time.Duration
	t0, ok := cputime.Thread()
	p0, _ := cputime.Process()
	for i := 0; i < b.N; i++ {
		cli, _, c, s, err := enginePair(ccfg, scfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			checkZtlsState(b, cli.info, TLS_AES_128_GCM_SHA256, group, false)
		}
		ct, st = ct+c, st+s
	}
	if t1, _ := cputime.Thread(); ok {
		p1, _ := cputime.Process()
		b.ReportMetric(float64((t1-t0).Nanoseconds())/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64((p1-p0).Nanoseconds())/float64(b.N), "proc-cpu-ns/op")
	}
	reportSides(b, ct, st)
}

// BenchmarkKeySharePool: handshakes with and without a KeySharePool (one
// pool for client and server, 16 keys of each kind).
//
//	sequential  one handshake at a time: the refill runs on another CPU
//	            while the handshake runs, as on a server with spare CPU
//	parallel    GOMAXPROCS handshakes at once: no CPU is spare, so the pool
//	            runs dry and the refill competes with the handshakes
//
// pool-hit-% is the share of keys the handshakes found in the pool.
func BenchmarkKeySharePool(b *testing.B) {
	p := getPKI(b, "ecdsa-p256")
	for _, hc := range hsCases {
		for _, mode := range []string{"sequential", "parallel"} {
			for _, withPool := range []bool{false, true} {
				name := hc.name + "/" + mode + "/nopool"
				if withPool {
					name = hc.name + "/" + mode + "/pool"
				}
				b.Run(name, func(b *testing.B) {
					ccfg, scfg := benchClientConfig(p, hc.group), serverConfig(p)
					ccfg.SessionTicketsDisabled, scfg.SessionTicketsDisabled = true, true
					var pool *KeySharePool
					if withPool {
						pool = NewKeySharePool(16)
						ccfg.KeySharePool, scfg.KeySharePool = pool, pool
						// Two warm-up handshakes start the refills.
						for range 2 {
							if _, _, _, _, err := enginePair(ccfg, scfg, nil); err != nil {
								b.Fatal(err)
							}
						}
						time.Sleep(50 * time.Millisecond) // let the pool fill: not measured
					}
					var taken0, inline0 uint64
					if pool != nil {
						taken0, inline0 = pool.Taken(), pool.GeneratedInline()
					}
					b.ResetTimer()
					if mode == "sequential" {
						benchEnginePairs(b, ccfg, scfg, hc.group)
					} else {
						b.ReportAllocs()
						p0, ok := cputime.Process()
						b.RunParallel(func(pb *testing.PB) {
							for pb.Next() {
								if _, _, _, _, err := enginePair(ccfg, scfg, nil); err != nil {
									b.Error(err)
									return
								}
							}
						})
						if p1, _ := cputime.Process(); ok {
							b.ReportMetric(float64((p1-p0).Nanoseconds())/float64(b.N), "proc-cpu-ns/op")
						}
					}
					if pool != nil {
						taken, inline := pool.Taken()-taken0, pool.GeneratedInline()-inline0
						b.ReportMetric(100*float64(taken)/float64(max(taken+inline, 1)), "pool-hit-%")
					}
				})
			}
		}
	}
}
