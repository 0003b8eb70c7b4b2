package dudect

import (
	"math"
	"testing"
)

// TestWelch checks the statistic on samples whose t is known: equal
// samples give 0, a shifted copy a large value of the right sign.
func TestWelch(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5}
	if got := Welch(a, a); got != 0 {
		t.Errorf("Welch(a, a) = %v, want 0", got)
	}
	b := []float64{11, 12, 13, 14, 15}
	// means 3 and 13, variances 2.5: t = -10 / sqrt(0.5 + 0.5) = -10.
	if got := Welch(a, b); math.Abs(got+10) > 1e-9 {
		t.Errorf("Welch(a, b) = %v, want -10", got)
	}
}

// TestWorstSeesTheGap checks that Worst reports a clear difference between
// the classes and none between identical ones.
func TestWorstSeesTheGap(t *testing.T) {
	var same, apart Samples
	for i := range 1000 {
		v := float64(100 + i%7)
		same[i%2] = append(same[i%2], v)
		apart[0] = append(apart[0], v)
		apart[1] = append(apart[1], v+20)
	}
	if w := Worst(t, "same", &same); w > Threshold {
		t.Errorf("identical classes: |t| = %.1f, want <= %d", w, Threshold)
	}
	if w := Worst(t, "apart", &apart); w <= Threshold {
		t.Errorf("classes 20 ns apart: |t| = %.1f, want > %d", w, Threshold)
	}
}
