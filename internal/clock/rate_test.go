package clock

import (
	"testing"
	"time"
)

// useEnv sets the clock's variables (empty: unset) and makes the clock
// read them again, for this test only.
func useEnv(t *testing.T, off, rate, anchor string) {
	t.Helper()
	t.Setenv(EnvOffset, off)
	t.Setenv(EnvRate, rate)
	t.Setenv(EnvAnchor, anchor)
	offset, scale = newOffset(), newScale()
	t.Cleanup(func() { offset, scale = newOffset(), newScale() })
}

// TestRateScalesNow: Now = anchor + offset + (system - anchor) × rate,
// advancing rate seconds per real second, never backwards; Real converts
// back.
func TestRateScalesNow(t *testing.T) {
	sys := time.Now()
	anchor := sys.Add(-10 * time.Second)
	useEnv(t, "-90m", "60", anchor.UTC().Format(time.RFC3339Nano))
	rate, got, err := Rate()
	if err != nil || rate != 60 || !got.Equal(anchor.Round(0)) {
		t.Fatalf("Rate() = %v, %v, %v; want 60, %v", rate, got, err, anchor)
	}
	want := anchor.Add(-90 * time.Minute).Add(10 * time.Minute) // 10 s × 60
	if d := Now().Sub(want); d < 0 || d > 30*time.Second {      // half a second of real time
		t.Fatalf("Now() is %v past anchor+offset+(system-anchor)*rate, want under 30s", d)
	}
	if hasMonotonic(Now()) {
		t.Error("a scaled Now keeps a monotonic reading: Sub between two values would be real")
	}
	a := Now()
	time.Sleep(50 * time.Millisecond)
	b := Now()
	if e := b.Sub(a); e < 3*time.Second || e > 60*time.Second {
		t.Fatalf("50 ms of real time moved Now by %v, want about 3 s", e)
	}
	prev := Now()
	for range 10000 {
		n := Now()
		if n.Before(prev) {
			t.Fatalf("Now went back from %v to %v", prev, n)
		}
		prev = n
	}
	if r := Real(time.Minute); r != time.Second {
		t.Fatalf("Real(1m) = %v at rate 60, want 1s", r)
	}
}

// hasMonotonic reports whether t carries a monotonic clock reading (which
// Round(0) strips; == compares it too).
func hasMonotonic(t time.Time) bool { return t != t.Round(0) }

// TestRateAgreesAcrossProcesses: two processes that start at different
// moments with the same anchor read the same time at the same instant.
func TestRateAgreesAcrossProcesses(t *testing.T) {
	sys := time.Now()
	useEnv(t, "3h", "30", sys.UTC().Format(time.RFC3339Nano))
	first, second := readScale(sys.Add(2*time.Second)), readScale(sys.Add(7*time.Second))
	if first.err != nil || second.err != nil {
		t.Fatal(first.err, second.err)
	}
	// The second process starts 5 s of real time later: 150 s on the clock.
	if d := second.baseNow.Sub(first.baseNow); d != 150*time.Second {
		t.Fatalf("processes 5 s apart start %v apart on the clock, want 150s", d)
	}
	if want := sys.Round(0).Add(3*time.Hour + 60*time.Second); !first.baseNow.Equal(want) {
		t.Fatalf("first process starts at %v, want %v", first.baseNow, want)
	}
}

// TestBadRateRefused: values that would give a wrong or unshared clock are
// errors, and the clock then runs at the system's rate.
func TestBadRateRefused(t *testing.T) {
	now := time.Now().UTC()
	anchor := now.Format(time.RFC3339Nano)
	for _, c := range []struct{ name, rate, anchor string }{
		{"not a number", "fast", anchor},
		{"zero", "0", anchor},
		{"negative", "-2", anchor},
		{"NaN", "NaN", anchor},
		{"infinite", "Inf", anchor},
		{"above MaxRate", "3601", anchor},
		{"no anchor", "30", ""},
		{"anchor not RFC 3339", "30", now.Format(time.RFC1123)},
		{"stale anchor", "30", now.Add(-8 * 24 * time.Hour).Format(time.RFC3339Nano)},
		{"anchor without rate", "", anchor},
	} {
		t.Run(c.name, func(t *testing.T) {
			useEnv(t, "", c.rate, c.anchor)
			if rate, _, err := Rate(); err == nil || rate != 1 {
				t.Fatalf("Rate() = %v, %v; want an error and rate 1", rate, err)
			}
			if d := time.Since(Now()); d < -time.Second || d > time.Second {
				t.Fatalf("Now is %v off the system clock after a refused rate", d)
			}
		})
	}
}

// TestRateOneIsTheSystemClock: rate 1 (with or without an anchor) is the
// plain clock, monotonic reading included.
func TestRateOneIsTheSystemClock(t *testing.T) {
	useEnv(t, "", "1", time.Now().UTC().Format(time.RFC3339))
	if rate, _, err := Rate(); err != nil || rate != 1 {
		t.Fatalf("Rate() = %v, %v", rate, err)
	}
	if !hasMonotonic(Now()) {
		t.Error("Now at rate 1 lost its monotonic reading")
	}
	if Real(time.Minute) != time.Minute {
		t.Error("Real is not the identity at rate 1")
	}
}
