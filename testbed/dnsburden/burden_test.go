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

// missesEvery is how many times a record of the given TTL misses the stub
// cache on a name visited every every for span, from time 0: once per
// TTL, rounded up (the TTLs here are multiples of every).
func missesEvery(every, span, ttl time.Duration) int {
	n := int(span / ttl)
	if span%ttl != 0 {
		n++
	}
	return n
}

// The HTTPS-record path on a busy name. A browser asks A, AAAA and HTTPS
// anyway: Z-data in the HTTPS record with the leaf held adds no question
// (+0 %), and TLSA and CERT at a day's TTL add one query each per day. A
// client that did not ask for the HTTPS record pays it at the address TTL.
func TestHTTPSPathOnABusyName(t *testing.T) {
	every, span := 10*time.Second, 10*time.Hour
	trace := Periodic("busy.example", every, span)
	addr, cert := missesEvery(every, span, AddrTTL), missesEvery(every, span, CertTTL)

	base := Simulate(trace, BrowserBase)
	if base.Queries != 3*addr {
		t.Fatalf("browser without ZTLS: %d queries, want %d (A, AAAA, HTTPS each every %v)", base.Queries, 3*addr, AddrTTL)
	}
	held := Simulate(trace, BrowserHTTPSHeld)
	if held != base || Increase(base, held) != 0 {
		t.Fatalf("browser, Z-data in HTTPS, leaf held: %+v against %+v, want the same traffic", held, base)
	}
	withCert := Simulate(trace, BrowserHTTPSCert)
	if withCert.Queries != base.Queries+2*cert {
		t.Fatalf("browser, TLSA and CERT at %v: %d queries, want %d + %d", CertTTL, withCert.Queries, base.Queries, 2*cert)
	}
	txt := Simulate(trace, BrowserTXT)
	if z := missesEvery(every, span, ZDataTTL); txt.Queries != base.Queries+3*z {
		t.Fatalf("browser, TXT path: %d queries, want %d + %d", txt.Queries, base.Queries, 3*z)
	}

	ours := Simulate(trace, OurBase)
	if got, want := Increase(ours, Simulate(trace, OurHTTPSHeld)), 100*float64(addr)/float64(2*addr); got != want {
		t.Fatalf("dialer that did not ask HTTPS: +%.2f %%, want +%.2f %% (one more record at the address TTL)", got, want)
	}
}

// TestComparisons runs the table's rows over the synthetic day of
// docs/testbed.md and checks what follows from the models: no row costs
// less than its base, the browser's HTTPS path with a held leaf costs
// exactly nothing, and each HTTPS path costs at most its client's TXT path
// (it drops TXT and keeps TLSA and CERT longer).
func TestComparisons(t *testing.T) {
	trace, err := Synthetic(SyntheticConfig{Names: 2000, Rate: 0.2, Span: 24 * time.Hour, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range Compare(Periodic("busy.example", 10*time.Second, 10*time.Hour)) {
		t.Logf("busy name: %-26s %-20s %+6.2f %%", r.Comparison.Client, r.Comparison.Path, r.Increase)
	}
	rows := Compare(trace)
	if len(rows) != len(Comparisons) {
		t.Fatalf("%d rows for %d comparisons", len(rows), len(Comparisons))
	}
	byName := map[string]Row{}
	for _, r := range rows {
		t.Logf("%-26s %-20s %6d → %6d packets  %+6.1f %%", r.Comparison.Client, r.Comparison.Path, r.Base.Packets, r.With.Packets, r.Increase)
		if r.Increase < 0 || r.With.Packets < r.Base.Packets {
			t.Errorf("%s, %s: fewer packets with ZTLS than without", r.Comparison.Client, r.Comparison.Path)
		}
		byName[r.Comparison.Client+"/"+r.Comparison.Path] = r
	}
	row := func(client, path string) Row {
		t.Helper()
		r, ok := byName[client+"/"+path]
		if !ok {
			t.Fatalf("no row %s, %s", client, path)
		}
		return r
	}
	const browser, ours = "browser (A, AAAA, HTTPS)", "our dialer (A, AAAA)"
	if r := row(browser, "HTTPS, leaf held"); r.Increase != 0 || r.With != r.Base {
		t.Errorf("browser, HTTPS path, leaf held: %+.1f %%, want +0 %%", r.Increase)
	}
	for _, client := range []string{browser, ours} {
		txt := row(client, "TXT + TLSA + CERT")
		for _, path := range []string{"HTTPS, leaf held", "HTTPS + TLSA + CERT"} {
			if r := row(client, path); r.With.Packets > txt.With.Packets {
				t.Errorf("%s: %s costs %d packets, the TXT path %d", client, path, r.With.Packets, txt.With.Packets)
			}
		}
	}
	// The rows as before.
	if r := row("our dialer (A, AAAA)", "TXT + TLSA"); r.Increase != Increase(Simulate(trace, OurBase), Simulate(trace, OurZTLS)) {
		t.Errorf("the dialer's TXT row changed: %+.1f %%", r.Increase)
	}
}
