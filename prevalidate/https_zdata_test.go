package prevalidate_test

// Prefetch with Z-data in the HTTPS record (docs/ztls-spec.md, Section
// 8), against the lab's embedded authority and ZTLS server: the entry
// holds the HTTPS record's Z-data, its connection asks no DNS question
// and says where the Z-data came from, and each fallback case of dial's
// TestHTTPSZDataFallbacks ends where a connection without a cache ends.

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/zdata"
)

// TestPrefetchZDataFromHTTPS: a service that publishes its Z-data in the
// HTTPS record only (no TXT record) is prefetched with Z-data from
// "https", and the connection from the entry (TCP, and TurboTLS whose
// key65280 sits in the same RR) is ZTLS from "https" with no DNS
// question and no chain verification.
func TestPrefetchZDataFromHTTPS(t *testing.T) {
	for _, turbo := range []bool{false, true} {
		t.Run("turbo="+strconv.FormatBool(turbo), func(t *testing.T) {
			w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: true, Turbo: turbo})
			cache, d, p := prefetchWorld(t, w, nil)
			if p.ZData == nil || p.ZData.From != zdata.SourceHTTPS || p.HTTPSZDataSkipped != "" || p.ChainFrom != "zdata" || !p.Precomputed {
				t.Fatalf("prefetched %+v (Z-data %+v)", p, p.ZData)
			}
			if turbo && p.TurboPort != w.Port {
				t.Fatalf("TurboTLS port %d, want %d", p.TurboPort, w.Port)
			}
			r, queries, verifications, err := connectCounted(t, w, cache, d, func(o *dial.Options) {
				o.Turbo, o.TurboWait = turbo, 5*time.Second
			})
			if err != nil {
				t.Fatal(err)
			}
			rep := r.Report
			if rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.ZDataFrom != dial.ZDataFromHTTPS || rep.Prefetch != dial.PrefetchValidated {
				t.Fatalf("mode %s (%s), early data %+v, Z-data from %q, prefetch %q", rep.Mode, rep.FallbackReason, rep.EarlyData, rep.ZDataFrom, rep.Prefetch)
			}
			if queries != 0 || verifications != 0 {
				t.Fatalf("the prefetched connection made %d DNS queries and %d chain verifications", queries, verifications)
			}
			if turbo && rep.Transport != "turbo" {
				t.Fatalf("transport %s (%s)", rep.Transport, rep.TurboFallback)
			}
		})
	}
}

// TestPrefetchHTTPSZDataBeforeRotation: one second before a period ends
// the HTTPS value holds the current and the next period's records; the
// prefetch selects the current one, and the connection from the entry,
// at the same instant, is ZTLS from "https" (the server accepts it).
func TestPrefetchHTTPSZDataBeforeRotation(t *testing.T) {
	nb := clock.Now().Truncate(time.Hour).Add(time.Hour)
	clk := clock.NewManual(nb.Add(-time.Second))
	w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: true, Now: clk.Now})
	if recs := w.Service.Records(clk.Now()); len(recs) != 2 {
		t.Fatalf("%d records published before the rollover, want the current and the next", len(recs))
	}
	at := func(o *dial.Options) {
		o.Now = clk.Now
		o.TLS = w.ClientTLS()
		o.TLS.Time = clk.Now
	}
	cache, d, p := prefetchWorld(t, w, at)
	if p.ZData == nil || p.ZData.From != zdata.SourceHTTPS || !p.ZData.NotAfter.Equal(nb) || !p.Expires.After(clk.Now()) {
		t.Fatalf("prefetched %+v (Z-data %+v)", p, p.ZData)
	}
	r, queries, _, err := connectCounted(t, w, cache, d, at)
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Report; rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.ZDataFrom != dial.ZDataFromHTTPS || rep.Prefetch != dial.PrefetchValidated || queries != 0 {
		t.Fatalf("mode %s (%s), Z-data from %q, prefetch %q, %d queries", rep.Mode, rep.FallbackReason, rep.ZDataFrom, rep.Prefetch, queries)
	}
}

