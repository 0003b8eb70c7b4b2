package dnsburden

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Visit is one connection attempt in a trace: at At the client needs the
// records of Name.
type Visit struct {
	At   time.Duration
	Name string
}

// Record is one record type a visit looks up, with its TTL.
type Record struct {
	Type string
	TTL  time.Duration
}

// Models of what a first visit looks up.
var (
	// PaperBase is the paper's baseline: an A record with a 5-minute TTL.
	PaperBase = []Record{{"A", 5 * time.Minute}}
	// PaperZTLS adds Z-data with a 60-minute TTL. We read the paper's
	// Z-data as two records (the key share in TXT and the certificate in
	// TLSA), which is what reproduces its 16.7 % on a busy name.
	PaperZTLS = []Record{{"A", 5 * time.Minute}, {"TXT", time.Hour}, {"TLSA", time.Hour}}
	// OurBase is this project's dialer without ZTLS: A and AAAA in parallel.
	OurBase = []Record{{"A", 5 * time.Minute}, {"AAAA", 5 * time.Minute}}
	// OurZTLS is this project's ZTLS dialer: A, AAAA, Z-data TXT and TLSA
	// (Z-data and TLSA live 60 minutes).
	OurZTLS = []Record{{"A", 5 * time.Minute}, {"AAAA", 5 * time.Minute}, {"TXT", time.Hour}, {"TLSA", time.Hour}}
)

// TTLs of the models.
const (
	// AddrTTL is the addresses' TTL, and that of the HTTPS record (RFC
	// 9460), which browsers ask for beside A and AAAA and which the sites
	// that publish one commonly keep to minutes as well.
	AddrTTL = 5 * time.Minute
	// ZDataTTL is the Z-data's TTL on the TXT path: the paper's 60 minutes.
	ZDataTTL = time.Hour
	// CertTTL is the TLSA and CERT records' TTL on the HTTPS path: they
	// change only with the certificate, so a publisher of Z-data in the
	// HTTPS record sets them up to a day (docs/ztls-spec.md, Section 8.3).
	CertTTL = 24 * time.Hour
)

// Models of the HTTPS-record path (docs/ztls-spec.md, Section 8): Z-data
// in a SvcParam of the HTTPS record, whose TTL the Z-data keeps to
// minutes (Section 8.3: it ends before the records' not-after; AddrTTL at
// most). The leaf that verifies it is held from an earlier visit (no
// query) or comes from TLSA and CERT asked in parallel (CertTTL).
var (
	// OurZTLSCERT is this project's dialer on the TXT path with the CERT
	// intermediates it also asks for (a leaf from a public CA has one).
	OurZTLSCERT = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"TXT", ZDataTTL}, {"TLSA", ZDataTTL}, {"CERT", ZDataTTL}}
	// OurHTTPSHeld is a client that did not ask for the HTTPS record
	// before (OurBase) taking Z-data from it, the leaf held.
	OurHTTPSHeld = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"HTTPS", AddrTTL}}
	// OurHTTPSCert is OurHTTPSHeld with TLSA and CERT asked in parallel.
	OurHTTPSCert = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"HTTPS", AddrTTL}, {"TLSA", CertTTL}, {"CERT", CertTTL}}

	// BrowserBase is a browser without ZTLS: A, AAAA and HTTPS on every
	// navigation.
	BrowserBase = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"HTTPS", AddrTTL}}
	// BrowserTXT is that browser with ZTLS on the TXT path: TXT, TLSA
	// and CERT besides.
	BrowserTXT = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"HTTPS", AddrTTL}, {"TXT", ZDataTTL}, {"TLSA", ZDataTTL}, {"CERT", ZDataTTL}}
	// BrowserHTTPSHeld takes Z-data from the HTTPS record it asks anyway,
	// the leaf held: the same questions as BrowserBase.
	BrowserHTTPSHeld = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"HTTPS", AddrTTL}}
	// BrowserHTTPSCert is BrowserHTTPSHeld with TLSA and CERT asked in
	// parallel.
	BrowserHTTPSCert = []Record{{"A", AddrTTL}, {"AAAA", AddrTTL}, {"HTTPS", AddrTTL}, {"TLSA", CertTTL}, {"CERT", CertTTL}}
)

// Comparison is one row of the burden table: a client's queries with
// ZTLS (With) against the same client's without it (Base).
type Comparison struct {
	Client string // who asks
	Path   string // where the Z-data and the leaf come from
	Base   []Record
	With   []Record
}

// Comparisons are the table's rows: the paper's model and this project's
// TXT path as before, then the TXT and HTTPS paths for a client that did
// not ask for the HTTPS record before and for a browser, which does.
var Comparisons = []Comparison{
	{"paper model", "TXT + TLSA", PaperBase, PaperZTLS},
	{"our dialer (A, AAAA)", "TXT + TLSA", OurBase, OurZTLS},
	{"our dialer (A, AAAA)", "TXT + TLSA + CERT", OurBase, OurZTLSCERT},
	{"our dialer (A, AAAA)", "HTTPS, leaf held", OurBase, OurHTTPSHeld},
	{"our dialer (A, AAAA)", "HTTPS + TLSA + CERT", OurBase, OurHTTPSCert},
	{"browser (A, AAAA, HTTPS)", "TXT + TLSA + CERT", BrowserBase, BrowserTXT},
	{"browser (A, AAAA, HTTPS)", "HTTPS, leaf held", BrowserBase, BrowserHTTPSHeld},
	{"browser (A, AAAA, HTTPS)", "HTTPS + TLSA + CERT", BrowserBase, BrowserHTTPSCert},
}

