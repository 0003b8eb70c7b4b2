package prevalidate

// Prefetch: everything a connection checks before its first flight,
// fetched and checked ahead of need into the Cache.

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// Options configure Prefetch. An entry serves a connection whose
// certificate policy (Policy: TLS, OCSP, NoBFE) is the one it was
// prefetched under; dial.Options.Prevalidation gives the Options that
// match a connection's.
type Options struct {
	// TLS is the connections' client configuration: its certificate
	// policy verifies, its ClientHello is the truncated handshake's;
	// ServerName defaults to the host.
	TLS *tls13.Config
	// Resolver is the T-DNS resolver for the addresses, the HTTPS record
	// and the Z-data; nil means the system resolver for addresses and no
	// Z-data.
	Resolver *resolver.Resolver
	// Cache is where the entries go; nil means the process-wide
	// DefaultCache.
	Cache *Cache
	// OCSP asks the leaf's OCSP responder about it under this policy
	// (its answers are kept in the Cache until their nextUpdate); the
	// zero value asks nothing.
	OCSP OCSPPolicy
	// NoBFE selects as a client without Bloom filter encryption does
	// (dial.Options.NoBFE).
	NoBFE bool
	// Now is the clock for Z-data validity and expiry; nil means the
	// ztls clock (internal/clock).
	Now func() time.Time
	// Concurrency bounds the targets fetched at once; 0 means
	// DefaultConcurrency.
	Concurrency int
	// ZDataFrom says which record the Z-data is taken from, as
	// dial.Options.ZDataFrom does for a connection: zdata.FromHTTPSFirst
	// (the zero value too) and zdata.FromBoth take the HTTPS record's
	// (key ZDataSvcParamKey; 0 means zdata.DefaultSvcParamKey) when it
	// carries usable Z-data, following AliasMode records as a connection
	// does, else the TXT record's; zdata.FromTXT the TXT record's only.
	// Prefetch asks every record at once whichever it is (the entry's
	// answers then serve a connection under any choice).
	// PrefetchedZData.From says which record the Z-data came from.
	ZDataFrom        zdata.From
	ZDataSvcParamKey dns.SVCBKey
	// NoHandshake: for a host without Z-data, fetch no certificate (a
	// truncated handshake contacts the server; see the package
	// documentation): its DNS answers are cached, and its certificate is
	// verified on the connection.
	NoHandshake bool
	// WantPQ, if set, says whether a connection to host:port wants v3
	// (post-quantum) records before any answer (docs/ztls-spec.md,
	// Section 9.6: its policy is "only", or the service is pinned;
	// dial.Options.Prevalidation sets it): the TXT question then goes
	// over TCP at once when the resolver's transport is UDP
	// (resolver.Question.Stream), as the connection's would, since the
	// v3 answer exceeds 1232 bytes (9.7). Prefetch applies no policy of
	// its own: it selects as the Selector does (a valid v3 record first)
	// and the connection applies Section 9.6 to what the entry holds.
	WantPQ func(host string, port int) bool
}

// DefaultConcurrency is Options.Concurrency's 0.
const DefaultConcurrency = 4

// clock is Options.Now, or clock.Now.
func (o *Options) clock() func() time.Time {
	if o.Now != nil {
		return o.Now
	}
	return clock.Now
}

// cacheOrDefault is Options.Cache, or the process default.
func (o *Options) cacheOrDefault() *Cache {
	if o.Cache != nil {
		return o.Cache
	}
	return defaultCache
}

// systemAddrTTL is how long addresses from the system resolver (which
// tells no TTL) are kept.
const systemAddrTTL = 30 * time.Second

// Why an entry has no Z-data, besides the Selector's reasons: the words
// of dial's fallback reasons for the same cases.
const (
	reasonNoResolver = "no DNS resolver for Z-data"
	reasonServerName = "TLS ServerName differs from the dialled host (Z-data is signed for the dialled host)"
)

