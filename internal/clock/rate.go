package clock

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"sync"
	"time"
)

// A faster clock, for long runs in simulated time (make soak): with
// ZTLS_CLOCK_RATE=R and ZTLS_CLOCK_ANCHOR=A (an RFC 3339 instant, with a
// fraction of a second if wanted), every process of a run reads
//
//	Now = A + offset + (system time - A) * R
//
// so processes started at different moments agree on the time, provided
// they were given the same anchor (the driver sets it once, before it
// starts anything). Only the ztls clock runs faster: every duration the
// code hands to the runtime (timers, tickers, deadlines, sleeps) and every
// timeout of another program (Redis's PX expiries) stays real. What that
// distorts is the caller's to weigh (docs/soak.md lists it for the soak);
// the rule of the package doc still holds: instants compared with a
// validity, a period or a stored time come from Now, deadlines from
// time.Now.
//
// Durations measured between two readings of Now are scaled (R seconds of
// the ztls clock per real second). Now never runs backwards within a
// process: it adds the scaled monotonic time elapsed since the process's
// first reading to that reading. Tests only.

// Environment variables that make Now run faster.
const (
	// EnvRate is how many seconds the ztls clock advances per real
	// second (a positive number up to MaxRate; unset or empty: 1).
	EnvRate = "ZTLS_CLOCK_RATE"
	// EnvAnchor is the instant of the system clock from which the ztls
	// clock runs at the rate (RFC 3339, e.g. 2026-01-02T15:04:05.123456789Z);
	// required with a rate other than 1.
	EnvAnchor = "ZTLS_CLOCK_ANCHOR"
)

// MaxRate bounds EnvRate: at most an hour of ztls time per real second.
const MaxRate = 3600

// MaxAnchorAge bounds how far the anchor may lie from the system clock.
// An anchor left in the environment from an earlier run would otherwise
// move the clock by (its age × the rate), past every certificate's
// validity.
const MaxAnchorAge = 7 * 24 * time.Hour

type scaled struct {
	rate   float64
	anchor time.Time
	err    error
	// base is the process's first reading of the system clock (with its
	// monotonic reading); baseNow is Now at that instant.
	base, baseNow time.Time
}

var scale = newScale()

func newScale() func() *scaled {
	return sync.OnceValue(func() *scaled { return readScale(time.Now()) })
}

// readScale reads the rate and the anchor; on any error the clock runs at
// the system's rate (commands refuse to start, see cmd/ztls).
func readScale(sys time.Time) *scaled {
	s := &scaled{rate: 1, base: sys}
	rv, av := os.Getenv(EnvRate), os.Getenv(EnvAnchor)
	if rv == "" {
		if av != "" {
			s.err = fmt.Errorf("%s=%q is set without %s: set both (the anchor only matters for a rate other than 1)", EnvAnchor, av, EnvRate)
		}
		return s
	}
	rate, err := strconv.ParseFloat(rv, 64)
	if err != nil || math.IsNaN(rate) || rate <= 0 || rate > MaxRate {
		s.err = fmt.Errorf("%s=%q: want a number above 0 and at most %d (seconds of the ztls clock per real second)", EnvRate, rv, MaxRate)
		return s
	}
	if rate == 1 {
		return s
	}
	if av == "" {
		s.err = fmt.Errorf("%s=%s needs %s, the instant from which every process's clock runs at that rate (RFC 3339, set once for all the processes of a run)", EnvRate, rv, EnvAnchor)
		return s
	}
	anchor, err := time.Parse(time.RFC3339Nano, av)
	if err != nil {
		s.err = fmt.Errorf("%s=%q is not an RFC 3339 instant (e.g. %s): %v", EnvAnchor, av, sys.UTC().Format(time.RFC3339Nano), err)
		return s
	}
	if age := sys.Sub(anchor).Abs(); age > MaxAnchorAge {
		s.err = fmt.Errorf("%s=%s is %v from the system clock (at most %v): left from an earlier run?", EnvAnchor, av, age.Round(time.Second), MaxAnchorAge)
		return s
	}
	d, _ := offset()
	s.rate, s.anchor = rate, anchor
	s.baseNow = anchor.Add(d).Add(scaleBy(sys.Round(0).Sub(anchor), rate))
	return s
}

// scaleBy is d × rate.
func scaleBy(d time.Duration, rate float64) time.Duration {
	return time.Duration(float64(d) * rate)
}

// Rate returns how many seconds the ztls clock advances per real second
// (1 unless ZTLS_CLOCK_RATE is set) and the anchor it runs from (zero at
// rate 1), or an error when the variables are set to something unusable
// (Now then runs at the system's rate; commands refuse to start, see
// cmd/ztls).
func Rate() (rate float64, anchor time.Time, err error) {
	s := scale()
	return s.rate, s.anchor, s.err
}

// Real converts a duration of the ztls clock to real time (d / Rate): how
// long to sleep for the clock to advance by d.
func Real(d time.Duration) time.Duration {
	s := scale()
	if s.rate == 1 {
		return d
	}
	return scaleBy(d, 1/s.rate)
}

// now is Now at a rate other than 1.
func (s *scaled) now() time.Time {
	return s.baseNow.Add(scaleBy(time.Since(s.base), s.rate))
}
