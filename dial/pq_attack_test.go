package dial

// The attacks of docs/ztls-spec.md, Section 9.6 on a service that
// publishes v3 records, each against the lab's authority and server:
// none gives a default client classical early data.

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
)

// TestPQDroppedStrings: a path drops one character-string of the v3
// record (a share string, then the signature's): the record is
// malformed, never a valid v1 or v2 record, and the announcing classical
// records give no early data.
func TestPQDroppedStrings(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	v3, classical := pqRecords(t, w, clock.Now())
	full := v3[0].TXT()
	for _, drop := range []int{8, len(full) - 1} {
		cut := append(append([]string(nil), full[:drop]...), full[drop+1:]...)
		if r, err := zdata.ParseTXT(cut); err == nil {
			t.Fatalf("dropping string %d left a valid record (v3 %v)", drop, r.V3)
		}
		publishTXT(t, w, append(txtOfRecs(classical), cut)...)
		r, err := connect(t, w, nil)
		wantNoClassicalEarly(t, r, err, zdata.ReasonNoPQZData)
	}
}

// TestPQForgedAnnouncement: a path that strips the v3 records and clears
// the announcement bit of the classical ones (or sets it in a
// non-announcing one) breaks their signature: no early data, even for a
// client that opted in to classical early data.
func TestPQForgedAnnouncement(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	_, classical := pqRecords(t, w, clock.Now())
	var forged [][]string
	for _, r := range classical {
		if !r.AnnouncesPQ() {
			t.Fatalf("classical record %d does not announce", r.ID)
		}
		txt := r.TXT()
		txt[4] = strconv.FormatUint(uint64(r.ID&^zdata.AnnouncePQBit), 10) // field 5, the Zdata_id
		forged = append(forged, txt)
	}
	publishTXT(t, w, forged...)
	for _, p := range []PostQuantum{PQPrefer, PQClassical} {
		r, err := connect(t, w, func(o *Options) { o.PostQuantum = p })
		wantNoClassicalEarly(t, r, err, zdata.ReasonBadSignature)
	}
}

// TestPQKeyOfAnotherService: the v3 record of the same host's service on
// port 8443 (its ML-KEM key, signed for that port) published in this
// service's TXT answer: refused by its signature (wrong host or port),
// and the announcing classical records give no early data.
func TestPQKeyOfAnotherService(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	_, classical := pqRecords(t, w, clock.Now())
	other, err := zdata.NewService(w.Host, 8443, w.Cert, zdata.Options{Group: zdata.GroupX25519MLKEM768}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Rotate(clock.Now()); err != nil {
		t.Fatal(err)
	}
	publishTXT(t, w, append(txtOfRecs(classical), txtOfRecs(other.Records(clock.Now()))...)...)
	r, err := connect(t, w, nil)
	wantNoClassicalEarly(t, r, err, zdata.ReasonNoPQZData)
	r, err = connect(t, w, func(o *Options) { o.PostQuantum = PQOnly })
	wantNoClassicalEarly(t, r, err, zdata.ReasonWrongService)
}

// TestPQPin: a service whose classical records do not announce, seen
// with a valid v3 record, is pinned: with its v3 records stripped, the
// client that saw them uses TLS 1.3, one with a fresh memory classical
// ZTLS. Pinned, the TXT record is asked with the first questions.
func TestPQPin(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true, PQNoAnnounce: true, HTTPSZData: true})
	mem := NewMemory()
	r, err := connect(t, w, func(o *Options) { o.Memory = mem })
	if err != nil || r.Report.Mode != "ztls" || r.Report.EarlyData.PostQuantum || r.Report.ZDataFrom != ZDataFromHTTPS {
		t.Fatalf("unpinned, not announced: %v, mode %s, early %+v, from %q: want classical ZTLS from the HTTPS record",
			err, r.Report.Mode, r.Report.EarlyData, r.Report.ZDataFrom)
	}
	mem.PinPQ(w.Host, w.Port, clock.Now()) // as a connection through the TXT record would
	before := txtQueries(w)
	r, err = connect(t, w, func(o *Options) { o.Memory = mem })
	wantPQZTLS(t, r, err)
	if hasStep(r.Report, "txt_asked") || txtQueries(w)-before != 1 {
		t.Fatalf("pinned: TXT asked as a follow-up (%v) or over UDP first (%d queries), not over TCP with the first questions",
			hasStep(r.Report, "txt_asked"), txtQueries(w)-before)
	}
	_, classical := pqRecords(t, w, clock.Now())
	publishTXT(t, w, txtOfRecs(classical)...)
	r, err = connect(t, w, func(o *Options) { o.Memory = mem })
	wantNoClassicalEarly(t, r, err, zdata.ReasonNoPQZData)
	r, err = connect(t, w, func(o *Options) { o.Memory, o.ZDataFrom = NewMemory(), ZDataTXT })
	if err != nil || r.Report.Mode != "ztls" || r.Report.EarlyData.PostQuantum || r.Report.EarlyData.ClassicalForced {
		t.Fatalf("fresh memory: %v, mode %s (%s), early %+v", err, r.Report.Mode, r.Report.FallbackReason, r.Report.EarlyData)
	}
	if err := mem.Clear(); err != nil || mem.PQPinned(w.Host, w.Port, clock.Now()) {
		t.Fatal("Clear kept the pin")
	}
}

