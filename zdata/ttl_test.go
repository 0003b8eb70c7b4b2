package zdata

import (
	"testing"
	"time"
)

// TestTTLForAcrossRollover: at chosen instants around a rollover, the TTL
// of a set ends before some client of a version it carries would hold no
// valid record, and not earlier: a set with the current and next v1
// records stays cacheable in the period's last seconds (it used to get
// TTL 0 there, so prefetch had nothing to keep), while the twin window's
// set, whose next period has only its v2 twin, ends at the rollover.
func TestTTLForAcrossRollover(t *testing.T) {
	roll := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	rec := func(v int, start time.Time) *Record {
		return &Record{NotBefore: start, NotAfter: start.Add(time.Hour), V2: v == 2}
	}
	cur1, next1 := rec(1, roll.Add(-time.Hour)), rec(1, roll)
	cur2, next2 := rec(2, roll.Add(-time.Hour)), rec(2, roll)
	const max = 5 * time.Minute
	for _, c := range []struct {
		name string
		recs []*Record
		at   time.Duration // before the rollover
		want time.Duration
	}{
		{"mid-period, current and next", []*Record{cur1, next1}, 30 * time.Minute, max},
		{"2 s before, current and next", []*Record{cur1, next1}, 2 * time.Second, max},
		{"2 s before, current only", []*Record{cur1}, 2 * time.Second, time.Second},
		{"90 s before, current only", []*Record{cur1}, 90 * time.Second, 89 * time.Second},
		{"twin window: v1 ends, v2 goes on", []*Record{cur1, cur2, next2}, 2 * time.Minute, 119 * time.Second},
		{"both versions go on", []*Record{cur1, cur2, next1, next2}, 2 * time.Second, max},
		{"v2 twin of the current period only", []*Record{cur1, next1, cur2}, 3 * time.Minute, 179 * time.Second},
		{"1 s after, next only valid", []*Record{cur1, next1}, -time.Second, max},
		{"only a future record", []*Record{next1}, 2 * time.Second, 0},
	} {
		if got := TTLFor(c.recs, roll.Add(-c.at), max); got != c.want {
			t.Errorf("%s: TTLFor = %v, want %v", c.name, got, c.want)
		}
	}
	// A gap between the periods ends the cover at the first not-after.
	gap := rec(1, roll.Add(10*time.Second))
	if got := TTLFor([]*Record{cur1, gap}, roll.Add(-time.Minute), max); got != 59*time.Second {
		t.Errorf("with a 10 s gap: TTLFor = %v, want 59s", got)
	}
}
