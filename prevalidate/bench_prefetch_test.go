package prevalidate_test

// Client CPU on the critical path, with and without prefetch, ZTLS and
// TLS 1.3 side by side (issue 14). Nothing waits on a network: what the
// DNS and the server would send is in memory, and only the client's
// work is timed (the server's is done with the timer stopped).
//
//	go test ./prevalidate -run '^$' -bench CriticalPathCPU -cpu 1 -count 5
//
// With -cpu 1 (GOMAXPROCS 1) ns/op is the CPU time: the checks dial runs
// in parallel (the chain checks beside the signature) count in full.
// Each run also checks the chain verifications it claims (tls13's
// counter): one per connection cold, none prefetched.
//
// 2026-11-25, AMD EPYC (2 vCPUs shared with other engineers' builds; load
// 1.35 at the start, 1.05 at the end), -count 5, median (min) µs:
//
//	                        cold           prefetched     ratio
//	ztls  groups=default    790 (780)      273 (196)      2.9 (4.0)
//	tls13 groups=default    820 (654)      713 (534)      1.2 (1.2)
//	ztls  groups=x25519     545 (496)       48 (39)      11.3 (12.8)
//	tls13 groups=x25519     412 (395)      409 (287)      1.0 (1.4)
//
// With the default groups most of what is left of ZTLS's prefetched
// path is the X25519MLKEM768 share the engine makes at the click for the
// handshake's fresh key exchange (not made ahead); TLS 1.3 keeps its
// key exchange and CertificateVerify after the server's flight, and
// saves only the lookups' parsing and the chain verification.
//
// ztls: from the click to the first flight made, which carries the
// request: without prefetch the DNS replies are unpacked, the Z-data
// selected and verified (the record's signature, the leaf's chain,
// name and revocation), the key share and Z-data ECDH made, then the
// ClientHello and early data; with prefetch the cache entry is looked up
// and its verdict taken, the share and ECDH were made ahead.
//
// tls13: from the click to the request sent, after the server's flight:
// the DNS replies unpacked, the ClientHello made, the server's flight
// processed (the chain verified, or with prefetch taken from the cache;
// CertificateVerify; Finished), the client's Finished and the request.

