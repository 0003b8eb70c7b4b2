package dnsburden

import (
	"strings"
	"testing"
	"time"
)

// A name visited more often than every 5 minutes: A misses once per 5
// minutes, each 60-minute Z-data record once per hour. Two Z-data records
// add 2/12 = 16.7 % (the paper's figure); one would add 8.3 %.
func TestPaperFigureOnABusyName(t *testing.T) {
	trace := Periodic("busy.example", 10*time.Second, 10*time.Hour)
	base := Simulate(trace, PaperBase)
	with := Simulate(trace, PaperZTLS)
	if base.Queries != 120 || with.Queries != 140 {
		t.Fatalf("queries base %d with %d, want 120 and 140 (10 h: 12 A and 2 Z-data per hour)", base.Queries, with.Queries)
	}
	if got := Increase(base, with); got < 16.66 || got > 16.67 {
		t.Fatalf("increase %.3f %%, want 16.67 %%", got)
	}
	one := Simulate(trace, []Record{{"A", 5 * time.Minute}, {"TXT", time.Hour}})
	if got := Increase(base, one); got < 8.33 || got > 8.34 {
		t.Fatalf("one Z-data record: increase %.3f %%, want 8.33 %%", got)
	}
}

// A name visited less often than its TTLs misses every record every visit.
func TestRareNameMissesEverything(t *testing.T) {
	trace := Periodic("rare.example", 2*time.Hour, 24*time.Hour)
	base, with := Simulate(trace, PaperBase), Simulate(trace, PaperZTLS)
	if base.Packets != 2*len(trace) || with.Packets != 6*len(trace) {
		t.Fatalf("packets %d and %d for %d visits", base.Packets, with.Packets, len(trace))
	}
}

func TestSyntheticTrace(t *testing.T) {
	cfg := SyntheticConfig{Names: 2000, Rate: 0.2, Span: 24 * time.Hour, Seed: 7}
	a, err := Synthetic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Synthetic(cfg)
	if len(a) != len(b) || a[len(a)/2] != b[len(b)/2] {
		t.Fatal("same seed gave different traces")
	}
	if n := len(a); n < 15000 || n > 20000 {
		t.Fatalf("%d visits in 24 h at 0.2/s", n)
	}
	paper := Increase(Simulate(a, PaperBase), Simulate(a, PaperZTLS))
	ours := Increase(Simulate(a, OurBase), Simulate(a, OurZTLS))
	// Between the busy-name floor and the rare-name ceiling.
	for _, x := range []float64{paper, ours} {
		if x < 16.6 || x > 200 {
			t.Fatalf("increase %.1f %% outside [16.7, 200]", x)
		}
	}
	t.Logf("synthetic trace (%d visits, %d names, Zipf 1.1): paper model +%.1f %%, our dialer +%.1f %%", len(a), cfg.Names, paper, ours)
	if _, err := Synthetic(SyntheticConfig{}); err == nil {
		t.Fatal("empty config accepted")
	}
}

func TestParseTrace(t *testing.T) {
	tr, err := ParseTrace(strings.NewReader("# t name\n0 a.example\n\n1.5 B.example\n1.5 a.example\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 3 || tr[1].Name != "b.example" || tr[1].At != 1500*time.Millisecond {
		t.Fatalf("parsed %+v", tr)
	}
	for _, bad := range []string{"1", "x a", "-1 a", "2 a\n1 b", "NaN a", "1 a b", "1e300 a"} {
		if _, err := ParseTrace(strings.NewReader(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		} else if !strings.HasPrefix(err.Error(), "dnsburden: ") {
			t.Errorf("%q: error %q lacks the package prefix", bad, err)
		}
	}
}

func FuzzParseTrace(f *testing.F) {
	f.Add("0 a.example\n1.5 b.example\n")
	f.Add("# comment\n\n3 x\n")
	f.Add("1 a\n0 b\n")
	f.Fuzz(func(t *testing.T, s string) {
		tr, err := ParseTrace(strings.NewReader(s))
		if err != nil {
			return
		}
		for i := 1; i < len(tr); i++ {
			if tr[i].At < tr[i-1].At {
				t.Fatal("accepted a trace going backwards")
			}
		}
		Simulate(tr, OurZTLS)
	})
}