// httpsRR is the world's HTTPS record carrying recs, changed by edit.
func httpsRR(t *testing.T, w *lab.World, recs []*zdata.Record, edit func(h *dns.HTTPS)) *dns.HTTPS {
	t.Helper()
	h, err := w.EditedHTTPS(recs, edit)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// zdataValue is h's Z-data SvcParam.
func zdataValue(h *dns.HTTPS) *dns.SVCBLocal { return lab.ZDataSvcParam(h) }

// publishAliases publishes n AliasMode records from the origin through
// a1…an.ztls.test, the last one's RRset being end (none: back to a1).
func publishAliases(t *testing.T, w *lab.World, n int, end ...dns.RR) {
	t.Helper()
	if err := w.PublishAliasChain(n, end...); err != nil {
		t.Fatal(err)
	}
}

// TestPrefetchHTTPSZDataFallbacks: dial's fallback matrix for Z-data
// from the HTTPS record, through a prefetch. The prefetch selects from
// the record a connection would (Report.ZDataFrom), for the same reason
// (FallbackReason, HTTPSZDataSkipped): a value that does not parse, a
// missing key, an alias loop or a chain of 9 fall back to the TXT
// record; a forged value that parses is TLS 1.3 even with a valid TXT
// record; a chain of 8 is followed by the prefetch (one question per
// hop). The connection from the entry then asks nothing and reports what
// a connection without a cache reports.
func TestPrefetchHTTPSZDataFallbacks(t *testing.T) {
	current := func(w *lab.World) []*zdata.Record { return w.Service.Records(clock.Now()) }
	cases := []struct {
		name    string
		noTXT   bool
		setup   func(t *testing.T, w *lab.World)
		from    dial.ZDataFrom
		mode    string // "ztls" or "tls"
		source  string // PrefetchedZData.From and Report.ZDataFrom
		reason  zdata.Reason
		skipped string
		hops    int // alias targets the prefetch asks
	}{
		{name: "forged signature, valid TXT", setup: func(t *testing.T, w *lab.World) {
			var forged []*zdata.Record
			for _, r := range current(w) {
				f := r.Clone()
				f.Signature[len(f.Signature)/2] ^= 0x55
				forged = append(forged, f)
			}
			w.PublishHTTPS(httpsRR(t, w, forged, nil))
		}, mode: "tls", source: zdata.SourceHTTPS, reason: zdata.ReasonBadSignature},
		{name: "forged signature, TXT chosen", setup: func(t *testing.T, w *lab.World) {
			forged := current(w)[0].Clone()
			forged.Signature[3] ^= 1
			w.PublishHTTPS(httpsRR(t, w, []*zdata.Record{forged}, nil))
		}, from: dial.ZDataTXT, mode: "ztls", source: zdata.SourceTXT},
		{name: "truncated value, Z-data in TXT", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsRR(t, w, current(w), func(h *dns.HTTPS) { v := zdataValue(h); v.Data = v.Data[:len(v.Data)-1] }))
		}, mode: "ztls", source: zdata.SourceTXT, skipped: "malformed Z-data"},
		{name: "missing key, Z-data in TXT", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsRR(t, w, nil, nil))
		}, from: dial.ZDataBoth, mode: "ztls", source: zdata.SourceTXT, skipped: "carries no key65370"},
		{name: "missing key, no TXT", noTXT: true, setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsRR(t, w, nil, nil))
		}, mode: "tls", source: zdata.SourceTXT, reason: zdata.ReasonNoZData, skipped: "carries no key65370"},
		{name: "AliasMode loop", setup: func(t *testing.T, w *lab.World) {
			publishAliases(t, w, 3)
		}, mode: "ztls", source: zdata.SourceTXT, skipped: "loop", hops: 3},
		{name: "AliasMode chain of 9", setup: func(t *testing.T, w *lab.World) {
			publishAliases(t, w, 9, httpsRR(t, w, current(w), nil))
		}, mode: "ztls", source: zdata.SourceTXT, skipped: "longer than 8", hops: 8},
		{name: "AliasMode chain of 8", noTXT: true, setup: func(t *testing.T, w *lab.World) {
			publishAliases(t, w, 8, httpsRR(t, w, current(w), nil))
		}, mode: "ztls", source: zdata.SourceHTTPS, hops: 8},
		{name: "ServiceMode for another endpoint", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsRR(t, w, current(w), func(h *dns.HTTPS) { h.Target = "svc.example.net." }))
		}, mode: "ztls", source: zdata.SourceTXT, skipped: "endpoint svc.example.net."},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: tc.noTXT})
			tc.setup(t, w)
			from := func(o *dial.Options) { o.ZDataFrom = tc.from }
			cache, d, p := prefetchWorld(t, w, from)
			got := zdata.SourceTXT
			if p.ZData != nil {
				got = p.ZData.From
			}
			if (p.ZData != nil) != (tc.mode == "ztls") || (p.ZData != nil && got != tc.source) || !strings.HasPrefix(p.ZDataReason, string(tc.reason)) ||
				!strings.Contains(p.HTTPSZDataSkipped, tc.skipped) || p.DNSQuestions != 6+tc.hops {
				t.Fatalf("prefetched Z-data %+v, reason %q, HTTPS skipped %q, %d DNS questions; want %s from %q, %q, %q, %d questions",
					p.ZData, p.ZDataReason, p.HTTPSZDataSkipped, p.DNSQuestions, tc.mode, tc.source, tc.reason, tc.skipped, 6+tc.hops)
			}
			r, queries, _, err := connectCounted(t, w, cache, d, from)
			if err != nil {
				t.Fatal(err)
			}
			rep := r.Report
			if rep.Prefetch != dial.PrefetchValidated || queries != 0 {
				t.Fatalf("prefetch %q, %d DNS queries", rep.Prefetch, queries)
			}
			// A connection without a cache ends the same way.
			fresh, err := connect(t, w, from)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []dial.Report{rep, fresh.Report} {
				if r.Mode != tc.mode || r.ZDataFrom != tc.source || !strings.HasPrefix(r.FallbackReason, string(tc.reason)) ||
					!strings.Contains(r.HTTPSZDataSkipped, tc.skipped) || (tc.mode == "ztls") != r.EarlyData.Accepted {
					t.Fatalf("prefetched %v: mode %s, Z-data from %q, reason %q, HTTPS skipped %q; want %s from %q, %q, %q",
						r.Prefetch != "", r.Mode, r.ZDataFrom, r.FallbackReason, r.HTTPSZDataSkipped, tc.mode, tc.source, tc.reason, tc.skipped)
				}
			}
			if rep.HTTPSZDataSkipped != fresh.Report.HTTPSZDataSkipped {
				t.Fatalf("HTTPS skipped: %q from the entry, %q without a cache", rep.HTTPSZDataSkipped, fresh.Report.HTTPSZDataSkipped)
			}
		})
	}
}

