package prevalidate_test

// Prefetch of v3 (post-quantum) records (docs/ztls-spec.md, Sections
// 9.3 and 9.6) against the lab's authority and ZTLS server: the TXT
// RRset asked over TCP at once when v3 is wanted, the encapsulation made
// at the prefetch and its kem_share sent by one ClientHello only, and
// Section 9.6's policy applied by the connection to what the entry holds.

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/zdata"
)

// drawnRand is crypto/rand that keeps the x25519 public key of every
// 32-byte value it hands out: the cache's prepared encapsulations draw
// their x25519 scalars from it, so a kem_share whose x25519 half is
// among them was made by the cache, ahead of the connection.
type drawnRand struct {
	mu   sync.Mutex
	pubs map[string]bool
}

func (r *drawnRand) Read(b []byte) (int, error) {
	n, err := rand.Read(b)
	if n == 32 {
		if k, e := ecdh.X25519().NewPrivateKey(b); e == nil {
			r.mu.Lock()
			r.pubs[string(k.PublicKey().Bytes())] = true
			r.mu.Unlock()
		}
	}
	return n, err
}

// madeAhead reports whether kemShare's x25519 half was drawn from r.
func (r *drawnRand) madeAhead(kemShare []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pubs[string(kemShare[len(kemShare)-32:])]
}

// kemPattern starts a ztls_kem extension for X25519MLKEM768: codepoint
// 0xFF5C, a 1122-byte body, a 1120-byte kem_share.
var kemPattern = []byte{0xFF, 0x5C, 0x04, 0x62, 0x04, 0x60}

// kemShareOf returns the kem_share of the ztls_kem extension in a
// client's bytes, or nil.
func kemShareOf(flight []byte) []byte {
	i := bytes.Index(flight, kemPattern)
	if i < 0 || i+len(kemPattern)+1120 > len(flight) {
		return nil
	}
	return flight[i+len(kemPattern) : i+len(kemPattern)+1120]
}

// startClientBytes is the world's lab.RecordingPath, closed with the test.
func startClientBytes(t *testing.T, w *lab.World) *lab.RecordingPath {
	t.Helper()
	p, err := w.StartRecordingPath()
	if err != nil {
		t.Skipf("127.0.0.2 not usable: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// kemShare returns the kem_share client connection i sent (nil: none).
func kemShare(p *lab.RecordingPath, i int) []byte { return kemShareOf(p.ClientBytes(i)) }

func txtQueries(w *lab.World) int64 { return w.Queries(zdata.TXTName(w.Host, w.Port), dns.TypeTXT) }

// wantPQFromEntry checks a connection made from a prefetched entry:
// post-quantum ZTLS, early data accepted.
func wantPQFromEntry(t *testing.T, r *dial.Result, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted || !rep.EarlyData.PostQuantum || rep.Prefetch != dial.PrefetchValidated ||
		rep.TLS.Group != "X25519MLKEM768" {
		t.Fatalf("mode %s (%s), early data %+v, prefetch %q, group %s: want post-quantum ZTLS from the entry", rep.Mode,
			rep.FallbackReason, rep.EarlyData, rep.Prefetch, rep.TLS.Group)
	}
}

// TestPrefetchPQEncapsulatesAhead: a pinned client's prefetch asks the
// TXT RRset over TCP at once (one TXT query; an unpinned one's UDP
// question is truncated and asked again), selects the v3 record and
// encapsulates to it once. The connection from the entry is
// post-quantum ZTLS, and the kem_share in its ClientHello is the one made
// at the prefetch (its x25519 half drawn there), so no encapsulation was
// on the first flight's path. A second connection gets no kem_share from
// the entry (the cache makes no next one here): it encapsulates again,
// and its ciphertext differs.
func TestPrefetchPQEncapsulatesAhead(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	path := startClientBytes(t, w)
	res, err := w.Resolver(resolver.UDP)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Close() })

	unpinned := prevalidate.NewCache(prevalidate.CacheOptions{})
	t.Cleanup(func() { unpinned.Close() })
	before := txtQueries(w)
	o := dial.Options{TLS: w.ClientTLS(), Resolver: res, Cache: unpinned, Memory: dial.NewMemory()}
	if p := prefetch(t, o, w.HostPort())[0]; p.ZData == nil || p.ZData.Group != "X25519MLKEM768" || txtQueries(w)-before != 2 {
		t.Fatalf("unpinned prefetch: Z-data %+v, %d TXT queries: want the v3 record after a truncated UDP answer", p.ZData, txtQueries(w)-before)
	}

	cache := prevalidate.NewCache(prevalidate.CacheOptions{})
	t.Cleanup(func() { cache.Close() })
	prevalidate.ManualPrepare(cache)
	drawn := &drawnRand{pubs: map[string]bool{}}
	prevalidate.SetPrepareRand(cache, drawn)
	mem := dial.NewMemory()
	mem.PinPQ(w.Host, w.Port, clock.Now())
	res2, err := w.Resolver(resolver.UDP) // a resolver without the answer cached
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res2.Close() })
	o.Cache, o.Memory, o.Resolver = cache, mem, res2
	before = txtQueries(w)
	p := prefetch(t, o, w.HostPort())[0]
	if p.ZData == nil || p.ZData.Group != "X25519MLKEM768" || !p.Precomputed || prevalidate.Encapsulations(cache) != 1 {
		t.Fatalf("prefetched %+v (Z-data %+v), %d encapsulations: want the v3 record, encapsulated once", p, p.ZData, prevalidate.Encapsulations(cache))
	}
	if n := txtQueries(w) - before; n != 1 {
		t.Fatalf("pinned prefetch: %d TXT queries, want 1 (over TCP at once)", n)
	}

	via := func(o *dial.Options) {
		o.Cache, o.Memory = cache, mem
		o.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	}
	r, err := connect(t, w, via)
	wantPQFromEntry(t, r, err)
	first := kemShare(path, 0)
	if first == nil || !drawn.madeAhead(first) {
		t.Fatalf("the first connection's kem_share (%d bytes) was not the one made at the prefetch", len(first))
	}
	r, err = connect(t, w, via)
	wantPQFromEntry(t, r, err)
	second := kemShare(path, 1)
	if second == nil || bytes.Equal(second[:1088], first[:1088]) || drawn.madeAhead(second) {
		t.Fatalf("the second connection's kem_share: %d bytes, same ciphertext %v, made ahead %v: want a new encapsulation",
			len(second), second != nil && bytes.Equal(second[:1088], first[:1088]), second != nil && drawn.madeAhead(second))
	}
	if n := prevalidate.Encapsulations(cache); n != 1 {
		t.Fatalf("%d encapsulations made ahead, want 1", n)
	}
}

