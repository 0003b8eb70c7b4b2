package dial

// The lookup phase, and the Z-data verification that runs in it while
// the transport connects.
//
// With a resolver, the phase is a small pipeline: every question leaves at
// once, each answer is taken as it lands, and the public-key work starts
// as soon as its inputs are in, so that it overlaps the DNS round trip
// and the TCP handshake instead of following them. Goroutines are in
// [brackets], the lookups channels the attempt reads in <angles>; the
// questions are those of Options.ZDataFrom's default, ZDataHTTPSFirst
// (ZDataBoth asks TXT in the first batch too, ZDataTXT asks TXT, TLSA and
// CERT there and reads no Z-data from HTTPS):
//
//	[lookup: serviceLookup.run, resolver.LookupServiceQuery's callback;
//	         follow-ups on the same resolver land in the same callback]
//	  A, AAAA ----(first address)--------------------------> <addrs> or <err>
//	  HTTPS (the origin's) ---------------------------------> <https> (TurboTLS, ALPN)
//	    \--> zdataCheck (zdata_sources.go, https_zdata.go)
//	          key65370 of the ServiceMode RR dial connects to: the records
//	          AliasMode: ask the target's HTTPS (at most 8, no loop) ...
//	          none (or malformed, or for another endpoint): ask TXT ------+
//	  TLSA, CERT (skipped when Memory holds the leaf) -> zdataCheck      |
//	  TXT (follow-up) <--------------------------------------------------+
//	zdataCheck (zdata.Selector)
//	  records known (HTTPS's, else TXT's): the likeliest's ECDH starts
//	  leaves in (held leaf, TLSA+CERT): chain checks start (the Selector's goroutines)
//	  both: ----------------------------------------------> <answered>
//	        likeliest record --------------------------> <likely> (TurboTLS)
//	        verdict: signatures -----------------------> <zdata> (with the
//	        (on [lookup], or its own goroutine           record it came from
//	         while no address is out yet)                and the lookup's steps)
//	[key share]  X25519 key, made at once --keyShare--+
//	[prepare]    from the records: the ECDH with      +--> preparedShare
//	             the likeliest record's share              (the verdict's offer and
//	                                                        TurboTLS's early flight)
//
// The attempt reads <addrs>/<err> in awaitAddress, <https> in TurboTLS's
// transport, and <answered>, <likely> and <zdata> in awaitZData, whose
// budget bounds the wait for the answers (the follow-ups' included), not
// their checks. A cache entry (cached.go) delivers on the same channels,
// as if landed at once.

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// lookups is what the lookup phase delivers, each as it lands: the first
// address answer (or why there is none), the HTTPS record (TurboTLS's
// advertisement), the Z-data verdict and, before it, the likeliest
// record's offer. Every channel is buffered for all that is ever sent on
// it, so the lookup goroutine never blocks after Connect has returned.
type lookups struct {
	addrs  chan []netip.Addr
	err    chan error
	https  chan *resolver.Answer
	zdata  chan zresult     // with ZTLS wanted
	likely chan likelyOffer // TurboTLS with ZTLS; nil otherwise
	// answered is sent once, when every Z-data answer is in and only
	// their checks remain (signatures, chain, revocation: what a TLS 1.3
	// handshake with the same certificate would do too).
	answered chan struct{}
}

// zresult is the Z-data verdict: the offer to make, or why there is none.
type zresult struct {
	offer *tls13.ZDataOffer
	err   error
	at    time.Duration // since the start
	// source is the record the Z-data came from (ZDataFromHTTPS or
	// ZDataFromTXT; "": none was checked); skipped, why the HTTPS
	// record's was not used; steps, the lookup's steps for the trace.
	source  string
	skipped string
	steps   []TraceStep
	// forced: the offer is classical, allowed by PQClassical only (pq.go).
	forced bool
}

