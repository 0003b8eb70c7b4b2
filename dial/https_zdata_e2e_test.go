package dial

// Z-data in the HTTPS record (docs/ztls-spec.md, Section 8), end to end
// against the lab's embedded authority and ZTLS server: accepted with no
// TXT query, and the fallback matrix of the TXT path repeated for it.

import (
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// txtQueries is how many TXT queries for the world's Z-data its
// authority received.
func txtQueries(w *lab.World) int64 { return w.Queries(zdata.TXTName(w.Host, w.Port), dns.TypeTXT) }

func tlsaQueries(w *lab.World) int64 { return w.Queries(zdata.TLSAName(w.Host, w.Port), dns.TypeTLSA) }

// wantZTLSFrom checks a connection made ZTLS with its early request
// accepted, with Z-data from the record source.
func wantZTLSFrom(t *testing.T, r *Result, err error, source string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.ZDataFrom != source {
		t.Fatalf("mode %s (%s), early data %+v, Z-data from %q (HTTPS skipped: %q), want ZTLS from %q",
			rep.Mode, rep.FallbackReason, rep.EarlyData, rep.ZDataFrom, rep.HTTPSZDataSkipped, source)
	}
}

// TestConnectZDataFromHTTPS: with the Z-data in the HTTPS record only
// (beside TurboTLS's key65280 in the same RR, over TCP and over
// TurboTLS), the connection is ZTLS and no TXT query reaches the
// authority; the next connection, holding the leaf the first verified,
// asks neither TXT nor TLSA (the queries of a browser: Section 8.3).
func TestConnectZDataFromHTTPS(t *testing.T) {
	for _, turbo := range []bool{false, true} {
		t.Run("turbo="+strconv.FormatBool(turbo), func(t *testing.T) {
			w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: true, Turbo: turbo})
			mem := NewMemory()
			// The TurboTLS wait is generous: transport turbo is asserted
			// and the machine running the tests may be loaded (the
			// default wait on loopback is a few milliseconds).
			opts := func(o *Options) { o.Memory, o.Turbo, o.TurboWait = mem, turbo, 5*time.Second }
			r, err := connect(t, w, opts)
			wantZTLSFrom(t, r, err, ZDataFromHTTPS)
			if n := txtQueries(w); n != 0 {
				t.Fatalf("%d TXT queries, want none", n)
			}
			if !hasStep(r.Report, "https_zdata") || hasStep(r.Report, "txt_asked") {
				t.Fatalf("trace %+v", r.Report.Trace)
			}
			if turbo && r.Report.Transport != "turbo" {
				t.Fatalf("transport %s (%s), want turbo", r.Report.Transport, r.Report.TurboFallback)
			}
			tlsa := tlsaQueries(w) // a truncated UDP answer is asked again over TCP
			if tlsa == 0 {
				t.Fatal("no TLSA query on the first connection")
			}
			r, err = connect(t, w, opts)
			wantZTLSFrom(t, r, err, ZDataFromHTTPS)
			if n := tlsaQueries(w); n != tlsa || txtQueries(w) != 0 {
				t.Fatalf("second connection with the leaf held: %d TLSA, %d TXT queries in all", n, txtQueries(w))
			}
		})
	}
}

// TestZDataFromChoices: Options.ZDataFrom, with Z-data in both records.
func TestZDataFromChoices(t *testing.T) {
	for _, tc := range []struct {
		from     ZDataFrom
		source   string
		txtAsked int64
	}{{"", ZDataFromHTTPS, 0}, {ZDataBoth, ZDataFromHTTPS, 1}, {ZDataTXT, ZDataFromTXT, 1}} {
		t.Run(tc.from.String(), func(t *testing.T) {
			w := startWorld(t, lab.Options{HTTPSZData: true})
			r, err := connect(t, w, func(o *Options) { o.ZDataFrom = tc.from })
			wantZTLSFrom(t, r, err, tc.source)
			if n := txtQueries(w); n != tc.txtAsked {
				t.Fatalf("%d TXT queries, want %d", n, tc.txtAsked)
			}
		})
	}
	if _, err := Connect(ctxT(t), "x.test:443", Options{ZDataFrom: "dns"}); err == nil || !strings.Contains(err.Error(), "want https, both or txt") {
		t.Fatalf("unknown ZDataFrom: %v", err)
	}
}

