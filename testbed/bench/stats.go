package bench

import (
	"math"
	"slices"
	"time"
)

// Summary describes a set of durations in milliseconds.
type Summary struct {
	Median float64 `json:"median"`
	Mean   float64 `json:"mean"`
	P90    float64 `json:"p90"`
	P99    float64 `json:"p99"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// Summarize computes a Summary; percentiles interpolate linearly between
// the closest ranks. No durations give a zero Summary.
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	ms := make([]float64, len(ds))
	var sum float64
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
		sum += ms[i]
	}
	slices.Sort(ms)
	return Summary{
		Median: round(quantile(ms, 0.5)),
		Mean:   round(sum / float64(len(ms))),
		P90:    round(quantile(ms, 0.9)),
		P99:    round(quantile(ms, 0.99)),
		Min:    round(ms[0]),
		Max:    round(ms[len(ms)-1]),
	}
}

// quantile of sorted values, q in [0, 1].
func quantile(sorted []float64, q float64) float64 {
	pos := q * float64(len(sorted)-1)
	lo := int(math.Floor(pos))
	hi := int(math.Ceil(pos))
	return sorted[lo] + (sorted[hi]-sorted[lo])*(pos-float64(lo))
}

func round(x float64) float64 { return math.Round(x*1000) / 1000 }