// startLookups starts the lookup phase: the address of an IP given as the
// host is in at once; so is what a cache entry holds (cached.go);
// without a resolver the system's finds the address (and there is no
// Z-data); else every record type is asked at once.
func (a *attempt) startLookups(ctx context.Context) {
	l := &lookups{addrs: make(chan []netip.Addr, 2), err: make(chan error, 1),
		https: make(chan *resolver.Answer, 1), zdata: make(chan zresult, 1), answered: make(chan struct{}, 1)}
	if a.o.Turbo && a.wantZ {
		l.likely = make(chan likelyOffer, 1)
	}
	a.look = l
	switch {
	case a.ip.IsValid():
		l.addrs <- []netip.Addr{a.ip}
	case a.hit != nil && (a.hit.Validated || len(a.hit.Answers) == 0):
		a.landCached(l) // Prefetch's results, as already landed
	case a.hit != nil:
		a.replayAnswers(l)
	case a.o.Resolver == nil && len(a.o.Addrs) > 0:
		l.addrs <- a.o.Addrs
	case a.o.Resolver == nil:
		go func(host string) {
			ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			if err != nil {
				l.fail(fmt.Errorf("dial: looking up %s: %w", host, err))
				return
			}
			l.addrs <- ips
		}(a.host)
	default:
		s := &serviceLookup{out: l, host: a.host, port: a.port, pendingAddr: 2}
		if len(a.o.Addrs) > 0 {
			// The caller's addresses go first; the records' are ignored.
			s.sentAddr = true
			l.addrs <- a.o.Addrs
		}
		if a.wantZ {
			s.z = a.newZDataCheck(l, s.ask)
			s.query = s.z.src.query
		}
		go s.run(ctx, a.o.Resolver)
	}
}

// landCached is the lookup phase of a validated entry: everything lands
// at once, nothing is asked.
func (a *attempt) landCached(l *lookups) {
	h := a.hit
	l.addrs <- h.Addrs
	if h.HTTPS != nil {
		l.https <- h.HTTPS
	}
	if a.wantZ {
		l.zdata <- a.cachedZData()
	}
}

// cachedZData is the Z-data verdict of a validated entry: the offer of
// the record Prefetch selected, its leaf's chain taken from the entry
// (the application's VerifyPeerCertificate still runs on it), with the
// key share and ECDH made for it, or why there is none.
func (a *attempt) cachedZData() zresult {
	h := a.hit
	at := time.Since(a.start)
	if h.ZData == nil {
		err := h.ZDataErr
		if err == nil {
			err = &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("none in the prefetched entry")}
		}
		return zresult{err: err, at: at, source: h.ZDataFrom, skipped: h.HTTPSZDataSkipped}
	}
	forced, err := a.pqGate().check(h.ZData) // Section 9.6, for a prefetched record too
	if err != nil {
		return zresult{err: err, at: at, source: h.ZDataFrom, skipped: h.HTTPSZDataSkipped}
	}
	offer := h.ZData.Offer(h.Leaf)
	offer.Intermediates = h.Intermediates
	offer.Prepared = h.Prepared
	if err := a.cfg.VerifyZDataOffer(offer); err != nil {
		return zresult{err: &zdata.Error{Reason: zdata.ReasonUntrustedChain, Err: err}, at: at, source: h.ZDataFrom, skipped: h.HTTPSZDataSkipped}
	}
	return zresult{offer: offer, at: at, source: h.ZDataFrom, skipped: h.HTTPSZDataSkipped, forced: forced} // the record Prefetch selected it from
}

// replayAnswers is the lookup phase of an entry holding DNS answers but
// no verdict for this policy: its answers land, in the order the
// resolver lands them, on the same path as the resolver's (the Z-data
// is verified as without a cache).
func (a *attempt) replayAnswers(l *lookups) {
	s := &serviceLookup{out: l, host: a.host, port: a.port, pendingAddr: 2}
	if a.wantZ {
		s.z = a.newZDataCheck(l, s.ask) // s.res is nil: nothing more is asked
		s.z.src.replay()
	}
	answers := a.hit.Answers
	go func() {
		for _, ans := range answers {
			if ans != nil {
				s.onAnswer(*ans)
			}
		}
		if !s.sentAddr {
			if addrs := a.hit.Addrs; len(addrs) > 0 {
				s.sentAddr = true
				l.addrs <- append([]netip.Addr(nil), addrs...)
			} else {
				l.fail(fmt.Errorf("dial: %s has no address in the cache", a.host))
			}
		}
		if s.z != nil {
			s.z.giveUp()
		}
	}()
}

