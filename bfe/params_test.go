package bfe

import (
	"crypto/rand"
	"math"
	"testing"
)

func TestNewParams(t *testing.T) {
	for _, c := range []struct {
		n    int
		p    float64
		m    uint32
		k    uint8
		skMB float64 // upper bound, MB = 10^6 bytes
	}{
		{1 << 14, 1.0 / 1024, 236372, 10, 16},
		{1000, 1.0 / 64, 8657, 6, 0.5},
		{1000, 1.0 / 1024, 14427, 10, 1},
		{50000, 1.0 / 1024, 721348, 10, 35},
	} {
		params, err := NewParams(c.n, c.p)
		if err != nil {
			t.Fatal(err)
		}
		if params.M != c.m || params.K != c.k {
			t.Errorf("NewParams(%d, %g) = %v, want m=%d k=%d", c.n, c.p, params, c.m, c.k)
		}
		if sk := float64(params.SecretKeySize()) / 1e6; sk > c.skMB {
			t.Errorf("n=%d p=%g: secret key %.2f MB > %g MB", c.n, c.p, sk, c.skMB)
		}
		if got := params.FalsePositiveRate(c.n); math.Abs(got-c.p)/c.p > 0.05 {
			t.Errorf("n=%d: FalsePositiveRate = %g, want about %g", c.n, got, c.p)
		}
	}
	params, _ := NewParams(1<<14, DefaultFalsePositiveRate)
	t.Logf("n=2^14 p=2^-10: %v, secret key %d bytes (%.2f MiB), ciphertext %d bytes",
		params, params.SecretKeySize(), float64(params.SecretKeySize())/(1<<20), params.CiphertextSize())
	if params.SecretKeySize() > 16<<20 {
		t.Fatal("secret key for n=2^14 exceeds 16 MiB")
	}
	for _, bad := range []struct {
		n int
		p float64
	}{{0, 0.01}, {10, 0}, {10, 1}, {10, math.NaN()}, {1 << 30, 0.001}, {10, 1e-12}} {
		if _, err := NewParams(bad.n, bad.p); err == nil {
			t.Errorf("NewParams(%d, %g) succeeded", bad.n, bad.p)
		}
	}
}

// TestFalsePositiveRate inserts n random ciphertext tags into a filter
// through the scheme's own position hash, then counts how many fresh tags
// find all their positions set, against p. The bound is loose (3x) because
// the count is random; the figures are logged.
func TestFalsePositiveRate(t *testing.T) {
	const n = 1000
	var digest [32]byte
	if _, err := rand.Read(digest[:]); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p      float64
		trials int
	}{{1.0 / 64, 20000}, {1.0 / 1024, 200000}} {
		params, err := NewParams(n, c.p)
		if err != nil {
			t.Fatal(err)
		}
		set := make([]bool, params.M)
		tag := make([]byte, g2Compressed)
		pos := make([]uint32, 0, params.K)
		for range n {
			rand.Read(tag)
			for _, i := range positions(&digest, params, tag, pos) {
				set[i] = true
			}
		}
		fp := 0
		for range c.trials {
			rand.Read(tag)
			all := true
			for _, i := range positions(&digest, params, tag, pos) {
				all = all && set[i]
			}
			if all {
				fp++
			}
		}
		rate := float64(fp) / float64(c.trials)
		t.Logf("n=%d p=%g (%v): %d of %d fresh ciphertexts false positive = %.5f (%.2f p)",
			n, c.p, params, fp, c.trials, rate, rate/c.p)
		if rate > 3*c.p || rate < c.p/3 {
			t.Errorf("false-positive rate %.5f not within 3x of p=%g", rate, c.p)
		}
	}
}
