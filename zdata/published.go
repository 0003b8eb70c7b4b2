package zdata

import "time"

// NextChange returns the first instant after now at which Records may
// answer otherwise, given the keys the keyring holds: for each key still
// published, twinLead before its not-before (its twin takes the place of
// its v1 record), its not-before (its v1 record and twin become current)
// and its not-after (it leaves the set). It is the zero time when no such
// instant is ahead. A publisher that swaps its records only at intervals
// wakes at it, so that no answer is stale from a rollover or a twin's
// start until its next round (docs/soak.md, bug 1). Keys added later
// (Rotate, Refresh) bring their own instants: ask again after each.
func (s *Service) NextChange(now time.Time) time.Time {
	var next time.Time
	for _, k := range s.Keyring.Published(now) {
		r := k.Record
		for _, t := range []time.Time{r.NotBefore.Add(-s.twinLead()), r.NotBefore, r.NotAfter} {
			if t.After(now) && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
	}
	return next
}