// ms is d in milliseconds, to the microsecond, as reports give times.
func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// failedAnswerTTL caps the life of an entry one of whose lookups failed
// (timed out, SERVFAIL): it is tried again soon.
const failedAnswerTTL = 30 * time.Second

// Prefetched is what Prefetch fetched and validated for one target.
type Prefetched struct {
	Target    string   `json:"target"` // HOST:PORT
	Addresses []string `json:"addresses,omitempty"`
	// TurboPort is the TurboTLS UDP port the HTTPS record advertises.
	TurboPort int `json:"turbo_port,omitempty"`
	// ZData is the record selected, verified (signature, validity,
	// chain, name, revocation); ZDataReason says why there is none.
	ZData       *PrefetchedZData `json:"zdata,omitempty"`
	ZDataReason string           `json:"zdata_reason,omitempty"`
	// HTTPSZDataSkipped is why the HTTPS record's Z-data was not used
	// (dial's Report.HTTPSZDataSkipped): "" when it was, or when it was
	// not looked for (Options.ZDataFrom zdata.FromTXT).
	HTTPSZDataSkipped string `json:"https_zdata_skipped,omitempty"`
	// Chain is the verified chain (subjects, leaf first); ChainFrom is
	// where its leaf came from: "zdata" (the TLSA record) or "handshake"
	// (a truncated handshake with the server).
	Chain     []string `json:"verified_chain,omitempty"`
	ChainFrom string   `json:"chain_from,omitempty"`
	// ChainError is why the chain a truncated handshake fetched was not
	// validated (the connection will then fail the same way).
	ChainError string `json:"chain_error,omitempty"`
	// OCSP is the responder's answer on the leaf under Options.OCSP
	// ("good", "unknown", "unavailable"; "" when not asked).
	OCSP string `json:"ocsp,omitempty"`
	// Precomputed: the key share and the Z-data ECDH for the next
	// connection are made; for a v3 record, the encapsulation to its
	// X25519MLKEM768 key (the kem_share of docs/ztls-spec.md, Section
	// 9.3, for one ClientHello).
	Precomputed bool `json:"precomputed"`
	// KeyShares: the keys of the next ClientHello's key shares (x25519,
	// the ML-KEM-768 half of X25519MLKEM768) are made, in the cache's
	// tls13.KeySharePool, each for one connection.
	KeyShares bool `json:"key_shares"`
	// ServerContacted: a truncated handshake reached the server (the
	// prefetch's only cost to it; Z-data comes from DNS).
	ServerContacted bool `json:"server_contacted"`
	// DNSQuestions is how many questions went to the resolver (0 with
	// an IP address or the system resolver).
	DNSQuestions int `json:"dns_questions"`
	// Expires is when the entry expires, and ExpiresBy what sets it:
	// "DNS TTL (A)", "Z-data not_after", "certificate NotAfter", "CRL
	// nextUpdate", "OCSP nextUpdate", ...
	Expires   time.Time `json:"expires"`
	ExpiresBy string    `json:"expires_by"`
	TookMS    float64   `json:"took_ms"`
	// Error is why nothing was cached (Err, as text).
	Error string `json:"error,omitempty"`
	Err   error  `json:"-"`
}

// PrefetchedZData is the Z-data record a Prefetch validated.
type PrefetchedZData struct {
	// From is the record it came from: zdata.SourceHTTPS ("https",
	// the HTTPS record's SvcParam) or zdata.SourceTXT ("txt").
	From      string    `json:"from"`
	ID        uint32    `json:"id"`
	Group     string    `json:"group"`
	NotBefore time.Time `json:"not_before"`
	NotAfter  time.Time `json:"not_after"`
}