// awaitAddress waits for the first address answer, which starts the
// transport.
func (a *attempt) awaitAddress(ctx context.Context) error {
	if len(a.o.Addrs) > 0 && a.hit != nil {
		// A cached entry lands its own addresses; the caller's win.
		a.ips = a.o.Addrs
		a.step("address")
		return nil
	}
	select {
	case a.ips = <-a.look.addrs:
	case err := <-a.look.err:
		return err
	case <-ctx.Done():
		return fmt.Errorf("dial: looking up %s: %w", a.host, ctx.Err())
	}
	a.r.Timing.DNS = ms(time.Since(a.start))
	a.step("address")
	return nil
}

// awaitZData waits, when ZTLS is wanted, at most the budget for the
// Z-data answers and then for their verdict, and settles what the
// handshake offers: the verified offer, or the reason there is none. The
// budget bounds the DNS wait only: once the answers are in, what remains
// is checking them (an OCSP query among it, when asked for), which a TLS
// 1.3 handshake would spend on the same certificate, so falling back
// would save nothing. onLikely, if set, takes the likeliest record's
// offer, unverified, which comes before the verdict (TurboTLS makes its
// first flight with it meanwhile).
func (a *attempt) awaitZData(ctx context.Context, onLikely func(likelyOffer)) error {
	if !a.wantZ {
		return nil
	}
	var likely <-chan likelyOffer
	if onLikely != nil {
		likely = a.look.likely
	}
	timer := time.NewTimer(a.budget())
	defer timer.Stop()
	budget := timer.C
	answered := a.look.answered
	for {
		// The likely offer is sent before the verdict: take it first
		// when both are in.
		select {
		case l := <-likely:
			likely = nil
			onLikely(l)
			continue
		default:
		}
		select {
		case l := <-likely:
			likely = nil
			onLikely(l)
		case <-answered:
			answered, budget = nil, nil
			a.step("zdata_answered")
		case z := <-a.look.zdata:
			a.takeVerdict(z)
			return a.requireZTLS()
		case <-ctx.Done():
			return ctx.Err()
		case <-budget:
			a.reason = ReasonBudget
			return a.requireZTLS()
		}
	}
}

// takeVerdict takes the Z-data verdict: the offer or why there is none,
// which record it came from, and the lookup's steps.
func (a *attempt) takeVerdict(z zresult) {
	a.offer = z.offer
	a.notePQ(z)
	if z.err != nil {
		a.reason = zdata.ReasonText(z.err)
	}
	a.r.ZDataFrom, a.r.HTTPSZDataSkipped = z.source, z.skipped
	a.r.Trace = append(a.r.Trace, z.steps...)
	a.r.Trace = append(a.r.Trace, TraceStep{Step: "zdata_verified", AtMS: ms(z.at)})
}

// fail delivers the first lookup error; later ones are dropped.
func (l *lookups) fail(err error) {
	select {
	case l.err <- err:
	default:
	}
}

// serviceLookup is the lookup goroutine with a resolver: the first
// address answer goes out at once, the HTTPS, TXT, TLSA and CERT answers
// to the Z-data check, which may ask more on the same resolver (an
// AliasMode target's HTTPS record, the TXT record when the HTTPS record
// carries no Z-data); their answers land here too, one at a time.
type serviceLookup struct {
	out         *lookups
	host        string
	port        int
	query       resolver.ServiceQuery // the first questions
	mu          sync.Mutex            // one answer at a time: the batch's and the follow-ups'
	sentAddr    bool
	pendingAddr int         // A and AAAA answers still to land
	z           *zdataCheck // nil without ZTLS
	ctx         context.Context
	res         *resolver.Resolver // nil: nothing more can be asked (a cache's answers)
	followUps   sync.WaitGroup
}

func (s *serviceLookup) run(ctx context.Context, res *resolver.Resolver) {
	s.ctx, s.res = ctx, res
	_, err := res.LookupServiceQuery(ctx, s.host, s.port, s.query, s.onAnswer)
	s.followUps.Wait() // asked from onAnswer, before LookupServiceQuery returned or by another follow-up
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil && !s.sentAddr {
		s.out.fail(fmt.Errorf("dial: looking up %s: %w", s.host, err))
	}
	if s.z != nil {
		s.z.giveUp()
	}
}