// TestPrefetchPQNextEncapsulation: with the cache's default behaviour, a
// connection that takes the entry's kem_share has the next one made in
// the background; two connections after one prefetch send different
// ciphertexts, and neither shares one with the other.
func TestPrefetchPQNextEncapsulation(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true})
	path := startClientBytes(t, w)
	cache, _, p := prefetchWorld(t, w, nil)
	if p.ZData == nil || p.ZData.Group != "X25519MLKEM768" {
		t.Fatalf("prefetched Z-data %+v", p.ZData)
	}
	via := func(o *dial.Options) {
		o.Cache = cache
		o.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
	}
	for range 2 {
		r, err := connect(t, w, via)
		wantPQFromEntry(t, r, err)
	}
	a, b := kemShare(path, 0), kemShare(path, 1)
	if a == nil || b == nil || bytes.Equal(a[:1088], b[:1088]) || bytes.Equal(a[1088:], b[1088:]) {
		t.Fatal("two connections after one prefetch sent the same ML-KEM ciphertext or x25519 share")
	}
}

// publishTXT replaces w's TXT RRset with recs, keeping its TLSA record.
func publishTXT(t *testing.T, w *lab.World, recs []*zdata.Record) {
	t.Helper()
	rrs := []dns.RR{zdata.TLSA(w.Host, w.Port, w.Cert.Chain[0], time.Minute)}
	name := zdata.TXTName(w.Host, w.Port)
	for _, r := range recs {
		rrs = append(rrs, &dns.TXT{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: r.TXT()})
	}
	if err := w.Publish(w.Host, w.Port, rrs); err != nil {
		t.Fatal(err)
	}
}

// classicalOnly is w's current records less the v3 ones: what a path
// that strips the v3 records delivers.
func classicalOnly(w *lab.World) []*zdata.Record {
	var out []*zdata.Record
	for _, r := range w.Service.Records(clock.Now()) {
		if !r.V3 {
			out = append(out, r)
		}
	}
	return out
}

// wantTLS13FromEntry checks a connection from a prefetched entry that
// sent no early data and fell back to TLS 1.3 for want.
func wantTLS13FromEntry(t *testing.T, r *dial.Result, err error, want zdata.Reason) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "tls" || rep.EarlyData.Offered || rep.Prefetch != dial.PrefetchValidated ||
		!strings.HasPrefix(rep.FallbackReason, string(want)+":") || rep.ResponseBytes != len("hello") {
		t.Fatalf("mode %s (%q), early data %+v, prefetch %q: want TLS 1.3 for %q from the entry", rep.Mode, rep.FallbackReason,
			rep.EarlyData, rep.Prefetch, want)
	}
}

