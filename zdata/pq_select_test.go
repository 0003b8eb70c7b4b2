package zdata

import (
	"bytes"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// A post-quantum service's answer holds v3 and classical records for two
// periods; the client's work on it is what its first flight needs
// (docs/ztls-spec.md, Section 9.6, issue 30): the answer is parsed once
// for Likely and Select, and each record's share (FIPS 203's modulus
// check of its ML-KEM key) and signature are checked only when the
// Selector reaches it in order. The preference is unchanged: a valid v3
// record before any classical one, the next v3 record when the first
// fails, a classical one only when no v3 record is valid.
func TestPQSelectorChecksOnlyWhatItUses(t *testing.T) {
	now := clock.Now()
	f := pqFixture(t, nil)
	first := f.issue(t, now.Add(-5*time.Minute)) // the latest not-after: tried first
	second := f.issue(t, now.Add(-10*time.Minute))
	classical := newFixtureWith(t, f.ca, f.leaf, Options{}, nil)
	v1a, v1b := classical.issue(t, now.Add(-time.Minute)), classical.issue(t, now.Add(-2*time.Minute))
	badShare := *second.Record
	badShare.KeyShare = bytes.Clone(second.Record.KeyShare)
	badShare.KeyShare[0], badShare.KeyShare[1] = 0xff, 0xff // a coefficient >= q
	forged := first.Record.TXT()
	forged[len(forged)-1] = mustB64(bytes.Repeat([]byte{7}, 70))
	newSel := func(o SelectOptions) *Selector {
		o.Roots, o.Now = f.roots(), now
		s := NewSelector(testHost, testPort, o)
		s.StartChains(f.tlsa(), nil)
		return s
	}
	checked := func(s *Selector) (n int, which []uint32) {
		for i, d := range s.last.done {
			if d {
				n++
				which = append(which, s.last.recs[i].ID)
			}
		}
		return n, which
	}

	// The first v3 record is valid: the second's share (invalid here) and
	// the classical records' are never checked; Likely and Select share
	// one parse, and hand out copies.
	txt := [][]string{v1a.Record.TXT(), badShare.TXT(), v1b.Record.TXT(), first.Record.TXT()}
	s := newSel(SelectOptions{})
	likely, _ := s.Likely(txt)
	parsed := s.last
	likely.ALPN = "mutated"
	r, _, err := s.Select(txt)
	if err != nil || !r.V3 || r.ID != first.Record.ID {
		t.Fatalf("selected %v, %v; want the first v3 record", r, err)
	}
	if s.last != parsed {
		t.Error("Select parsed the answer Likely had parsed")
	}
	if r == likely || r.ALPN == "mutated" {
		t.Error("Likely and Select handed out the Selector's own record")
	}
	if n, ids := checked(s); n != 1 || ids[0] != first.Record.ID {
		t.Errorf("shares checked: %d (%v), want the selected record's only", n, ids)
	}

	// The first v3 record forged: the second is reached, its share checked
	// and refused; the client falls to a classical record (prefer), or to
	// nothing (post-quantum only).
	txt = [][]string{v1a.Record.TXT(), badShare.TXT(), forged}
	s = newSel(SelectOptions{})
	if r, _, err = s.Select(txt); err != nil || r.V3 {
		t.Fatalf("forged and invalid v3 records: %v, %v; want a v1 record", r, err)
	}
	if n, _ := checked(s); n != 3 {
		t.Errorf("shares checked: %d, want 3 (two v3 records refused, then the v1 record)", n)
	}
	s = newSel(SelectOptions{PostQuantumOnly: true})
	if r, _, err = s.Select(txt); r != nil || err == nil {
		t.Fatalf("post-quantum-only client took %v, %v", r, err)
	}
	if reason := ReasonOf(err); reason != ReasonBadSignature && reason != ReasonInvalidShare {
		t.Errorf("post-quantum-only refusal: %v, want the forged record's or the invalid share's reason", err)
	}

	// The second v3 record valid, the first forged: the second is used.
	txt = [][]string{v1a.Record.TXT(), forged, second.Record.TXT()}
	s = newSel(SelectOptions{})
	if r, _, err = s.Select(txt); err != nil || r.ID != second.Record.ID {
		t.Fatalf("selected %v, %v; want the second v3 record", r, err)
	}
}
