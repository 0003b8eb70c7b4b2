package dial

// The Z-data check's inputs as they land: the HTTPS record's Z-data
// (through any AliasMode chain), the TXT record's, and the leaves to
// verify them with (one held from an earlier handshake, the TLSA and
// CERT answers), with the choice between the records Options.ZDataFrom
// makes and the follow-up questions it takes (docs/ztls-spec.md,
// Sections 8.3, 8.5 and 8.6).

import (
	"crypto/x509"
	"errors"
	"strings"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/zdata"
)

// zdataSources is what the Z-data check has landed so far, on the
// lookup goroutine.
type zdataSources struct {
	host  string
	port  int
	from  ZDataFrom
	key   dns.SVCBKey
	held  []*x509.Certificate // leaf first; nil: none (or not used)
	ask   func([]resolver.Question) bool
	query resolver.ServiceQuery // the first questions

	// The HTTPS record's Z-data, as TXT strings, once settled: nil with
	// skipped saying why there is none. pending is the name whose HTTPS
	// answer is awaited (the origin's owner, then each alias target).
	https     [][]string
	httpsDone bool
	skipped   error
	pending   string
	aliases   *zdata.AliasChain

	txt               [][]string
	haveTXT, askedTXT bool
	tlsa, cert        *resolver.Answer

	// Post-quantum (pq.go): the policy and pin, and whether the HTTPS
	// record's classical Z-data announces v3 records, which come in TXT
	// only (docs/ztls-spec.md, Sections 9.6 and 9.8).
	pq             pqGate
	httpsAnnounces bool
}

// newZDataSources settles the first questions: with ZDataTXT all of them
// (the HTTPS record for TurboTLS and ALPN only); otherwise TXT only with
// ZDataBoth, and TLSA and CERT unless Memory holds a leaf for the
// service, which is then tried first (zero extra queries: Section 8.3).
func (a *attempt) newZDataSources(ask func([]resolver.Question) bool, pq pqGate) *zdataSources {
	owner := strings.ToLower(dns.Fqdn(zdata.HTTPSOwner(a.host, a.port)))
	s := &zdataSources{host: a.host, port: a.port, from: a.o.ZDataFrom, key: a.o.ZDataSvcParamKey, ask: ask,
		pending: owner, aliases: zdata.NewAliasChain(owner), pq: pq}
	if s.key == 0 {
		s.key = zdata.DefaultSvcParamKey
	}
	switch s.from {
	case ZDataTXT:
		s.askedTXT = true
	case ZDataBoth:
		s.askedTXT = true
		s.held = a.mem.Leaf(a.host, a.port, a.now())
	default:
		s.held = a.mem.Leaf(a.host, a.port, a.now())
		held := len(s.held) > 0
		s.query = resolver.ServiceQuery{NoTXT: !pq.wantsTXT(), NoTLSA: held, NoCERT: held}
		s.askedTXT = pq.wantsTXT() // v3 wanted: TXT with the first questions (Section 9.6)
	}
	// v3 wanted: the TXT answer exceeds 1232 bytes; over TCP at once.
	s.query.TXTOverStream = pq.wantsTXT()
	return s
}

// replay makes the sources those of a cache entry's answers, which
// hold every answer Prefetch asked for (all of LookupService's).
func (s *zdataSources) replay() {
	s.query, s.askedTXT = resolver.ServiceQuery{}, true
}

// isOrigin reports whether name is the origin's HTTPS owner.
func (z *zdataCheck) isOrigin(name string) bool {
	return strings.EqualFold(dns.Fqdn(name), z.src.aliases.Origin())
}

// onHTTPS takes an HTTPS answer: the origin's, or an alias target's.
func (z *zdataCheck) onHTTPS(a *resolver.Answer, origin bool) {
	s := z.src
	if s.from == ZDataTXT || s.httpsDone || !strings.EqualFold(dns.Fqdn(a.Name), s.pending) {
		return
	}
	if origin {
		z.step("https_answered")
	}
	if a.Err != nil {
		s.settle(nil, &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("the HTTPS lookup failed: " + a.Status())})
		return
	}
	recs, alias, why := zdata.FromHTTPS(a.RRs, a.Name, s.host, s.port, s.key)
	if alias == "" {
		s.settle(recs, why)
		if recs != nil {
			z.step("https_zdata")
		}
		return
	}
	if err := s.aliases.Next(alias); err != nil {
		s.settle(nil, err)
		return
	}
	z.step("https_alias_followed")
	s.pending = alias
	if !s.ask([]resolver.Question{{Name: alias, Qtype: dns.TypeHTTPS}}) {
		s.settle(nil, &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("an HTTPS AliasMode record, and no resolver to follow it (cached answers)")})
	}
}