// TestPQTruncatedAnswer: a path answers the TXT question over UDP with
// TC set and the classical records only (they fit), and blocks TCP: the
// client never uses the truncated answer's records, even opted in to
// classical early data; TLS 1.3. With TCP let through, the full answer
// gives post-quantum ZTLS.
func TestPQTruncatedAnswer(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	for _, tcp := range []bool{false, true} {
		addr := startTruncatingPath(t, w.DNSAddr, tcp)
		res, err := resolver.New(resolver.Config{Servers: []string{addr}, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Close() })
		// Opted in to classical early data: had the truncated answer's
		// complete classical records been used, this would be ZTLS.
		r, err := connect(t, w, func(o *Options) { o.Resolver, o.PostQuantum = res, PQClassical })
		if tcp {
			wantPQZTLS(t, r, err)
			continue
		}
		// The TXT lookup fails over TCP, or outlasts the budget.
		if err != nil || r.Report.Mode != "tls" || r.Report.EarlyData.Offered || r.Report.ResponseBytes != len("hello") ||
			(r.Report.FallbackReason != ReasonBudget && !strings.HasPrefix(r.Report.FallbackReason, string(zdata.ReasonNoZData))) {
			t.Fatalf("truncated, TCP blocked: %v, mode %s (%s), early %+v", err, r.Report.Mode, r.Report.FallbackReason, r.Report.EarlyData)
		}
	}
}

// startTruncatingPath serves DNS on a loopback UDP port, passing every
// question to upstream except TXT, answered from upstream's TCP answer
// with the v3 records removed and TC set; with tcp it also serves TCP on
// the same port number, passing everything through.
func startTruncatingPath(t *testing.T, upstream string, tcp bool) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	handler := dns.HandlerFunc(func(rw dns.ResponseWriter, q *dns.Msg) {
		_, isUDP := rw.RemoteAddr().(*net.UDPAddr)
		c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second}
		reply, _, err := c.Exchange(q, upstream)
		if err != nil {
			return
		}
		if isUDP && len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeTXT {
			var keep []dns.RR
			for _, rr := range reply.Answer {
				if txt, ok := rr.(*dns.TXT); ok && len(txt.Txt) > 0 && txt.Txt[0] == "v=ztls3" {
					continue
				}
				keep = append(keep, rr)
			}
			reply.Answer, reply.Truncated = keep, true
		}
		rw.WriteMsg(reply)
	})
	udp := &dns.Server{PacketConn: pc, Handler: handler}
	go udp.ActivateAndServe()
	t.Cleanup(func() { udp.Shutdown() })
	if tcp {
		ln, err := net.Listen("tcp", pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		tsrv := &dns.Server{Listener: ln, Handler: handler}
		go tsrv.ActivateAndServe()
		t.Cleanup(func() { tsrv.Shutdown() })
	}
	return pc.LocalAddr().String()
}

// TestPQThroughUnbound: Unbound, the client's resolver in front of the
// authority, fetches the TXT answer with the v3 records (over TCP, it is
// over 1232 bytes) and caches it: the connection is post-quantum ZTLS,
// and a second client's lookup is answered from Unbound's cache.
func TestPQThroughUnbound(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	u := dnstest.StartUnbound(t, dnstest.UnboundOptions{StubZones: map[string]string{"ztls.test.": w.DNSAddr}})
	newRes := func() *resolver.Resolver {
		res, err := resolver.New(resolver.Config{Servers: []string{u.Addr}, Timeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Close() })
		return res
	}
	r, err := connect(t, w, func(o *Options) { o.Resolver = newRes() })
	wantPQZTLS(t, r, err)
	asked := txtQueries(w)
	a, err := newRes().Lookup(context.Background(), zdata.TXTName(w.Host, w.Port), dns.TypeTXT)
	if err != nil || len(a.TXTStrings()) < 2 || a.Transport != "tcp" {
		t.Fatalf("second lookup through Unbound: %v over %q, %d records\n%s", err, a.Transport, len(a.TXTStrings()), u.Logs())
	}
	if n := txtQueries(w); n != asked {
		t.Fatalf("the second lookup reached the authority (%d TXT queries, %d before): not cached", n, asked)
	}
}

// TestPQJustBeforeRotation: one second before the period ends, with the
// next period's v3 and classical records published beside the current
// ones (a TXT answer of four records), the connection is post-quantum
// ZTLS under the current v3 record.
func TestPQJustBeforeRotation(t *testing.T) {
	now := clock.Now().Truncate(time.Hour).Add(time.Hour - time.Second)
	at := func() time.Time { return now }
	w := startWorld(t, lab.Options{PostQuantum: true, Now: at})
	if n := len(w.Service.Records(now)); n != 4 {
		t.Fatalf("%d records published before the rotation, want 4", n)
	}
	r, err := connect(t, w, func(o *Options) { o.Now, o.TLS.Time = at, at })
	wantPQZTLS(t, r, err)
}

// TestPQStrippedTurbo: with TurboTLS, whose first flight is made with the
// likeliest record before the verdict, a stripped v3 answer gives no
// classical early data either, over UDP or TCP.
func TestPQStrippedTurbo(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true, Turbo: true})
	r, err := connect(t, w, func(o *Options) { o.Turbo, o.TurboWait = true, 5*time.Second })
	if err != nil || r.Report.Mode != "ztls" || !r.Report.EarlyData.PostQuantum {
		t.Fatalf("with v3 records: %v, mode %s (%s), transport %s (%s), early %+v", err, r.Report.Mode, r.Report.FallbackReason,
			r.Report.Transport, r.Report.TurboFallback, r.Report.EarlyData)
	}
	t.Logf("post-quantum ZTLS with TurboTLS: transport %s (%s)", r.Report.Transport, r.Report.TurboFallback)
	_, classical := pqRecords(t, w, clock.Now())
	publishTXT(t, w, txtOfRecs(classical)...)
	r, err = connect(t, w, func(o *Options) { o.Turbo, o.TurboWait = true, 5*time.Second })
	wantNoClassicalEarly(t, r, err, zdata.ReasonNoPQZData)
}