// A connection that takes Z-data from TXT only does not use an entry
// validated from the HTTPS record (another Policy): it gets the entry's
// DNS answers and verifies them, from TXT.
func TestPrefetchedHTTPSEntryNotForTXTOnly(t *testing.T) {
	w := startWorld(t, lab.Options{HTTPSZData: true})
	cache, d, p := prefetchWorld(t, w, nil)
	if p.ZData == nil || p.ZData.From != zdata.SourceHTTPS {
		t.Fatalf("prefetched Z-data %+v (%s)", p.ZData, p.ZDataReason)
	}
	r, queries, verifications, err := connectCounted(t, w, cache, d, func(o *dial.Options) { o.ZDataFrom = dial.ZDataTXT })
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "ztls" || rep.ZDataFrom != dial.ZDataFromTXT || rep.Prefetch != dial.PrefetchDNS || queries != 0 || verifications == 0 {
		t.Fatalf("mode %s (%s), Z-data from %q, prefetch %q, %d queries, %d verifications", rep.Mode, rep.FallbackReason,
			rep.ZDataFrom, rep.Prefetch, queries, verifications)
	}
}

// A cache opened from the file holds the HTTPS answer with its Z-data
// (the records as zone-file text, read back): the connection replays
// it, verifies, and is ZTLS from "https" with no DNS question.
func TestCacheFileKeepsHTTPSZData(t *testing.T) {
	w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: true})
	path := t.TempDir() + "/prefetch.json"
	_, d, _ := prefetchWorld(t, w, func(o *dial.Options) { o.Cache = prevalidate.OpenCache(prevalidate.CacheOptions{Path: path}) })
	loaded := prevalidate.OpenCache(prevalidate.CacheOptions{Path: path})
	r, queries, verifications, err := connectCounted(t, w, loaded, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "ztls" || rep.ZDataFrom != dial.ZDataFromHTTPS || rep.Prefetch != dial.PrefetchDNS || queries != 0 || verifications == 0 {
		t.Fatalf("loaded entry: mode %s (%s), Z-data from %q (HTTPS skipped %q), prefetch %q, %d queries, %d verifications", rep.Mode,
			rep.FallbackReason, rep.ZDataFrom, rep.HTTPSZDataSkipped, rep.Prefetch, queries, verifications)
	}
}
