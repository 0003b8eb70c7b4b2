package clock

import (
	"testing"
	"time"
)

// TestOffsetShiftsNow: Now reads the system clock shifted by the offset,
// and the time elapsed between two of its readings is real.
func TestOffsetShiftsNow(t *testing.T) {
	t.Setenv(EnvOffset, "-90m")
	offset = newOffset()
	t.Cleanup(func() { offset = newOffset() })
	d, err := Offset()
	if err != nil || d != -90*time.Minute {
		t.Fatalf("Offset() = %v, %v; want -90m", d, err)
	}
	sys, now := time.Now(), Now()
	if got := sys.Sub(now.Round(0)); got < 90*time.Minute-time.Second || got > 90*time.Minute+time.Second {
		t.Fatalf("system - Now = %v, want about 90m", got)
	}
	if e := Since(now); e < 0 || e > time.Second {
		t.Fatalf("Since(Now()) = %v, want a small elapsed time", e)
	}
	if u := Until(now.Add(time.Hour)); u < 59*time.Minute || u > time.Hour {
		t.Fatalf("Until(Now()+1h) = %v, want about 1h", u)
	}
}

// TestBadOffsetRefused: an offset that is not a duration is an error (and
// no shift), never a silently wrong clock.
func TestBadOffsetRefused(t *testing.T) {
	t.Setenv(EnvOffset, "five minutes")
	offset = newOffset()
	t.Cleanup(func() { offset = newOffset() })
	if _, err := Offset(); err == nil {
		t.Fatal("Offset() accepted a value that is not a duration")
	}
	if got := time.Since(Now()); got < -time.Second || got > time.Second {
		t.Fatalf("Now is shifted by %v with a bad offset", got)
	}
}
