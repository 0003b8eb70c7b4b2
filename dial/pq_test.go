package dial

// Post-quantum ZTLS end to end (docs/ztls-spec.md, Section 9.6) against
// the lab's embedded authority and ZTLS server, publishing v3 records
// beside announcing classical ones; the client's resolver asks over UDP,
// and the TXT answer, over 1232 bytes, comes over TCP. The attacks of
// Section 9.6 are made by publishing what a path would deliver: each
// ends in TLS 1.3 (or in classical early data only when the user opted
// in), never in classical early data by default.

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
)

// pqRecords are the world's current records, v3 and classical apart.
func pqRecords(t *testing.T, w *lab.World, now time.Time) (v3, classical []*zdata.Record) {
	t.Helper()
	for _, r := range w.Service.Records(now) {
		if r.V3 {
			v3 = append(v3, r)
		} else {
			classical = append(classical, r)
		}
	}
	if len(v3) == 0 || len(classical) == 0 {
		t.Fatalf("the world publishes %d v3 and %d classical records", len(v3), len(classical))
	}
	return v3, classical
}

// publishTXT replaces the world's TXT RRset with txt (each a record's
// strings), keeping its TLSA record.
func publishTXT(t *testing.T, w *lab.World, txt ...[]string) {
	t.Helper()
	rrs := []dns.RR{zdata.TLSA(w.Host, w.Port, w.Cert.Chain[0], time.Minute)}
	name := zdata.TXTName(w.Host, w.Port)
	for _, s := range txt {
		rrs = append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: s})
	}
	if err := w.Publish(w.Host, w.Port, rrs); err != nil {
		t.Fatal(err)
	}
}

func txtOfRecs(recs []*zdata.Record) [][]string {
	var out [][]string
	for _, r := range recs {
		out = append(out, r.TXT())
	}
	return out
}

// wantPQZTLS checks a post-quantum ZTLS connection: early data accepted
// under a v3 record, the answer received once.
func wantPQZTLS(t *testing.T, r *Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || !rep.EarlyData.PostQuantum || rep.EarlyData.ClassicalForced ||
		!r.Conn.ConnectionState().ZTLSKEM || rep.TLS.Group != "X25519MLKEM768" || rep.ResponseBytes != len("hello") {
		t.Fatalf("mode %s (%s), early data %+v, group %s, %d response bytes: want post-quantum ZTLS", rep.Mode,
			rep.FallbackReason, rep.EarlyData, rep.TLS.Group, rep.ResponseBytes)
	}
}

// wantNoClassicalEarly checks a connection that fell back to TLS 1.3
// for want, sent no early data, and got its answer (the request sent
// once, after the handshake).
func wantNoClassicalEarly(t *testing.T, r *Result, err error, want ...zdata.Reason) {
	t.Helper()
	wantFallback(t, r, err, want...)
	if rep := r.Report; rep.EarlyData.Offered || rep.ResponseBytes != len("hello") || r.Conn.ConnectionState().ZTLS {
		t.Fatalf("early data %+v, %d response bytes: want TLS 1.3 with the request sent after the handshake", rep.EarlyData, rep.ResponseBytes)
	}
}

// TestPQConnectZTLS: the TXT answer with the v3 records exceeds 1232
// bytes and comes over TCP after a truncated UDP answer; the connection
// is ZTLS under the v3 record (ztls_kem sent, accepted), the report says
// the early data was post-quantum, and the service is pinned. With the
// Z-data in the HTTPS record too, its classical records announce v3, so
// the client asks TXT and uses the v3 record.
func TestPQConnectZTLS(t *testing.T) {
	for _, https := range []bool{false, true} {
		t.Run("https="+strconv.FormatBool(https), func(t *testing.T) {
			w := startWorld(t, lab.Options{PostQuantum: true, HTTPSZData: https})
			res, err := w.Resolver(resolver.UDP)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Close()
			a, err := res.Lookup(context.Background(), zdata.TXTName(w.Host, w.Port), dns.TypeTXT)
			if err != nil || a.Transport != "tcp" || len(a.TXTStrings()) < 2 {
				t.Fatalf("TXT answer over %q with %d records, %v: want the answer over TCP after a truncated UDP one", a.Transport, len(a.TXTStrings()), err)
			}
			mem := NewMemory()
			before := txtQueries(w)
			r, err := connect(t, w, func(o *Options) { o.Memory = mem })
			wantPQZTLS(t, r, err)
			// Announced in the HTTPS record: TXT asked over TCP at once;
			// else over UDP first, truncated, then over TCP.
			if want := map[bool]int64{true: 1, false: 2}[https]; txtQueries(w)-before != want {
				t.Fatalf("%d TXT queries at the authority, want %d", txtQueries(w)-before, want)
			}
			if r.Report.ZDataFrom != ZDataFromTXT || r.Report.PostQuantum != "prefer" {
				t.Fatalf("Z-data from %q, policy %q", r.Report.ZDataFrom, r.Report.PostQuantum)
			}
			if https && !strings.HasPrefix(r.Report.HTTPSZDataSkipped, string(zdata.ReasonNoPQZData)) {
				t.Fatalf("HTTPS Z-data skipped: %q, want the announcement's reason", r.Report.HTTPSZDataSkipped)
			}
			if !mem.PQPinned(w.Host, w.Port, clock.Now()) {
				t.Fatal("a valid v3 record did not pin the service")
			}
			var text strings.Builder
			r.Report.WriteText(&text)
			if !strings.Contains(text.String(), "early data post-quantum: yes") {
				t.Fatalf("text report:\n%s", text.String())
			}
		})
	}
}

// TestPQStrippedV3: a path removes the v3 records from the TXT answer
// (and the HTTPS record carries classical Z-data only): the classical
// records announce v3, so the default and post-quantum-only clients use
// TLS 1.3; the user's explicit opt-in gets classical ZTLS, reported as
// forced. A v1-only client sees the same classical records and is ZTLS
// as before (the announcement is an opaque id to it).
func TestPQStrippedV3(t *testing.T) {
	for _, https := range []bool{false, true} {
		t.Run("https="+strconv.FormatBool(https), func(t *testing.T) {
			w := startWorld(t, lab.Options{PostQuantum: true, HTTPSZData: https})
			_, classical := pqRecords(t, w, clock.Now())
			publishTXT(t, w, txtOfRecs(classical)...)
			for _, p := range []PostQuantum{"", PQOnly} {
				r, err := connect(t, w, func(o *Options) { o.PostQuantum = p })
				wantNoClassicalEarly(t, r, err, zdata.ReasonNoPQZData, zdata.ReasonNoZData)
			}
			r, err := connect(t, w, func(o *Options) { o.PostQuantum = PQClassical })
			if err != nil || r.Report.Mode != "ztls" || !r.Report.EarlyData.ClassicalForced || r.Report.EarlyData.PostQuantum {
				t.Fatalf("opted in: %v, mode %s (%s), early data %+v", err, r.Report.Mode, r.Report.FallbackReason, r.Report.EarlyData)
			}
			var text strings.Builder
			r.Report.WriteText(&text)
			if !strings.Contains(text.String(), "FORCED") {
				t.Fatalf("text report of a forced classical connection:\n%s", text.String())
			}
		})
	}
}
