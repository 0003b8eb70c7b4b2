package p256sign

import (
	"math/bits"
	mathrand "math/rand/v2"
	"os"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/dudect"
)

// TestScalarPathDudect is a dudect-style check (Reparaz, Balasch and
// Verbauwhede, "Dude, is my code constant time?", DATE 2017) of the code
// of this package that handles k: the inversion (invertSafegcd) and s =
// k^-1 (e + r d) (mul, add). It times them on two classes of k, randomly
// interleaved, class 0 always k = 1 (the inversion's most degenerate input:
// g reaches 0 after the first divstep), class 1 fresh random k below n,
// and fails if Welch's t statistic passes 10 on the raw samples or below
// any of a few percentiles. A control with a deliberate leak (work
// proportional to k's set bits, about 1 %) must pass 10. It measures time,
// so it runs only with ZTLS_DUDECT=1 on a quiet machine (a few seconds);
// the default run relies on the code's review (no branch or index on
// secret data: masks from carries and signs, fixed loop counts).
func TestScalarPathDudect(t *testing.T) {
	if os.Getenv("ZTLS_DUDECT") == "" {
		t.Skip("timing test: set ZTLS_DUDECT=1 on a quiet machine to run it")
	}
	e := scalar{0x1234, 0x5678, 0x9abc, 0x0def}
	rd := scalar{0x1111, 0x2222, 0x3333, 0x4444}
	var sink scalar
	path := func(k *scalar) {
		var kinv, t scalar
		kinv.invertSafegcd(k)
		t.add(&rd, &e)
		sink.mul(&kinv, &t)
	}
	if worst := scalarDudect(t, "scalar path", path); worst > 10 {
		t.Fatalf("|t| = %.1f > 10: the inversion's or the multiplication's time depends on k", worst)
	}
	var spin int
	control := scalarDudect(t, "control", func(k *scalar) {
		for _, w := range k {
			for range bits.OnesCount64(w) {
				spin++
			}
		}
		path(k)
	})
	if control <= 10 {
		t.Fatalf("the harness did not detect the control's leak (|t| = %.1f): the machine is too noisy for this test", control)
	}
	_ = sink
}

func scalarDudect(t *testing.T, name string, f func(k *scalar)) float64 {
	const samples = 100000
	rnd := mathrand.New(mathrand.NewPCG(3, 4))
	// Inputs and classes are drawn before timing starts, so nothing
	// class-dependent runs between two measurements.
	classes := make([]int, samples)
	inputs := make([]scalar, samples)
	for i := range inputs {
		classes[i] = rnd.IntN(2)
		inputs[i] = scalar{1}
		if classes[i] == 1 {
			inputs[i] = scalar{rnd.Uint64(), rnd.Uint64(), rnd.Uint64(), rnd.Uint64()}
			inputs[i].reduceOnce(&inputs[i])
		}
	}
	var timed dudect.Samples
	for i := range inputs {
		timed.Time(classes[i], func() { f(&inputs[i]) })
	}
	return dudect.Worst(t, name, &timed)
}
