// Package clock is the one source of wall-clock time for ztls: every
// component whose behaviour depends on the time of day (Z-data validity,
// rotation, strike-register guards, BFE epochs, certificates, tickets)
// reads it through its injectable field (tls13.Config.Time, dial.Options.Now,
// redisreg.Options.Now, turbo.ServerConfig.Now, …), and each of those
// defaults to Now.
//
// Now is the system clock shifted by the offset in the environment variable
// ZTLS_CLOCK_OFFSET (a Go duration such as "-4m" or "3h25m10s"; unset or
// empty: no shift). The offset exists so that a whole test run, with every
// process it starts, can be placed at a chosen instant of a key period
// (`make test CLOCK_AT=59:30`, scripts/clock-offset), which is how the
// rotation boundaries are tested without waiting for them. The processes of
// one run inherit the same offset and so agree on the time. `ztls` warns
// at start when the offset is set.
//
// An instant that is compared with a validity, a period or a stored time
// must come from Now. Deadlines handed to the runtime (net.Conn.SetDeadline,
// context.WithDeadline, timers) must come from time.Now: Now shifts the
// monotonic reading too (time.Time.Add does), so a deadline taken from it is
// off by the offset. Elapsed time between two values of Now is real,
// unless ZTLS_CLOCK_RATE makes the clock run faster (rate.go: long runs
// in simulated time, for tests only), which scales it.
package clock

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// EnvOffset is the environment variable that shifts Now.
const EnvOffset = "ZTLS_CLOCK_OFFSET"

var offset = newOffset()

func newOffset() func() (time.Duration, error) {
	return sync.OnceValues(readOffset)
}

func readOffset() (time.Duration, error) {
	v := os.Getenv(EnvOffset)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not a duration (want e.g. -4m or 1h2m3s): %v", EnvOffset, v, err)
	}
	return d, nil
}

// Offset returns the shift ZTLS_CLOCK_OFFSET sets, or an error when the
// variable is set to something that is not a duration (Now then uses no
// shift; commands refuse to start, see cmd/ztls).
func Offset() (time.Duration, error) { return offset() }

// Now returns the current time on the ztls clock: the system's, shifted by
// Offset. It keeps the monotonic reading, so Since and Sub between two of
// its values measure real elapsed time. With ZTLS_CLOCK_RATE (rate.go, for
// tests) it runs that many times faster than the system's clock and has
// no monotonic reading; Since and Sub between its values are then scaled.
func Now() time.Time {
	if s := scale(); s.rate != 1 {
		return s.now()
	}
	d, _ := offset()
	if d == 0 {
		return time.Now()
	}
	return time.Now().Add(d)
}

// Since returns the time elapsed since t, a value of Now.
func Since(t time.Time) time.Duration { return Now().Sub(t) }

// Until returns the duration until t, a value on Now's scale.
func Until(t time.Time) time.Duration { return t.Sub(Now()) }

// Or returns f when it is set, else Now: the default of every injectable
// clock field.
func Or(f func() time.Time) func() time.Time {
	if f != nil {
		return f
	}
	return Now
}

// OffsetReading returns the ZTLS_CLOCK_OFFSET that makes a process started
// now read mmss ("59:30") of an hour: the nearest such instant (at most 30
// minutes away), on top of this process's own offset. Tests use it to
// place the processes they start at an instant of a key period.
func OffsetReading(mmss string) (time.Duration, error) {
	var m, s int
	if _, err := fmt.Sscanf(mmss, "%d:%d", &m, &s); err != nil || m < 0 || m > 59 || s < 0 || s > 59 {
		return 0, fmt.Errorf("clock: %q is not MM:SS", mmss)
	}
	self, err := Offset()
	if err != nil {
		return 0, err
	}
	now := Now()
	d := now.Truncate(time.Hour).Add(time.Duration(m)*time.Minute + time.Duration(s)*time.Second).Sub(now)
	switch {
	case d > 30*time.Minute:
		d -= time.Hour
	case d < -30*time.Minute:
		d += time.Hour
	}
	return (self + d).Round(time.Millisecond), nil
}