// Prefetch fetches and validates, for each target (HOST:PORT, or HOST
// for port 443), what a connection (dial.Connect) would otherwise fetch
// and check before its first flight, and keeps it in o.Cache (nil: the
// process default), so that a later connection to that target with o's
// certificate policy sends its first flight without a DNS lookup or a
// certificate verification:
//
//   - the addresses, the HTTPS record (TurboTLS's port, and the Z-data
//     it carries, through AliasMode records if any), the Z-data TXT,
//     TLSA and CERT records, with o.Resolver (all at once);
//   - the Z-data record a connection would select, its signature, validity,
//     chain, name and revocation (o.TLS's Revocation CRLs, and OCSP under
//     o.OCSP) checked, and the key share and Z-data ECDH for the next
//     connection made (used by one connection only);
//   - for a host without Z-data, its certificate, by
//     a truncated TLS 1.3 handshake (unless NoHandshake), checked
//     the same way.
//
// Targets are fetched at most Concurrency at once; the results are in
// the order of targets, and a failed target has its Err set (nothing is
// cached for it).
func Prefetch(ctx context.Context, o Options, targets ...string) []*Prefetched {
	out := make([]*Prefetched, len(targets))
	n := o.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	sem := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			out[i] = prefetchOne(ctx, o, t)
		}()
	}
	wg.Wait()
	return out
}

// ParseTarget turns HOST, HOST:PORT or an https:// URL into the
// HOST:PORT Prefetch and dial.Connect take (port 443 by default).
func ParseTarget(s string) (string, error) {
	if rest, ok := strings.CutPrefix(s, "https://"); ok {
		s, _, _ = strings.Cut(rest, "/")
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return net.JoinHostPort(ip.String(), "443"), nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			host, port = s, "443"
		} else {
			return "", fmt.Errorf("prevalidate: %q is not HOST[:PORT]: %w", s, err)
		}
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("prevalidate: bad port in %q", s)
	}
	if host == "" {
		return "", fmt.Errorf("prevalidate: no host in %q", s)
	}
	return net.JoinHostPort(host, port), nil
}

// expiry is the earliest of several deadlines, and what set it.
type expiry struct {
	at  time.Time
	why string
}

func (e *expiry) cap(t time.Time, why string) {
	if t.IsZero() {
		return
	}
	if e.at.IsZero() || t.Before(e.at) {
		e.at, e.why = t, why
	}
}

// prefetcher is one target's Prefetch.
type prefetcher struct {
	o     Options
	cache *Cache
	host  string
	port  int
	now   time.Time
	cfg   *tls13.Config // the connection's (ServerName settled)
	vcfg  *tls13.Config // cfg verifying: OCSP noted into note
	note  *ocspNote
	p     *Prefetched
	s     *service
	v     *verdict
	exp   expiry

	mu      sync.Mutex // the Z-data chain checks run concurrently
	checked map[*x509.Certificate][]*x509.Certificate
}

func prefetchOne(ctx context.Context, o Options, target string) *Prefetched {
	start := time.Now() // real time: elapsed
	p := &Prefetched{Target: target}
	f := &prefetcher{o: o, p: p}
	if err := f.run(ctx, target); err != nil {
		p.Err, p.Error = err, err.Error()
	}
	p.TookMS = ms(time.Since(start))
	return p
}

func (f *prefetcher) run(ctx context.Context, target string) error {
	addr, err := ParseTarget(target)
	if err != nil {
		return err
	}
	f.p.Target = addr
	host, portStr, _ := net.SplitHostPort(addr)
	f.host, f.port = host, atoiPort(portStr)
	f.cache = f.o.cacheOrDefault()
	f.now = f.o.clock()()
	f.cfg = f.o.TLS
	if f.cfg == nil {
		f.cfg = &tls13.Config{}
	}
	if f.cfg.ServerName == "" {
		f.cfg = f.cfg.Clone()
		f.cfg.ServerName = host
	}
	f.vcfg = f.cfg.Clone()
	f.vcfg.VerifiedChains = nil // verify for real
	if f.o.OCSP != OCSPOff {
		f.note = &ocspNote{}
		f.vcfg.VerifyPeerCertificate = f.cache.ocspHook(ctx, f.o.OCSP, f.o.clock(), f.cfg.VerifyPeerCertificate, f.note)
	}
	f.s = &service{host: host, port: f.port, fetched: f.now}
	f.v = &verdict{policy: Policy{TLS: f.cfg, OCSP: f.o.OCSP, NoBFE: f.o.NoBFE, ZDataFrom: f.o.ZDataFrom,
		ZDataSvcParamKey: f.o.ZDataSvcParamKey}.key(), chains: map[string][][]*x509.Certificate{}}
	f.s.v = f.v
	if err := f.lookup(ctx); err != nil {
		return err
	}
	f.checkZData(ctx)
	if f.v.rec == nil && !f.o.NoHandshake {
		if err := f.handshake(ctx); err != nil {
			return err
		}
	}
	f.settleExpiry()
	if !f.now.Before(f.s.expires) {
		if f.p.ChainError != "" { // an IP address with an invalid certificate
			return fmt.Errorf("prevalidate: %s not prefetched: %s", addr, f.p.ChainError)
		}
		return fmt.Errorf("prevalidate: nothing to cache for %s: %s ends at once", addr, f.s.why)
	}
	opts := f.o
	f.s.opts = &opts
	f.cache.store(f.s)
	f.p.KeyShares = f.cache.fillKeyShares(f.cfg)
	return nil
}

