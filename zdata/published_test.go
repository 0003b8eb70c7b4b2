package zdata

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// TestNextChange: with the keys of a BFE service's tick at mid-period (the
// current key and the next period's), NextChange names the next twin's
// start, the rollover and the next key's not-after in turn, then none;
// Records is the same until just before each and differs at it. A
// publisher that woke at it (cmd/ztls refreshZData) serves no stale set
// (docs/soak.md, bug 1).
func TestNextChange(t *testing.T) {
	nb := clock.Now().Truncate(time.Hour)
	for _, seed := range [][]byte{nil, []byte("0123456789abcdef0123456789abcdef")} {
		fx := newBFEFixture(t, seed, nb)
		mid := nb.Add(30 * time.Minute)
		if _, err := fx.svc.GenerateBFE(context.Background(), mid); err != nil {
			t.Fatal(err)
		}
		if _, err := fx.svc.Rotate(mid); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct{ at, want time.Duration }{
			{30 * time.Minute, time.Hour - TwinLead},
			{time.Hour - TwinLead - time.Millisecond, time.Hour - TwinLead},
			{time.Hour - TwinLead, time.Hour},
			{time.Hour - time.Millisecond, time.Hour},
			{time.Hour, 2 * time.Hour},
			{2 * time.Hour, -1}, // none
		} {
			now := nb.Add(tc.at)
			got := fx.svc.NextChange(now)
			if tc.want < 0 {
				if !got.IsZero() {
					t.Errorf("fleet %v, at +%v: next change %v, want none", seed != nil, tc.at, got.Sub(nb))
				}
				continue
			}
			if !got.Equal(nb.Add(tc.want)) {
				t.Errorf("fleet %v, at +%v: next change +%v, want +%v", seed != nil, tc.at, got.Sub(nb), tc.want)
				continue
			}
			same, before, at := fx.svc.Records(now), fx.svc.Records(got.Add(-time.Millisecond)), fx.svc.Records(got)
			if !slices.Equal(same, before) || slices.Equal(same, at) {
				t.Errorf("fleet %v, at +%v: records %d, %d just before the change at +%v, %d at it", seed != nil, tc.at, len(same), len(before), tc.want, len(at))
			}
		}
	}
}