// ask asks qs on the resolver, their answers landing in onAnswer; false
// when there is no resolver to ask.
func (s *serviceLookup) ask(qs []resolver.Question) bool {
	if s.res == nil {
		return false
	}
	s.followUps.Add(1)
	go func() {
		defer s.followUps.Done()
		s.res.LookupBatch(s.ctx, qs, s.onAnswer)
	}()
	return true
}

// onAnswer takes each answer as it lands.
func (s *serviceLookup) onAnswer(a resolver.Answer) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch a.Qtype {
	case dns.TypeA, dns.TypeAAAA:
		s.onAddress(a)
	case dns.TypeHTTPS:
		origin := s.z == nil || s.z.isOrigin(a.Name)
		if origin {
			s.out.https <- &a // TurboTLS's advertisement and the ALPN (an alias target's answer is the Z-data check's)
		}
		if s.z != nil {
			s.z.onHTTPS(&a, origin)
		}
	case dns.TypeTXT, dns.TypeTLSA, dns.TypeCERT:
		if s.z != nil {
			s.z.onAnswer(&a)
		}
	}
	if s.z != nil {
		s.z.advance(s.sentAddr)
	}
}

func (s *serviceLookup) onAddress(a resolver.Answer) {
	s.pendingAddr--
	ips := a.Addrs()
	switch {
	case s.sentAddr:
	case len(ips) > 0:
		s.sentAddr = true
		s.out.addrs <- ips
	case s.pendingAddr == 0:
		s.out.fail(fmt.Errorf("dial: %s has no address (A/AAAA): %s", s.host, a.Status()))
	}
}

// zdataCheck is the Z-data verification, on the lookup goroutine while
// TCP connects: the records' signature, validity, chain and name
// (zdata.Selector, with the TLS client's certificate policy). Its
// public-key work starts as early as its inputs allow, so little is left
// when the last answer lands (TurboTLS sends nothing before the check is
// done): the client's key share at once, the DNS round trip being idle
// time; the ECDH with the likeliest record's share when the records are
// known (the HTTPS record's, or the TXT record's); the chain checks when
// the leaves are in (a leaf held from an earlier handshake at once, TLSA
// and CERT when they land); the records' signatures when both are.
type zdataCheck struct {
	sel      *zdata.Selector
	trust    *policy
	start    time.Time
	out      *lookups
	keyShare chan *tls13.ZDataKeyShare
	prepared *preparedShare // once the records are known
	src      *zdataSources
	txt      [][]string // the records checked, as TXT strings
	source   string     // whose they are: ZDataFromHTTPS or ZDataFromTXT ("": not known yet)
	chains   bool       // started
	done     bool       // the verdict is under way
	steps    []TraceStep
	pq       pqGate // the post-quantum policy and pin (pq.go)
	forced   bool   // the verdict's offer is allowed by PQClassical only
}

// newZDataCheck starts the attempt's Z-data check, which delivers to out
// and asks its follow-up questions with ask; the client's key share is
// made at once.
func (a *attempt) newZDataCheck(out *lookups, ask func([]resolver.Question) bool) *zdataCheck {
	trust := newPolicy(a.cfg)
	pq := a.pqGate()
	sel := zdata.NewSelector(a.host, a.port, zdata.SelectOptions{Now: a.now(), Policy: trust.check, NoBFE: a.o.NoBFE,
		PostQuantumOnly: pq.policy == PQOnly})
	z := &zdataCheck{sel: sel, trust: trust, start: a.start, out: out, keyShare: make(chan *tls13.ZDataKeyShare, 1),
		src: a.newZDataSources(ask, pq), pq: pq}
	go func() { z.keyShare <- tls13.NewZDataKeyShare(tls13.X25519, nil) }()
	return z
}

// step notes a lookup step for the report's trace (delivered with the
// verdict).
func (z *zdataCheck) step(name string) {
	z.steps = append(z.steps, TraceStep{Step: name, AtMS: ms(time.Since(z.start))})
}

// prepare takes the records to check, from source, and starts the ECDH
// with the likeliest one's share.
func (z *zdataCheck) prepare(txt [][]string, source string) {
	z.txt, z.source = txt, source
	ps := &preparedShare{done: make(chan struct{})}
	z.prepared = ps
	rec, _ := z.sel.Likely(z.txt)
	go func() {
		ks := <-z.keyShare
		if rec != nil {
			ps.p = rec.Prepare(ks)
		}
		close(ps.done)
	}()
}