import (
	"crypto/x509"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// benchService is one ZTLS service as the client gets it: the DNS
// replies in wire format, and a cache entry prefetched from them.
type benchService struct {
	w       *lab.World
	replies map[uint16][]byte // by type: A, AAAA, HTTPS, TXT, CERT, TLSA
	cfg     *tls13.Config
	request []byte
}

func newBenchService(b *testing.B) *benchService { return newBenchServiceWith(b, lab.Options{}) }

// newBenchServiceWith is newBenchService for a world made with o.
func newBenchServiceWith(b *testing.B, o lab.Options) *benchService {
	w, err := lab.Start(o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(w.Close)
	now := clock.Now()
	recs := w.Service.Records(now)
	zone := zdata.ZoneRRs(recs, w.Cert.Chain[0], w.Cert.Chain[1:], 5*time.Minute)
	a, _ := dns.NewRR(dns.Fqdn(w.Host) + " 300 IN A 127.0.0.1")
	zone = append(zone, a)
	s := &benchService{w: w, replies: map[uint16][]byte{}, cfg: &tls13.Config{RootCAs: w.Roots, ServerName: w.Host},
		request: []byte("GET / HTTP/1.1\r\nHost: " + w.Host + "\r\n\r\n")}
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeHTTPS, dns.TypeTXT, dns.TypeCERT, dns.TypeTLSA} {
		m := new(dns.Msg)
		m.SetQuestion(dns.Fqdn(w.Host), qt)
		m.Response = true
		for _, rr := range zone {
			if rr.Header().Rrtype == qt {
				m.Answer = append(m.Answer, rr)
			}
		}
		wire, err := m.Pack()
		if err != nil {
			b.Fatal(err)
		}
		s.replies[qt] = wire
	}
	return s
}

// unpack is the resolver's work on the replies: what lands as answers.
func (s *benchService) unpack(b *testing.B) map[uint16]*resolver.Answer {
	out := make(map[uint16]*resolver.Answer, len(s.replies))
	for qt, wire := range s.replies {
		m := new(dns.Msg)
		if err := m.Unpack(wire); err != nil {
			b.Fatal(err)
		}
		out[qt] = &resolver.Answer{Qtype: qt, Name: m.Question[0].Name, RRs: m.Answer, Reply: m}
	}
	return out
}

// coldOffer is dial's Z-data check without a cache (dial/lookup.go's
// zdataCheck): the key share, the selection with the TLS client's
// policy, the ECDH.
func (s *benchService) coldOffer(b *testing.B, cfg *tls13.Config, answers map[uint16]*resolver.Answer) *tls13.ZDataOffer {
	ks := tls13.NewZDataKeyShare(tls13.X25519, nil)
	var mu sync.Mutex
	checked := map[*x509.Certificate]*tls13.ZDataOffer{}
	trust := func(leaf *x509.Certificate, inter []*x509.Certificate) error {
		z := &tls13.ZDataOffer{Leaf: leaf, Intermediates: inter}
		if err := cfg.VerifyZDataOffer(z); err != nil {
			return err
		}
		mu.Lock()
		checked[leaf] = z
		mu.Unlock()
		return nil
	}
	sel := zdata.NewSelector(s.w.Host, s.w.Port, zdata.SelectOptions{Now: clock.Now(), Policy: trust})
	sel.StartChains(resolver.RecordsOf[*dns.TLSA](answers[dns.TypeTLSA]), resolver.RecordsOf[*dns.CERT](answers[dns.TypeCERT]))
	txt := answers[dns.TypeTXT].TXTStrings()
	likely, _ := sel.Likely(txt)
	prepared := ks.Prepare(tls13.CurveID(likely.Group), likely.KeyShare, nil)
	rec, leaf, err := sel.Select(txt)
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	offer := checked[leaf]
	mu.Unlock()
	rec.FillOffer(offer)
	offer.Prepared = prepared
	return offer
}

// prefetched fills a cache with the service as Prefetch does.
func (s *benchService) prefetched(b *testing.B, cfg *tls13.Config) *prevalidate.Cache {
	c := prevalidate.NewCache(prevalidate.CacheOptions{})
	res, err := s.w.Resolver(resolver.UDP)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Close()
	p := prevalidate.Prefetch(b.Context(), prevalidate.Options{TLS: cfg, Resolver: res, Cache: c}, s.w.HostPort())[0]
	if p.Err != nil || p.ZData == nil {
		b.Fatalf("prefetch: %+v", p)
	}
	return c
}

func BenchmarkCriticalPathCPU(b *testing.B) {
	s := newBenchService(b)
	x25519 := s.cfg.Clone()
	x25519.Groups = []tls13.CurveID{tls13.X25519}
	// The default groups make a hybrid X25519MLKEM768 share besides the
	// x25519 one, for the handshake's fresh key exchange: ML-KEM key
	// generation at the click, which prefetch does not make ahead.
	for _, g := range []struct {
		name string
		cfg  *tls13.Config
	}{{"groups=default", s.cfg}, {"groups=x25519", x25519}} {
		b.Run("ztls/cold/"+g.name, func(b *testing.B) { s.ztls(b, g.cfg, false) })
		b.Run("ztls/prefetched/"+g.name, func(b *testing.B) { s.ztls(b, g.cfg, true) })
		b.Run("tls13/cold/"+g.name, func(b *testing.B) { s.tls13(b, g.cfg, false) })
		b.Run("tls13/prefetched/"+g.name, func(b *testing.B) { s.tls13(b, g.cfg, true) })
	}
}

// ztls times the click to the first flight; its size (ClientHello and
// early data records) is reported as flight-B.
func (s *benchService) ztls(b *testing.B, cfg *tls13.Config, prefetched bool) {
	flightLen := 0
	defer func() { b.ReportMetric(float64(flightLen), "flight-B") }()
	firstFlight := func(cfg *tls13.Config, offer *tls13.ZDataOffer) {
		e := tls13.NewClientEngine(cfg)
		if err := e.Start(nil, offer, s.request); err != nil {
			b.Fatal(err)
		}
		out := e.Output()
		if len(out) == 0 || !e.ConnectionState().ZTLSOffered {
			b.Fatal("no ZTLS first flight")
		}
		flightLen = len(out)
	}
	if !prefetched {
		defer checkVerifications(b, tls13.ChainVerifications(), false)
		for b.Loop() {
			firstFlight(cfg, s.coldOffer(b, cfg, s.unpack(b)))
		}
		return
	}
	c := s.prefetched(b, cfg)
	prevalidate.ManualPrepare(c) // Refill makes each share, off the clock
	pol := prevalidate.Policy{TLS: cfg}
	b.ResetTimer()
	defer checkVerifications(b, tls13.ChainVerifications(), true)
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		prevalidate.Refill(c, s.w.Host, s.w.Port, cfg)
		b.StartTimer()
		h := c.Lookup(s.w.Host, s.w.Port, pol, clock.Now())
		ccfg := cfg.Clone()
		ccfg.VerifiedChains = h.VerifiedChains
		ccfg.KeySharePool = c.KeySharePool(cfg)
		// What dial's cachedZData makes of the entry.
		if h.ZData == nil {
			b.Fatalf("no prefetched Z-data: %v", h.ZDataErr)
		}
		offer := h.ZData.Offer(h.Leaf)
		offer.Intermediates, offer.Prepared = h.Intermediates, h.Prepared
		if err := ccfg.VerifyZDataOffer(offer); err != nil || offer.Prepared == nil {
			b.Fatalf("no prefetched offer: %v", err)
		}
		firstFlight(ccfg, offer)
	}
}