// Row is a Comparison simulated over one trace.
type Row struct {
	Comparison Comparison
	Base, With Counts
	Increase   float64 // percent more packets With than Base
}

// Compare simulates every Comparison over trace.
func Compare(trace []Visit) []Row {
	rows := make([]Row, len(Comparisons))
	for i, c := range Comparisons {
		base, with := Simulate(trace, c.Base), Simulate(trace, c.With)
		rows[i] = Row{Comparison: c, Base: base, With: with, Increase: Increase(base, with)}
	}
	return rows
}

// Counts is the stub↔resolver traffic of one simulation.
type Counts struct {
	Visits  int `json:"visits"`
	Queries int `json:"queries"`
	// Packets counts queries and responses (UDP, no retries).
	Packets int `json:"packets"`
}

// Simulate runs a stub cache over trace (sorted by time) where each visit
// needs records, and counts the queries that miss the cache.
func Simulate(trace []Visit, records []Record) Counts {
	type key struct{ name, typ string }
	expires := map[key]time.Duration{}
	var c Counts
	for _, v := range trace {
		c.Visits++
		for _, r := range records {
			k := key{v.Name, r.Type}
			if e, ok := expires[k]; ok && v.At < e {
				continue
			}
			c.Queries++
			c.Packets += 2
			expires[k] = v.At + r.TTL
		}
	}
	return c
}

// Increase returns how many percent more packets with has than base.
func Increase(base, with Counts) float64 {
	if base.Packets == 0 {
		return 0
	}
	return 100 * float64(with.Packets-base.Packets) / float64(base.Packets)
}

// Periodic is a trace of one name visited every every for span.
func Periodic(name string, every, span time.Duration) []Visit {
	var t []Visit
	for at := time.Duration(0); at < span; at += every {
		t = append(t, Visit{At: at, Name: name})
	}
	return t
}

// SyntheticConfig describes a generated trace.
type SyntheticConfig struct {
	// Names is the number of distinct names (popularity follows Zipf).
	Names int
	// Rate is the mean number of visits per second (Poisson arrivals).
	Rate float64
	// Span is the trace's length.
	Span time.Duration
	// ZipfS is the Zipf exponent (> 1); 0 means 1.1.
	ZipfS float64
	// Seed makes the trace repeatable.
	Seed uint64
}

// Synthetic generates a trace: one client browsing Zipf-popular names.
func Synthetic(cfg SyntheticConfig) ([]Visit, error) {
	if cfg.Names <= 0 || !(cfg.Rate > 0) || cfg.Span <= 0 {
		return nil, errors.New("dnsburden: synthetic trace needs names, rate and span > 0")
	}
	s := cfg.ZipfS
	if s == 0 {
		s = 1.1
	}
	if !(s > 1) {
		return nil, fmt.Errorf("dnsburden: Zipf exponent %v must be > 1", s)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x2d6e))
	zipf := newZipf(rng, s, cfg.Names)
	var t []Visit
	at := time.Duration(0)
	for {
		gap := rng.ExpFloat64() / cfg.Rate
		at += time.Duration(gap * float64(time.Second))
		if at >= cfg.Span {
			return t, nil
		}
		t = append(t, Visit{At: at, Name: "name" + strconv.Itoa(zipf()) + ".example"})
	}
}

// newZipf samples ranks 0..n-1 with probability proportional to 1/(k+1)^s
// by inverting the cumulative distribution.
func newZipf(rng *rand.Rand, s float64, n int) func() int {
	cdf := make([]float64, n)
	var sum float64
	for k := 0; k < n; k++ {
		sum += 1 / math.Pow(float64(k+1), s)
		cdf[k] = sum
	}
	return func() int {
		u := rng.Float64() * sum
		return sort.SearchFloat64s(cdf, u)
	}
}

// ParseTrace reads a trace: one visit per line, "SECONDS NAME", seconds a
// non-negative decimal; blank lines and lines starting with # are skipped.
// Visits must be in time order.
func ParseTrace(r io.Reader) ([]Visit, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<16)
	var t []Visit
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' {
			continue
		}
		f := strings.Fields(s)
		if len(f) != 2 {
			return nil, fmt.Errorf("dnsburden: line %d: want \"SECONDS NAME\"", line)
		}
		sec, err := strconv.ParseFloat(f[0], 64)
		if err != nil || !(sec >= 0) || sec > 1e9 {
			return nil, fmt.Errorf("dnsburden: line %d: bad time %q", line, f[0])
		}
		at := time.Duration(sec * float64(time.Second))
		if len(t) > 0 && at < t[len(t)-1].At {
			return nil, fmt.Errorf("dnsburden: line %d: time goes backwards", line)
		}
		if len(f[1]) > 253 {
			return nil, fmt.Errorf("dnsburden: line %d: name too long", line)
		}
		t = append(t, Visit{At: at, Name: strings.ToLower(f[1])})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("dnsburden: %w", err)
	}
	return t, nil
}
