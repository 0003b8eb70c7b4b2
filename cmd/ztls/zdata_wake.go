package main

import (
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/zdata"
)

// zdataChangeMargin is how long after the instant a published Z-data set
// changes the publisher wakes, so that it reads the new set, not the old.
const zdataChangeMargin = time.Millisecond

// nextZDataChange is the first instant after now at which a directory of
// dirs publishes another set (zdata.Service.NextChange), with each one's;
// zero when none is ahead.
func nextZDataChange(dirs []*zdata.Dir, now time.Time) (first time.Time, each map[*zdata.Dir]time.Time) {
	each = make(map[*zdata.Dir]time.Time, len(dirs))
	for _, d := range dirs {
		n := d.Service.NextChange(now)
		each[d] = n
		if !n.IsZero() && (first.IsZero() || n.Before(first)) {
			first = n
		}
	}
	return first, each
}

// changeWake is a timer that fires just after the ztls clock reaches an
// instant (a rollover, a twin's start: nextZDataChange), so that the
// records served or pushed change then, not at the next periodic round
// (docs/soak.md, bug 1). The timer runs in real time for the clock's
// duration until the instant (clock.Real). The zero value is ready; one
// goroutine uses it.
type changeWake struct {
	at time.Time
	t  *time.Timer
}

// wait returns a channel that fires just after at (nil, never, for the
// zero time), keeping the running timer when at has not moved. After a
// receive from it, call fired.
func (w *changeWake) wait(at time.Time) <-chan time.Time {
	if w.t != nil && at.Equal(w.at) {
		return w.t.C
	}
	w.stop()
	if at.IsZero() {
		return nil
	}
	w.at, w.t = at, time.NewTimer(clock.Real(clock.Until(at))+zdataChangeMargin)
	return w.t.C
}

// fired forgets the timer that fired, so that the next wait starts another.
func (w *changeWake) fired() { w.at, w.t = time.Time{}, nil }

// stop stops the running timer, if any.
func (w *changeWake) stop() {
	if w.t != nil {
		w.t.Stop()
	}
	w.fired()
}