// httpsWith is the world's HTTPS record with recs, changed by edit.
func httpsWith(t *testing.T, w *lab.World, recs []*zdata.Record, edit func(h *dns.HTTPS)) *dns.HTTPS {
	t.Helper()
	h, err := w.EditedHTTPS(recs, edit)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// zdataValue is h's Z-data SvcParam.
func zdataValue(h *dns.HTTPS) *dns.SVCBLocal { return lab.ZDataSvcParam(h) }

// publishAt replaces name's HTTPS RRset with rrs (their owner set to name).
func publishAt(t *testing.T, w *lab.World, name string, rrs ...dns.RR) {
	t.Helper()
	if err := w.PublishHTTPSAt(name, rrs...); err != nil {
		t.Fatal(err)
	}
}

// aliasChainTo publishes n AliasMode records from the origin through
// a1…an.ztls.test, the last one's RRset being end (none: a loop back to a1).
func aliasChainTo(t *testing.T, w *lab.World, n int, end ...dns.RR) {
	t.Helper()
	if err := w.PublishAliasChain(n, end...); err != nil {
		t.Fatal(err)
	}
}

// TestHTTPSZDataFallbacks is docs/ztls-spec.md, Section 6's matrix for
// Z-data from the HTTPS record: each case gives its reason and still the
// right response, over TLS 1.3 or ZTLS through the TXT record the client
// then asks (connect checks the response).
func TestHTTPSZDataFallbacks(t *testing.T) {
	current := func(w *lab.World) []*zdata.Record { return w.Service.Records(clock.Now()) }
	cases := []struct {
		name    string
		noTXT   bool
		setup   func(t *testing.T, w *lab.World)
		mutate  func(*Options)
		mode    string // "ztls" or "tls"
		source  string // Report.ZDataFrom
		reason  zdata.Reason
		skipped string // in Report.HTTPSZDataSkipped
	}{
		{name: "missing key, Z-data in TXT", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, nil, nil))
		}, mode: "ztls", source: ZDataFromTXT, skipped: "carries no key65370"},
		{name: "missing key, TXT asked at once", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, nil, nil))
		}, mutate: func(o *Options) { o.ZDataFrom = ZDataBoth }, mode: "ztls", source: ZDataFromTXT, skipped: "carries no key65370"},
		{name: "missing key, no TXT", noTXT: true, setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, nil, nil))
		}, mode: "tls", source: ZDataFromTXT, reason: zdata.ReasonNoZData, skipped: "carries no key65370"},
		{name: "no HTTPS record", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS()
		}, mode: "ztls", source: ZDataFromTXT, skipped: "no ServiceMode HTTPS record"},
		{name: "expired", noTXT: true, mutate: func(o *Options) { o.Now = func() time.Time { return clock.Now().Add(2 * time.Hour) } },
			mode: "tls", source: ZDataFromHTTPS, reason: zdata.ReasonExpired},
		{name: "not yet valid", noTXT: true, mutate: func(o *Options) { o.Now = func() time.Time { return clock.Now().Add(-2 * time.Hour) } },
			mode: "tls", source: ZDataFromHTTPS, reason: zdata.ReasonNotYetValid},
		{name: "forged signature", setup: func(t *testing.T, w *lab.World) {
			var forged []*zdata.Record
			for _, r := range current(w) {
				f := r.Clone()
				f.Signature[len(f.Signature)/2] ^= 0x55
				forged = append(forged, f)
			}
			w.PublishHTTPS(httpsWith(t, w, forged, nil))
		}, mode: "tls", source: ZDataFromHTTPS, reason: zdata.ReasonBadSignature},
		{name: "truncated value, Z-data in TXT", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, current(w), func(h *dns.HTTPS) { v := zdataValue(h); v.Data = v.Data[:len(v.Data)-1] }))
		}, mode: "ztls", source: ZDataFromTXT, skipped: "malformed Z-data"},
		{name: "malformed value, no TXT", noTXT: true, setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, current(w), func(h *dns.HTTPS) { zdataValue(h).Data[2] = 9 })) // version 9
		}, mode: "tls", source: ZDataFromTXT, reason: zdata.ReasonNoZData, skipped: "version"},
		{name: "AliasMode loop", setup: func(t *testing.T, w *lab.World) {
			aliasChainTo(t, w, 3)
		}, mode: "ztls", source: ZDataFromTXT, skipped: "loop"},
		{name: "AliasMode chain of 9", setup: func(t *testing.T, w *lab.World) {
			aliasChainTo(t, w, 9, httpsWith(t, w, current(w), nil))
		}, mode: "ztls", source: ZDataFromTXT, skipped: "longer than 8"},
		{name: "AliasMode chain of 8", noTXT: true, setup: func(t *testing.T, w *lab.World) {
			aliasChainTo(t, w, 8, httpsWith(t, w, current(w), nil))
		}, mode: "ztls", source: ZDataFromHTTPS},
		{name: "ServiceMode for another endpoint", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, current(w), func(h *dns.HTTPS) { h.Target = "svc.example.net." }))
		}, mode: "ztls", source: ZDataFromTXT, skipped: "endpoint svc.example.net."},
		{name: "ServiceMode with another port", setup: func(t *testing.T, w *lab.World) {
			w.PublishHTTPS(httpsWith(t, w, current(w), func(h *dns.HTTPS) {
				h.Value = append([]dns.SVCBKeyValue{&dns.SVCBPort{Port: 1}}, h.Value...)
			}))
		}, mode: "ztls", source: ZDataFromTXT, skipped: "port 1"},
		{name: "two ServiceMode RRs, forged Z-data for the other endpoint", noTXT: true, setup: func(t *testing.T, w *lab.World) {
			forged := current(w)[0].Clone()
			forged.Signature[3] ^= 1
			other := httpsWith(t, w, []*zdata.Record{forged}, func(h *dns.HTTPS) { h.Target = "svc.example.net." })
			own := httpsWith(t, w, current(w), func(h *dns.HTTPS) { h.Priority = 2 })
			w.PublishHTTPS(other, own)
		}, mode: "ztls", source: ZDataFromHTTPS},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: tc.noTXT})
			if tc.setup != nil {
				tc.setup(t, w)
			}
			r, err := connect(t, w, tc.mutate)
			if err != nil {
				t.Fatal(err)
			}
			rep := r.Report
			if rep.Mode != tc.mode || rep.ZDataFrom != tc.source || !strings.HasPrefix(rep.FallbackReason, string(tc.reason)) ||
				!strings.Contains(rep.HTTPSZDataSkipped, tc.skipped) || (tc.mode == "ztls") != rep.EarlyData.Accepted {
				t.Fatalf("mode %s, Z-data from %q, reason %q, HTTPS skipped %q; want %s from %q, %q, %q",
					rep.Mode, rep.ZDataFrom, rep.FallbackReason, rep.HTTPSZDataSkipped, tc.mode, tc.source, tc.reason, tc.skipped)
			}
			if asked := txtQueries(w) > 0; asked != (tc.source == ZDataFromTXT) {
				t.Fatalf("TXT asked: %v, Z-data from %s", asked, rep.ZDataFrom)
			}
			// A second round trip for TXT only when it was not asked at once.
			var o Options
			if tc.mutate != nil {
				tc.mutate(&o)
			}
			if followUp := hasStep(rep, "txt_asked"); followUp != (tc.source == ZDataFromTXT && o.ZDataFrom != ZDataBoth) {
				t.Fatalf("TXT asked after the HTTPS answer: %v; trace %+v", followUp, rep.Trace)
			}
			var buf strings.Builder
			rep.WriteText(&buf)
			if tc.skipped != "" && !strings.Contains(buf.String(), tc.skipped) {
				t.Fatalf("the text report does not say why the HTTPS record's Z-data was skipped:\n%s", buf.String())
			}
		})
	}
}