// tls13 times the click to the request sent; the server's flight is made
// (off the clock) for each ClientHello.
func (s *benchService) tls13(b *testing.B, cfg *tls13.Config, prefetched bool) {
	config := func() *tls13.Config { return cfg }
	fill := func() {}
	if prefetched {
		chains, err := cfg.VerifyServerChain([]*x509.Certificate{s.w.Cert.Leaf})
		if err != nil {
			b.Fatal(err)
		}
		c := prevalidate.NewCache(prevalidate.CacheOptions{})
		pol := prevalidate.Policy{TLS: cfg}
		prevalidate.StoreChains(c, s.w.Host, s.w.Port, pol, map[string][][]*x509.Certificate{string(s.w.Cert.Leaf.Raw): chains})
		config = func() *tls13.Config {
			h := c.Lookup(s.w.Host, s.w.Port, pol, clock.Now())
			ccfg := cfg.Clone()
			ccfg.VerifiedChains = h.VerifiedChains
			ccfg.KeySharePool = c.KeySharePool(cfg)
			return ccfg
		}
		fill = func() { c.KeySharePool(cfg).Fill(cfg) }
	}
	b.ResetTimer()
	defer checkVerifications(b, tls13.ChainVerifications(), prefetched)
	for i := 0; i < b.N; i++ {
		if !prefetched {
			s.unpack(b)
		} else {
			b.StopTimer()
			fill()
			b.StartTimer()
		}
		e := tls13.NewClientEngine(config())
		if err := e.Start(nil, nil, nil); err != nil {
			b.Fatal(err)
		}
		hello := e.Output()
		b.StopTimer()
		b.ReportMetric(float64(len(hello)), "flight-B")
		srv := tls13.NewServerEngine(s.w.ServerTLS)
		if err := srv.Feed(hello); err != nil {
			b.Fatal(err)
		}
		flight := srv.Output()
		b.StartTimer()
		if err := e.Feed(flight); err != nil {
			b.Fatal(err)
		}
		if _, err := e.Write(s.request); err != nil || !e.HandshakeComplete() || len(e.Output()) == 0 {
			b.Fatalf("no request sent: %v", err)
		}
	}
}

// checkVerifications fails a run whose chain verifications are not what
// it claims: one per connection cold, none prefetched.
func checkVerifications(b *testing.B, before uint64, prefetched bool) {
	n, want := tls13.ChainVerifications()-before, uint64(b.N)
	if prefetched {
		want = 0
	}
	if n != want {
		b.Fatalf("%d chain verifications in %d connections, want %d", n, b.N, want)
	}
}