// advance starts what the answers in hand allow: the ECDH once the
// records to check are known, the chain checks once the leaves are in,
// the verdict once both are. Once the address is out the verdict runs on
// the lookup goroutine (what may still land, AAAA or HTTPS, can wait for
// it, which a new goroutine would only start later); before, on its own.
func (z *zdataCheck) advance(sentAddr bool) {
	if z.source == "" {
		if txt, source := z.src.records(z.step); source != "" {
			z.prepare(txt, source)
		}
	}
	if !z.chains && z.src.leavesIn() {
		z.sel.StartLeaves(z.src.leaves())
		z.chains = true
	}
	if z.done || z.source == "" || !z.chains {
		return
	}
	z.done = true
	z.out.answered <- struct{}{}
	if z.out.likely != nil {
		if rec, leaf := z.sel.Likely(z.txt); rec != nil && leaf != nil && z.pq.allows(rec) {
			z.out.likely <- likelyOffer{offer: rec.Offer(leaf), prepared: z.prepared}
		}
	}
	if sentAddr {
		z.check()
	} else {
		go z.check()
	}
}

// check delivers the verdict.
func (z *zdataCheck) check() {
	offer, err := z.verify()
	z.out.zdata <- zresult{offer: offer, err: err, at: time.Since(z.start), source: z.source,
		skipped: z.src.skippedText(), steps: z.steps, forced: z.forced}
}

// giveUp delivers the verdict of lookups that ended without all the
// answers needed.
func (z *zdataCheck) giveUp() {
	if z.done {
		return
	}
	z.done = true
	why := "the Z-data lookups did not complete"
	if s := z.src.skippedText(); s != "" && !z.src.haveTXT {
		why = "none in the HTTPS record (" + s + "), and the TXT lookup did not complete"
	}
	z.out.zdata <- zresult{err: &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New(why)},
		skipped: z.src.skippedText(), steps: z.steps}
}

// verify selects among the TXT records and makes the offer the engine
// uses, with the policy's verdict on its leaf and the key share and ZS
// prepared for the likeliest record (the engine uses them only if that
// record is the one selected).
func (z *zdataCheck) verify() (*tls13.ZDataOffer, error) {
	rec, leaf, err := z.sel.Select(z.txt)
	if err != nil {
		return nil, err
	}
	if z.forced, err = z.pq.check(rec); err != nil {
		return nil, err
	}
	offer := z.trust.offer(leaf)
	if offer == nil {
		return nil, errors.New("dial: internal error: selected leaf without a policy verdict")
	}
	rec.FillOffer(offer)
	offer.Prepared = z.prepared.get()
	return offer, nil
}

// policy is the TLS client's certificate policy applied to Z-data leaves
// (tls13.Config.VerifyZDataOffer): each leaf's check leaves an offer that
// carries the verdict, so the handshake does not repeat the check.
type policy struct {
	cfg *tls13.Config
	mu  sync.Mutex
	ok  map[*x509.Certificate]*tls13.ZDataOffer
}

func newPolicy(cfg *tls13.Config) *policy {
	return &policy{cfg: cfg, ok: map[*x509.Certificate]*tls13.ZDataOffer{}}
}

func (p *policy) check(leaf *x509.Certificate, inter []*x509.Certificate) error {
	z := &tls13.ZDataOffer{Leaf: leaf, Intermediates: inter}
	if err := p.cfg.VerifyZDataOffer(z); err != nil {
		return err
	}
	p.mu.Lock()
	p.ok[leaf] = z
	p.mu.Unlock()
	return nil
}

func (p *policy) offer(leaf *x509.Certificate) *tls13.ZDataOffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok[leaf]
}

// preparedShare is the key share and ZS made for the likeliest record
// (tls13.ZDataPrepared, single-use), for any number of readers: the
// verified offer and TurboTLS's early first flight share it.
type preparedShare struct {
	done chan struct{}
	p    *tls13.ZDataPrepared // nil: no likely record
}

func (s *preparedShare) get() *tls13.ZDataPrepared {
	<-s.done
	return s.p
}

// likelyOffer is the offer of the likeliest record, unverified, and its
// prepared share (see zdata.Selector.Likely).
type likelyOffer struct {
	offer    *tls13.ZDataOffer
	prepared *preparedShare
}