func atoiPort(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// lookup fetches the addresses and the DNS records.
func (f *prefetcher) lookup(ctx context.Context) error {
	s, p := f.s, f.p
	if ip, err := netip.ParseAddr(f.host); err == nil {
		s.addrs = []netip.Addr{ip}
	} else if f.o.Resolver == nil {
		ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", f.host)
		if err != nil {
			return fmt.Errorf("prevalidate: looking up %s: %w", f.host, err)
		}
		s.addrs = ips
		f.exp.cap(f.now.Add(systemAddrTTL), "system resolver (no TTL)")
	} else {
		q := resolver.ServiceQuery{TXTOverStream: f.o.WantPQ != nil && f.o.WantPQ(f.host, f.port)}
		res, err := f.o.Resolver.LookupServiceQuery(ctx, f.host, f.port, q, nil)
		if res == nil {
			return fmt.Errorf("prevalidate: looking up %s: %w", f.host, err)
		}
		// The order in which LookupService lands its answers, which a
		// connection replays.
		s.answers = []*resolver.Answer{res.A, res.AAAA, res.HTTPS, res.TXT, res.CERT, res.TLSA}
		p.DNSQuestions = len(s.answers)
		for _, a := range s.answers {
			if a == nil {
				continue
			}
			name := dns.TypeToString[a.Qtype]
			if a.Err != nil {
				f.exp.cap(f.now.Add(failedAnswerTTL), "failed lookup ("+name+")")
				continue
			}
			f.exp.cap(f.now.Add(answerTTL(a)), "DNS TTL ("+name+")")
		}
		s.addrs = append(res.A.Addrs(), res.AAAA.Addrs()...)
		if len(s.addrs) == 0 {
			return fmt.Errorf("prevalidate: %s has no address (A/AAAA): %s", f.host, res.A.Status())
		}
		if res.HTTPS != nil && res.HTTPS.Err == nil {
			s.https = res.HTTPS
			if port, err := turbo.UDPPortFrom(res.HTTPS.RRs); err == nil {
				p.TurboPort = int(port)
			}
		}
	}
	for _, ip := range s.addrs {
		p.Addresses = append(p.Addresses, ip.String())
	}
	return nil
}

// answerTTL is how long an answer may be kept: its records' smallest
// TTL, or for a negative answer the SOA's negative TTL (RFC 2308,
// Section 5; failedAnswerTTL without one).
func answerTTL(a *resolver.Answer) time.Duration {
	if len(a.RRs) > 0 {
		ttl := a.RRs[0].Header().Ttl
		for _, rr := range a.RRs[1:] {
			ttl = min(ttl, rr.Header().Ttl)
		}
		return time.Duration(ttl) * time.Second
	}
	if a.Reply != nil {
		for _, rr := range a.Reply.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				return time.Duration(min(soa.Hdr.Ttl, soa.Minttl)) * time.Second
			}
		}
	}
	return failedAnswerTTL
}