// TestPrefetchPQStripped: a path stripped the v3 records from the answer
// the prefetch got. Its entry holds a classical record; under the default
// policy the connection from it sends no classical early data (the
// records announce v3; TLS 1.3, "no post-quantum Z-data"), nor under
// --pq only; opted in, it
// is classical ZTLS, reported as forced. With classical records that do
// not announce, a pinned client still sends no classical early data from
// the entry, and an unpinned one does.
func TestPrefetchPQStripped(t *testing.T) {
	for _, announce := range []bool{true, false} {
		t.Run("announce="+strconv.FormatBool(announce), func(t *testing.T) {
			w := startWorld(t, lab.Options{PostQuantum: true, PQNoAnnounce: !announce})
			publishTXT(t, w, classicalOnly(w))
			mem := dial.NewMemory()
			if !announce {
				mem.PinPQ(w.Host, w.Port, clock.Now())
			}
			cache, _, p := prefetchWorld(t, w, func(o *dial.Options) { o.Memory = mem })
			if p.ZData == nil || p.ZData.Group == "X25519MLKEM768" {
				t.Fatalf("prefetched Z-data %+v: want the classical record", p.ZData)
			}
			for _, pol := range []dial.PostQuantum{dial.PQPrefer, dial.PQOnly} {
				r, err := connect(t, w, func(o *dial.Options) { o.Cache, o.Memory, o.PostQuantum = cache, mem, pol })
				wantTLS13FromEntry(t, r, err, zdata.ReasonNoPQZData)
			}
			r, err := connect(t, w, func(o *dial.Options) { o.Cache, o.Memory, o.PostQuantum = cache, mem, dial.PQClassical })
			if err != nil || r.Report.Mode != "ztls" || !r.Report.EarlyData.ClassicalForced || r.Report.Prefetch != dial.PrefetchValidated {
				t.Fatalf("opted in: %v, mode %s (%s), early data %+v, prefetch %q", err, r.Report.Mode, r.Report.FallbackReason,
					r.Report.EarlyData, r.Report.Prefetch)
			}
			if !announce {
				r, err = connect(t, w, func(o *dial.Options) { o.Cache = cache })
				if err != nil || r.Report.Mode != "ztls" || r.Report.EarlyData.ClassicalForced || r.Report.EarlyData.PostQuantum {
					t.Fatalf("unpinned, not announced: %v, mode %s (%s), early data %+v", err, r.Report.Mode, r.Report.FallbackReason, r.Report.EarlyData)
				}
			}
		})
	}
}

// TestPrefetchPQJustBeforeRotation: one second before the period ends
// (the injectable clock), with the next period's records published beside
// the current ones, a pinned client's prefetch asks the TXT RRset over
// TCP at once and selects the current v3 record, and the connection from
// the entry at the same instant is post-quantum ZTLS. Then a path strips
// the v3 records: the pinned client's new prefetch holds a classical
// record, and its connection, still in that last second, is TLS 1.3.
func TestPrefetchPQJustBeforeRotation(t *testing.T) {
	nb := clock.Now().Truncate(time.Hour).Add(time.Hour)
	clk := clock.NewManual(nb.Add(-time.Second))
	w := startWorld(t, lab.Options{PostQuantum: true, Now: clk.Now})
	if n := len(w.Service.Records(clk.Now())); n != 4 {
		t.Fatalf("%d records published before the rotation, want 4", n)
	}
	mem := dial.NewMemory()
	mem.PinPQ(w.Host, w.Port, clk.Now().Add(-time.Hour))
	at := func(o *dial.Options) {
		o.Now, o.Memory = clk.Now, mem
		o.TLS = w.ClientTLS()
		o.TLS.Time = clk.Now
	}
	before := txtQueries(w)
	cache, _, p := prefetchWorld(t, w, at)
	if p.ZData == nil || p.ZData.Group != "X25519MLKEM768" || !p.ZData.NotAfter.Equal(nb) || !p.Expires.After(clk.Now()) {
		t.Fatalf("prefetched %+v (Z-data %+v): want the current v3 record", p, p.ZData)
	}
	if n := txtQueries(w) - before; n != 1 {
		t.Fatalf("pinned prefetch: %d TXT queries, want 1 (over TCP at once)", n)
	}
	r, err := connect(t, w, func(o *dial.Options) { at(o); o.Cache = cache })
	wantPQFromEntry(t, r, err)
	if !mem.PQPinned(w.Host, w.Port, clk.Now().Add(23*time.Hour)) {
		t.Fatal("a connection under a prefetched v3 record did not renew the pin")
	}

	var classical []*zdata.Record
	for _, rec := range w.Service.Records(clk.Now()) {
		if !rec.V3 {
			classical = append(classical, rec)
		}
	}
	publishTXT(t, w, classical)
	cache, _, p = prefetchWorld(t, w, at)
	if p.ZData == nil || p.ZData.Group == "X25519MLKEM768" {
		t.Fatalf("prefetched Z-data %+v after the strip: want a classical record", p.ZData)
	}
	r, err = connect(t, w, func(o *dial.Options) { at(o); o.Cache = cache })
	wantTLS13FromEntry(t, r, err, zdata.ReasonNoPQZData)
}
