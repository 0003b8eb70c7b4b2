// Package dudect is the statistics of the project's dudect-style timing
// tests (Reparaz, Balasch and Verbauwhede, "Dude, is my code constant
// time?", DATE 2017): a test times a function on two classes of inputs,
// randomly interleaved, and Worst tells how far apart the classes' times
// are by Welch's t statistic, on all samples and on those below a few
// percentiles (cropping drops the tail that interrupts and other load
// add). |t| above Threshold means the time depends on the class.
package dudect

import (
	"math"
	"slices"
	"testing"
	"time"
)

// Threshold is dudect's bound: |t| above it is a leak.
const Threshold = 10

// Samples are the measured durations of the two classes, in nanoseconds.
type Samples [2][]float64

// Time runs f and records its duration under class (0 or 1).
func (s *Samples) Time(class int, f func()) {
	start := time.Now() // real time: the test measures durations
	f()
	d := time.Since(start) // real time: the test measures durations
	s[class] = append(s[class], float64(d.Nanoseconds()))
}

// Worst returns the largest |t| between the classes over the whole sample
// sets and the sets cropped at the 99th, 90th, 75th and 50th percentiles
// of all samples, logging each under name.
func Worst(t testing.TB, name string, s *Samples) float64 {
	t.Helper()
	all := slices.Concat(s[0], s[1])
	slices.Sort(all)
	worst := 0.0
	for _, pct := range []float64{1, 0.99, 0.9, 0.75, 0.5} {
		limit := all[int(pct*float64(len(all)-1))]
		below := func(x []float64) []float64 {
			return slices.DeleteFunc(slices.Clone(x), func(v float64) bool { return v > limit })
		}
		a, b := below(s[0]), below(s[1])
		tv := Welch(a, b)
		t.Logf("%s below the %3.0f%% percentile (%.0f ns): %d and %d samples, t = %.2f", name, pct*100, limit, len(a), len(b), tv)
		worst = max(worst, math.Abs(tv))
	}
	return worst
}

// Welch returns Welch's t statistic of two samples.
func Welch(a, b []float64) float64 {
	mean := func(x []float64) (m, v float64) {
		for _, s := range x {
			m += s
		}
		m /= float64(len(x))
		for _, s := range x {
			v += (s - m) * (s - m)
		}
		return m, v / float64(len(x)-1)
	}
	ma, va := mean(a)
	mb, vb := mean(b)
	return (ma - mb) / math.Sqrt(va/float64(len(a))+vb/float64(len(b)))
}
