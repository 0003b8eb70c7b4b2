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
		s    Sizing
		m    uint32
		k    uint8
		skMB float64 // upper bound, MB = 10^6 bytes
	}{
		// SmallestKey is DJSS18's optimum: m = -n ln p / (ln 2)^2.
		{1 << 14, 1.0 / 1024, SmallestKey, 236372, 10, 12},
		{1000, 1.0 / 64, SmallestKey, 8657, 6, 0.5},
		{1000, 1.0 / 1024, SmallestKey, 14427, 10, 1},
		{50000, 1.0 / 1024, SmallestKey, 721348, 10, 35},
		// FewestHashes: the least k within KeyBytesPerConnection.
		{1 << 14, 1.0 / 1024, FewestHashes, 284759, 5, 16},
		{1000, 1.0 / 64, FewestHashes, 14978, 2, 0.75},
		{1000, 1.0 / 1024, FewestHashes, 17381, 5, 1},
		{50000, 1.0 / 1024, FewestHashes, 869015, 5, 48},
		// No k fits 20 slots per connection at p = 2^-20: the smallest key.
		{1000, 1.0 / (1 << 20), FewestHashes, 28854, 20, 1.5},
	} {
		params, err := NewParamsSized(c.n, c.p, c.s)
		if err != nil {
			t.Fatal(err)
		}
		if params.M != c.m || params.K != c.k {
			t.Errorf("NewParamsSized(%d, %g, %v) = %v, want m=%d k=%d", c.n, c.p, c.s, params, c.m, c.k)
		}
		if sk := float64(params.SecretKeySize()) / 1e6; sk > c.skMB {
			t.Errorf("n=%d p=%g %v: secret key %.2f MB > %g MB", c.n, c.p, c.s, sk, c.skMB)
		}
		// m is the fewest slots that keep the rate at p with this k.
		if got := params.FalsePositiveRate(c.n); got > c.p*(1+1e-9) {
			t.Errorf("n=%d p=%g %v: FalsePositiveRate = %g > p", c.n, c.p, c.s, got)
		}
		if fewer := (Params{M: params.M - 1, K: params.K}); fewer.FalsePositiveRate(c.n) <= c.p {
			t.Errorf("n=%d p=%g %v: m-1 = %d slots keep the rate too", c.n, c.p, c.s, fewer.M)
		}
		if c.s == FewestHashes && params.K > 1 {
			less, _ := NewParamsSized(c.n, c.p, SmallestKey)
			if slots := slotsFor(c.n, c.p, int(params.K)-1); params.K < less.K && slots*SlotSize <= float64(c.n*KeyBytesPerConnection) {
				t.Errorf("n=%d p=%g: k-1 = %d would fit the budget with %g slots", c.n, c.p, params.K-1, slots)
			}
		}
		if fill := params.FillAt(c.p); math.Abs(math.Pow(fill, float64(params.K))-c.p) > 1e-12 {
			t.Errorf("%v: FillAt(%g) = %g", params, c.p, fill)
		}
	}
	def, _ := NewParams(1<<14, DefaultFalsePositiveRate)
	if fast, _ := NewParamsSized(1<<14, DefaultFalsePositiveRate, FewestHashes); def != fast {
		t.Errorf("NewParams = %v, want FewestHashes' %v", def, fast)
	}
	for _, s := range []Sizing{FewestHashes, SmallestKey} {
		params, _ := NewParamsSized(1<<14, DefaultFalsePositiveRate, s)
		t.Logf("n=2^14 p=2^-10 %v: %v, secret key %d bytes (%.2f MB), ciphertext %d bytes, full at %.3f of the slots",
			s, params, params.SecretKeySize(), float64(params.SecretKeySize())/1e6, params.CiphertextSize(), params.FillAt(DefaultFalsePositiveRate))
		if params.SecretKeySize() > 16e6 {
			t.Errorf("%v: secret key for n=2^14 exceeds 16 MB", s)
		}
	}
	for _, bad := range []struct {
		n int
		p float64
		s Sizing
	}{{0, 0.01, 0}, {10, 0, 0}, {10, 1, 0}, {10, math.NaN(), 0}, {1 << 30, 0.001, 0}, {10, 1e-300, 0}, {10, 0.01, SmallestKey + 1}} {
		if _, err := NewParamsSized(bad.n, bad.p, bad.s); err == nil {
			t.Errorf("NewParamsSized(%d, %g, %v) succeeded", bad.n, bad.p, bad.s)
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
