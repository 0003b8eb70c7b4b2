package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// ztls refuses a clock rate it cannot use before any command runs, and
// runs with a usable one (internal/clock, rate.go; the warning it prints
// then goes to a terminal only).
func TestCLIClockRate(t *testing.T) {
	anchor := time.Now().UTC().Format(time.RFC3339Nano) // real time: the anchor is an instant of the system clock
	for _, c := range []struct {
		name, rate, anchor, want string
		ok                       bool
	}{
		{"no anchor", "30", "", "needs " + clock.EnvAnchor, false},
		{"zero", "0", anchor, "want a number above 0", false},
		{"not a number", "fast", anchor, "want a number above 0", false},
		{"anchor without rate", "", anchor, "set without " + clock.EnvRate, false},
		{"stale anchor", "30", "2001-01-01T00:00:00Z", "left from an earlier run", false},
		{"usable", "30", anchor, "Usage:", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(ztlsBinary(t), "zdata", "--help")
			cmd.Env = append(os.Environ(), clock.EnvRate+"="+c.rate, clock.EnvAnchor+"="+c.anchor)
			out, err := cmd.CombinedOutput()
			if (err == nil) != c.ok || !strings.Contains(string(out), c.want) {
				t.Fatalf("%s=%q %s=%q: err %v, want ok %v and %q in:\n%s", clock.EnvRate, c.rate, clock.EnvAnchor, c.anchor, err, c.ok, c.want, out)
			}
		})
	}
}