// checkZData selects and verifies the Z-data as a connection would, from
// the record Options.ZDataFrom says, and precomputes the key share and
// ECDH for the record selected.
func (f *prefetcher) checkZData(ctx context.Context) {
	v, p := f.v, f.p
	var answers = map[uint16]*resolver.Answer{}
	for _, a := range f.s.answers {
		if a != nil {
			answers[a.Qtype] = a
		}
	}
	tlsa, cert := answers[dns.TypeTLSA], answers[dns.TypeCERT]
	switch {
	case f.o.Resolver == nil || len(f.s.answers) == 0:
		v.zerr = &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New(reasonNoResolver)}
	case !strings.EqualFold(strings.TrimSuffix(f.cfg.ServerName, "."), strings.TrimSuffix(f.host, ".")):
		v.zerr = &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New(reasonServerName)}
	case tlsa == nil || tlsa.Err != nil || cert == nil || cert.Err != nil:
		v.zerr = &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("the Z-data lookups did not complete")}
	}
	var txt [][]string
	if v.zerr == nil {
		txt, v.zerr = f.zdataRecords(ctx, answers)
	}
	if v.zerr != nil {
		p.ZDataReason = zdata.ReasonText(v.zerr)
		return
	}
	f.checked = map[*x509.Certificate][]*x509.Certificate{}
	sel := zdata.NewSelector(f.host, f.port, zdata.SelectOptions{Now: f.now, Policy: f.checkLeaf, NoBFE: f.o.NoBFE})
	sel.StartChains(resolver.RecordsOf[*dns.TLSA](tlsa), resolver.RecordsOf[*dns.CERT](cert))
	rec, leaf, err := sel.Select(txt)
	if err != nil {
		v.zerr = err
		p.ZDataReason = zdata.ReasonText(err)
		return
	}
	v.rec, v.leaf = rec, leaf
	f.mu.Lock()
	v.inter = f.checked[leaf]
	f.mu.Unlock()
	f.exp.cap(rec.NotAfter, "Z-data not_after")
	p.ZData = &PrefetchedZData{From: v.from, ID: rec.ID, Group: rec.Group.String(), NotBefore: rec.NotBefore, NotAfter: rec.NotAfter}
	p.ChainFrom = "zdata"
	v.prepared = f.cache.prepare(rec)
	// A v3 record's share passed FIPS 203's checks in the Selector, so
	// its encapsulation is made (Public is for ECDH shares only).
	p.Precomputed = v.prepared.Public() != nil || rec.V3
}

// zdataRecords returns the records to select among, as TXT strings, as
// a connection under Options.ZDataFrom takes them (docs/ztls-spec.md,
// Section 8.5): the HTTPS record's when it carries usable Z-data (unless
// FromTXT), else the TXT record's; v.from says whose, v.skipped why the
// HTTPS record's were not used. Records that parse but fail their checks
// are the Selector's to refuse: a forged HTTPS value is no reason to
// read TXT, as for a connection.
func (f *prefetcher) zdataRecords(ctx context.Context, answers map[uint16]*resolver.Answer) ([][]string, error) {
	v := f.v
	if f.o.ZDataFrom != zdata.FromTXT {
		recs, skipped := f.httpsZData(ctx, answers[dns.TypeHTTPS])
		if skipped == nil {
			v.from = zdata.SourceHTTPS
			return zdata.TXTStrings(recs), nil
		}
		v.skipped = zdata.ReasonText(skipped)
		f.p.HTTPSZDataSkipped = v.skipped
	}
	v.from = zdata.SourceTXT
	txt := answers[dns.TypeTXT]
	if txt == nil || txt.Err != nil {
		why := "the Z-data lookups did not complete"
		if v.skipped != "" {
			why = "none in the HTTPS record (" + v.skipped + "), and the TXT lookup did not complete"
		}
		return nil, &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New(why)}
	}
	return txt.TXTStrings(), nil
}