// settle fixes the HTTPS record's Z-data: recs, or why there is none.
func (s *zdataSources) settle(recs []*zdata.Record, err error) {
	s.httpsDone = true
	if err != nil || len(recs) == 0 {
		s.skipped = err
		return
	}
	s.https = zdata.TXTStrings(recs)
	for _, r := range recs {
		s.httpsAnnounces = s.httpsAnnounces || r.AnnouncesPQ()
	}
}

// pqNeedsTXT reports whether the HTTPS record's Z-data, classical as
// ever (Section 9.8), must give way to the TXT RRset's: the policy
// wants v3 records (only, or pinned), or the HTTPS record's announce
// them and the user did not opt in to classical early data.
func (s *zdataSources) pqNeedsTXT() bool {
	return s.pq.wantsTXT() || (s.httpsAnnounces && s.pq.refusesAnnounced())
}

// onAnswer takes the TXT, TLSA or CERT answer.
func (z *zdataCheck) onAnswer(a *resolver.Answer) {
	s := z.src
	switch a.Qtype {
	case dns.TypeTXT:
		s.txt, s.haveTXT = a.TXTStrings(), true
		if s.from != ZDataTXT {
			z.step("txt_answered")
		}
	case dns.TypeTLSA:
		s.tlsa = a
	case dns.TypeCERT:
		s.cert = a
	}
}

// records returns the records to check and whose they are, once known
// (source "" until then): with ZDataTXT the TXT record's; otherwise the
// HTTPS record's when it carries Z-data, else the TXT record's, which
// are asked for now if they were not with the first questions.
func (s *zdataSources) records(step func(string)) ([][]string, string) {
	switch {
	case s.from == ZDataTXT && s.haveTXT:
		return s.txt, ZDataFromTXT
	case s.from == ZDataTXT || !s.httpsDone:
		return nil, ""
	case s.https != nil && !s.pqNeedsTXT():
		return s.https, ZDataFromHTTPS
	case s.https != nil && s.skipped == nil:
		s.skipped = &zdata.Error{Reason: zdata.ReasonNoPQZData, Err: errors.New("the HTTPS record carries classical Z-data only, and the service publishes (or is pinned to) v3 records, which come in TXT")}
		return s.records(step)
	case s.haveTXT:
		return s.txt, ZDataFromTXT
	case !s.askedTXT:
		s.askedTXT = true
		// v3 records wanted: their answer exceeds 1232 bytes, so it is
		// asked over TCP at once (Section 9.7), not after a truncated one.
		if s.ask([]resolver.Question{{Name: resolver.ZDataName(s.host, s.port), Qtype: dns.TypeTXT, Stream: s.pqNeedsTXT()}}) {
			step("txt_asked")
		}
	}
	return nil, ""
}

// leavesIn reports whether the leaves are in: the TLSA and CERT answers
// when they were asked, else the held leaf.
func (s *zdataSources) leavesIn() bool {
	if s.query.NoTLSA {
		return true
	}
	return s.tlsa != nil && s.cert != nil
}

// leaves are the Selector's leaves: the held one first, then TLSA's.
func (s *zdataSources) leaves() zdata.Leaves {
	var l zdata.Leaves
	if len(s.held) > 0 {
		l.Held, l.Intermediates = s.held[:1], s.held[1:]
	}
	if s.tlsa != nil {
		l.TLSA = resolver.RecordsOf[*dns.TLSA](s.tlsa)
	}
	if s.cert != nil {
		l.CERT = resolver.RecordsOf[*dns.CERT](s.cert)
	}
	return l
}

// skippedText is why the HTTPS record's Z-data was not used ("": it
// was, or it was not looked for).
func (s *zdataSources) skippedText() string {
	if s.skipped == nil {
		return ""
	}
	return zdata.ReasonText(s.skipped)
}
