package bfe

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	bls "github.com/consensys/gnark-crypto/ecc/bls12-381"

	"github.com/ztls-project/ztls/internal/testsupport/cputime"
)

// The benchmarks of the targets. Run them alone (other benchmarks
// running at the same time distort them), e.g.
//
//	go test -run '^$' -bench . -cpu 1,2 ./bfe/
//
// -cpu 1 is one core (the targets); with more, encryption's
// pairings run side by side (fanOut): ns/op falls, cpu-ms/op should not
// rise.
//	go test -run '^$' -bench 'KeyGen/n=16384' -benchtime 1x -cpu 1 ./bfe/
//
// Decapsulate includes the puncture (zeros written and fsync'd) on the file
// system of the test's temporary directory.

func BenchmarkEncapsulate(b *testing.B) {
	for _, sizing := range []Sizing{FewestHashes, SmallestKey} {
		b.Run(sizing.String(), func(b *testing.B) {
			params := sizedParams(b, 1<<14, sizing)
			ks, _ := newTestKeyState(b, Params{M: 64, K: params.K}, nil) // encapsulation does not depend on m
			pk := ks.PublicKey()
			b.ReportMetric(float64(params.K), "k")
			b.ReportMetric(float64(params.CiphertextSize()), "ct-bytes")
			// A b.N loop, not b.Loop: b.Loop does not run under the
			// GOMAXPROCS of -cpu, and encryption's goroutines depend on it.
			cpu := newCPUMeter()
			b.ResetTimer()
			cpu.begin()
			for i := 0; i < b.N; i++ {
				if _, _, err := pk.Encapsulate(nil); err != nil {
					b.Fatal(err)
				}
			}
			cpu.end()
			cpu.report(b, b.N)
			b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
		})
	}
}

// sizedParams are the benchmarks' parameters: p = 2^-10 as the issue's
// targets, sized by s.
func sizedParams(b *testing.B, n int, s Sizing) Params {
	params, err := NewParamsSized(n, DefaultFalsePositiveRate, s)
	if err != nil {
		b.Fatal(err)
	}
	return params
}

// BenchmarkDecapsulate is decapsulation plus puncture, on a key with room
// for the benchmark's ciphertexts (k as at p = 2^-10 for each Sizing; the
// work does not depend on m but for the false positives it avoids).
func BenchmarkDecapsulate(b *testing.B) {
	for _, sizing := range []Sizing{FewestHashes, SmallestKey} {
		b.Run(sizing.String(), func(b *testing.B) { benchmarkDecapsulate(b, sizedParams(b, 1<<11, sizing)) })
	}
}

func benchmarkDecapsulate(b *testing.B, params Params) {
	for _, c := range []struct {
		name          string
		sync, noTable bool
	}{
		{"fsync", true, false},
		{"no-fsync", false, false},               // the cryptography alone
		{"no-fsync/no-point-table", false, true}, // hashing to G1 instead
	} {
		b.Run(c.name, func(b *testing.B) {
			ks, _ := newTestKeyState(b, params, nil)
			if !c.sync {
				ks.file = noSyncFile{ks.file}
			}
			if c.noTable {
				ks.points = ks.pk.hashPoint
			}
			pk := ks.PublicKey()
			cts := make([][]byte, 0, 256)
			refill := func() {
				cts = cts[:0]
				for range cap(cts) {
					ct, _, err := pk.Encapsulate(nil)
					if err != nil {
						b.Fatal(err)
					}
					cts = append(cts, ct)
				}
			}
			fp := 0
			cpu := newCPUMeter()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%cap(cts) == 0 {
					b.StopTimer()
					refill()
					b.StartTimer()
				}
				cpu.begin()
				_, err := ks.Decapsulate(context.Background(), cts[i%cap(cts)])
				cpu.end()
				if errors.Is(err, ErrPunctured) {
					fp++
				} else if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			cpu.report(b, b.N)
			b.ReportMetric(float64(fp), "false-positives")
			b.ReportMetric(float64(params.K), "k")
			b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "procs")
		})
	}
}

type noSyncFile struct{ slotFile }

// cpuMeter adds up the process CPU time of timed sections and reports it
// per operation as cpu-ms/op, next to the wall-clock ns/op: the goroutines
// encrypt fans out to are counted (and the garbage collector, which the
// operation's allocations cause).
type cpuMeter struct {
	total time.Duration
	start time.Duration
	ok    bool
}

func newCPUMeter() *cpuMeter {
	_, ok := cputime.Process()
	return &cpuMeter{ok: ok}
}

func (m *cpuMeter) begin() { m.start, _ = cputime.Process() }

func (m *cpuMeter) end() {
	t, _ := cputime.Process()
	m.total += t - m.start
}

func (m *cpuMeter) report(b *testing.B, ops int) {
	if m.ok && ops > 0 {
		b.ReportMetric(float64(m.total.Microseconds())/1000/float64(ops), "cpu-ms/op")
	}
}

func (noSyncFile) Sync() error { return nil }

// BenchmarkKeyGen generates one epoch key. n=16384 takes minutes; run it
// with -benchtime 1x.
func BenchmarkKeyGen(b *testing.B) {
	for _, n := range []int{1 << 10, 1 << 14} {
		for _, sizing := range []Sizing{FewestHashes, SmallestKey} {
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("n=%d/%v/workers=%d", n, sizing, workers), func(b *testing.B) {
					benchmarkKeyGen(b, sizedParams(b, n, sizing), workers)
				})
			}
		}
	}
}

func benchmarkKeyGen(b *testing.B, params Params, workers int) {
	b.ReportMetric(float64(params.SecretKeySize()), "sk-bytes/epoch")
	b.ReportMetric(float64(params.M), "slots")
	dir := b.TempDir()
	start := clock.Now()
	cpu0, cpuOK := cputime.Process()
	for i := 0; i < b.N; i++ {
		path := filepath.Join(dir, fmt.Sprintf("%d.key", i))
		if _, err := GenerateKey(context.Background(), path, KeyGenConfig{Epoch: uint64(i), Params: params, Workers: workers}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(clock.Since(start).Microseconds())/float64(b.N)/float64(params.M), "µs/slot")
	if cpu1, _ := cputime.Process(); cpuOK {
		b.ReportMetric((cpu1-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	}
}

// BenchmarkPairingReference is one pairing of the library, measured in the
// same run as the KEM, so that the KEM's figures can be read as multiples
// of it on a machine that other work slows down.
func BenchmarkPairingReference(b *testing.B) {
	_, _, g1, g2 := bls.Generators()
	P, Q := []bls.G1Affine{g1}, []bls.G2Affine{g2}
	cpu := newCPUMeter()
	cpu.begin()
	for b.Loop() {
		if _, err := bls.Pair(P, Q); err != nil {
			b.Fatal(err)
		}
	}
	cpu.end()
	cpu.report(b, b.N)
}