// TestHTTPSZDataCopiedToAnotherHost: the genuine HTTPS value served in
// another name's HTTPS record (with the genuine TLSA there, and no TXT)
// fails verification for that name: TLS 1.3, and the response.
func TestHTTPSZDataCopiedToAnotherHost(t *testing.T) {
	w := startWorld(t, lab.Options{HTTPSZData: true, AltNames: []string{"copy.ztls.test"}})
	if err := w.AddAddress("copy.ztls.test", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	h, err := zdata.HTTPSRecord(zdata.HTTPSParams{Host: "copy.ztls.test", Port: w.Port, Records: w.Service.Records(clock.Now()), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	publishAt(t, w, h.Hdr.Name, h)
	if err := w.Publish("copy.ztls.test", w.Port, []dns.RR{zdata.TLSA("copy.ztls.test", w.Port, w.Cert.Chain[0], time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, _ := w.Resolver(resolver.UDP)
	defer res.Close()
	r, err := Connect(ctxT(t), net.JoinHostPort("copy.ztls.test", strconv.Itoa(w.Port)),
		Options{TLS: w.ClientTLS(), Resolver: res, Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: NewMemory(), ZDataBudget: time.Second})
	if err == nil {
		defer r.Conn.Close()
	}
	wantFallback(t, r, err, zdata.ReasonWrongService, zdata.ReasonBadSignature)
	if r.Report.ZDataFrom != ZDataFromHTTPS || r.Report.ResponseBytes == 0 {
		t.Fatalf("Z-data from %q, %d response bytes", r.Report.ZDataFrom, r.Report.ResponseBytes)
	}
}

// TestHTTPSZDataCopiedToAnotherPort: a second port of the same host,
// serving plain TLS 1.3, gets the first port's HTTPS value.
func TestHTTPSZDataCopiedToAnotherPort(t *testing.T) {
	w := startWorld(t, lab.Options{HTTPSZData: true})
	ln, err := tls13.Listen("tcp", "127.0.0.1:0", w.ServerTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 100)
				if _, err := c.Read(buf); err == nil {
					c.Write([]byte("hello"))
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	h, err := zdata.HTTPSRecord(zdata.HTTPSParams{Host: w.Host, Port: port, Records: w.Service.Records(clock.Now()), TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	publishAt(t, w, h.Hdr.Name, h)
	if err := w.Publish(w.Host, port, []dns.RR{zdata.TLSA(w.Host, port, w.Cert.Chain[0], time.Minute)}); err != nil {
		t.Fatal(err)
	}
	res, _ := w.Resolver(resolver.UDP)
	defer res.Close()
	r, err := Connect(ctxT(t), net.JoinHostPort(w.Host, strconv.Itoa(port)),
		Options{TLS: w.ClientTLS(), Resolver: res, Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: NewMemory(), ZDataBudget: time.Second})
	if err == nil {
		defer r.Conn.Close()
	}
	wantFallback(t, r, err, zdata.ReasonWrongService, zdata.ReasonBadSignature)
	if r.Report.ZDataFrom != ZDataFromHTTPS || r.Report.ResponseBytes == 0 {
		t.Fatalf("Z-data from %q, %d response bytes", r.Report.ZDataFrom, r.Report.ResponseBytes)
	}
}

// TestHTTPSZDataBeforeRotation: one second before a period ends the HTTPS
// value holds the current and the next period's records; the client
// uses the current one (Section 8.4), which the server accepts; a
// millisecond after the rollover, the one just begun.
func TestHTTPSZDataBeforeRotation(t *testing.T) {
	nb := clock.Now().Truncate(time.Hour).Add(time.Hour)
	clk := clock.NewManual(nb.Add(-time.Second))
	w := startWorld(t, lab.Options{HTTPSZData: true, NoTXT: true, Now: clk.Now})
	if recs := w.Service.Records(clk.Now()); len(recs) != 2 {
		t.Fatalf("%d records published before the rollover, want the current and the next", len(recs))
	}
	// The server takes the next record's key only from its not-before:
	// early data accepted before it is the current record's.
	at := func() {
		t.Helper()
		r, err := connect(t, w, func(o *Options) {
			o.Now = clk.Now
			o.TLS.Time = clk.Now
		})
		wantZTLSFrom(t, r, err, ZDataFromHTTPS)
	}
	at()
	clk.Set(nb.Add(time.Millisecond))
	if err := w.Republish(clk.Now()); err != nil {
		t.Fatal(err)
	}
	at()
}
