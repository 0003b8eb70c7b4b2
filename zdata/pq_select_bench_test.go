package zdata

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// BenchmarkPQSelectorAnswer is the Selector's work on a post-quantum
// service's TXT answer as dial does it (docs/ztls-spec.md, Section 9.6;
// issue 30): the current and next periods' v3 and classical records,
// Likely twice (the prepared share, then TurboTLS's likely offer) and
// Select. The chain check is a policy that accepts (it is the same for
// classical and post-quantum records, and runs beside the lookups).
//
//	flock /tmp/bench.lock go test ./zdata -run '^$' -bench PQSelectorAnswer -count 5
func BenchmarkPQSelectorAnswer(b *testing.B) {
	now := clock.Now()
	f := pqFixture(b, nil)
	classical := newFixtureWith(b, f.ca, f.leaf, Options{}, nil)
	txt := txtOf(classical.issue(b, now.Add(-time.Minute)), f.issue(b, now.Add(-10*time.Minute)),
		classical.issue(b, now.Add(-2*time.Minute)), f.issue(b, now.Add(-5*time.Minute)))
	accept := func(*x509.Certificate, []*x509.Certificate) error { return nil }
	for b.Loop() {
		s := NewSelector(testHost, testPort, SelectOptions{Now: now, Policy: accept})
		s.StartChains(f.tlsa(), nil)
		s.Likely(txt)
		s.Likely(txt)
		if r, _, err := s.Select(txt); err != nil || !r.V3 {
			b.Fatal(r, err)
		}
	}
}