// httpsZData reads the Z-data of the HTTPS answer a (the origin's),
// following its AliasMode records with the resolver as a connection does
// (zdata.AliasChain: at most 8, no loop): the records, or why there are
// none (a *zdata.Error). Each alias target's answer counts as a DNS
// question and caps the entry's life, which rests on it.
func (f *prefetcher) httpsZData(ctx context.Context, a *resolver.Answer) ([]*zdata.Record, error) {
	chain := zdata.NewAliasChain(zdata.HTTPSOwner(f.host, f.port))
	for {
		if a == nil {
			return nil, &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("no HTTPS answer")}
		}
		if a.Err != nil {
			return nil, &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("the HTTPS lookup failed: " + a.Status())}
		}
		recs, alias, why := zdata.FromHTTPS(a.RRs, a.Name, f.host, f.port, f.o.ZDataSvcParamKey)
		if alias == "" {
			return recs, why
		}
		if err := chain.Next(alias); err != nil {
			return nil, err
		}
		a, _ = f.o.Resolver.Lookup(ctx, alias, dns.TypeHTTPS) // an Answer either way
		f.p.DNSQuestions++
		if a.Err != nil {
			f.exp.cap(f.now.Add(failedAnswerTTL), "failed lookup (HTTPS of "+alias+")")
		} else {
			f.exp.cap(f.now.Add(answerTTL(a)), "DNS TTL (HTTPS of "+alias+")")
		}
	}
}

// checkLeaf is the Selector's policy: the connection's, keeping the
// chains it verifies.
func (f *prefetcher) checkLeaf(leaf *x509.Certificate, inter []*x509.Certificate) error {
	chains, err := f.vcfg.VerifyServerChain(append([]*x509.Certificate{leaf}, inter...))
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keepChains(leaf, chains)
	f.checked[leaf] = inter
	return nil
}

// keepChains records the verified chains of leaf (f.mu held, or no
// concurrency).
func (f *prefetcher) keepChains(leaf *x509.Certificate, chains [][]*x509.Certificate) {
	if len(chains) == 0 { // InsecureSkipVerify: nothing was verified
		return
	}
	f.v.chains[string(leaf.Raw)] = chains
}

// handshake fetches the certificate of a host without Z-data by a
// truncated handshake, and verifies it.
func (f *prefetcher) handshake(ctx context.Context) error {
	certs, _, err := f.cache.fetchChain(ctx, f.s.addrs, f.port, f.cfg)
	if err != nil {
		return err
	}
	f.p.ServerContacted = true
	for _, c := range certs {
		f.s.handshake = append(f.s.handshake, c.Raw)
	}
	chains, err := f.vcfg.VerifyServerChain(certs)
	if err != nil {
		// Not cached as verified: the connection verifies (and fails)
		// as without a cache; the DNS answers are kept.
		f.p.ChainError = err.Error()
		return nil
	}
	f.keepChains(certs[0], chains)
	f.p.ChainFrom = "handshake"
	return nil
}

// settleExpiry sets the entry's expiry: the DNS TTLs and the Z-data's
// not_after (so far), the chains' NotAfter, the CRLs' and OCSP answers'
// nextUpdate; and the report's chain.
func (f *prefetcher) settleExpiry() {
	var first [][]*x509.Certificate
	for leafDER, chains := range f.v.chains {
		if first == nil || (f.v.leaf != nil && leafDER == string(f.v.leaf.Raw)) {
			first = chains
		}
		for _, chain := range chains {
			for _, c := range chain {
				f.exp.cap(c.NotAfter, "certificate NotAfter")
			}
		}
		f.exp.cap(f.cfg.Revocation.NextUpdate(chains), "CRL nextUpdate")
	}
	if f.note != nil {
		f.note.mu.Lock()
		f.exp.cap(f.note.next, "OCSP nextUpdate")
		f.p.OCSP = f.note.status
		f.note.mu.Unlock()
	}
	if len(first) > 0 {
		for _, c := range first[0] {
			f.p.Chain = append(f.p.Chain, c.Subject.String())
		}
	}
	f.s.expires, f.s.why = f.exp.at, f.exp.why
	f.p.Expires, f.p.ExpiresBy = f.exp.at, f.exp.why
}
