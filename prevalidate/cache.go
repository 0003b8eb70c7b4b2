package prevalidate

// The cache of prevalidated services: what a connection needs before its
// first flight, fetched and checked ahead of need (Prefetch), so that the
// connection spends no DNS round trip and no certificate verification
// before it sends.

import (
	"container/list"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// Cache holds prevalidated services, one entry per host and port: the
// addresses, the HTTPS record (TurboTLS's advertisement), the Z-data
// record selected with its signature, validity, chain, name and
// revocation verified, and the verified chain of each leaf seen (the
// Z-data's TLSA leaf, or the certificate a truncated handshake fetched
// from a host without Z-data), with the OCSP answers that went into it.
// Besides the entries it keeps, for every connection through it whose
// Config has no tls13.ChainCache of its own, the chains those
// connections verified (a tls13.ChainCache): a second connection to a
// server skips its chain's verification without any prefetch, with
// revocation and VerifyPeerCertificate run again.
// An entry expires at the earliest of its DNS TTLs, the Z-data's
// not_after, its certificates' NotAfter and the nextUpdate of the CRLs
// and OCSP answers it rests on (Prefetched.Expires says which); the least
// recently used entries go when the cache is full.
//
// A verdict holds for the certificate policy it was reached under (a
// Policy: the TLS Config's RootCAs, ServerName, Revocation and
// InsecureSkipVerify, the OCSP policy and NoBFE): a connection under
// another policy uses the entry's DNS answers only, and verifies as it
// does without a cache.
// VerifyPeerCertificate is not part of that policy: it runs on every
// connection, on the prevalidated chains.
//
// A cache made by OpenCache keeps its entries' DNS answers in a file,
// so another process skips the lookups too; verdicts are never read from
// the file (a file is no verifier): a process verifies what it loaded
// when it first uses it, or at once with Prefetch. Clear forgets
// everything, like other per-site data. A Cache is safe for concurrent
// use; Close stops its refresher.
type Cache struct {
	mu      sync.Mutex
	max     int
	path    string
	ll      *list.List               // of *service, most recently used first
	m       map[string]*list.Element // by cacheKey
	ocsp    map[ocspKey]*ocspAnswer
	refresh *refresher // nil: no background renewal

	// now is the refresher's clock (clock.Now); tests move it.
	now func() time.Time
	// dialer opens the TCP connections of prefetching (truncated
	// handshakes, OCSP); nil means a net.Dialer. Tests reach servers
	// in other network namespaces through it.
	dialer func(ctx context.Context, network, addr string) (net.Conn, error)
	// keyShares is the pool Prefetch fills and prefetched connections
	// take their key shares' keys from (KeySharePool); nil: none
	// (KeyShares < 0).
	keyShares *tls13.KeySharePool
	// chains keeps the server chains the cache's connections verified
	// (tls13.ChainCache), for connections whose Config has none: a
	// later connection to the same server skips the chain's
	// verification even without a prefetched entry.
	chains *tls13.ChainCache
	// ocspFetches counts OCSP requests sent (tests).
	ocspFetches int
	// manualPrepare: a lookup that takes the prepared key share makes
	// no next one (benchmarks make it off the clock).
	manualPrepare bool
	// prepareRand is the randomness of the prepared key shares and
	// encapsulations (nil: crypto/rand); encapsulations counts those
	// made for v3 records. Both for tests, which check that a
	// connection's kem_share is the one made ahead.
	prepareRand    io.Reader
	encapsulations atomic.Int64
}

// prepare makes what a connection under rec sends and derives ahead
// (zdata.Record.Prepare): the key share and ZS, or for a v3 record the
// encapsulation to its X25519MLKEM768 key (the kem_share of
// docs/ztls-spec.md, Section 9.3), and the BFE encapsulation for a
// record with bfe=. Each is taken by one ClientHello only.
func (c *Cache) prepare(rec *zdata.Record) *tls13.ZDataPrepared {
	if rec.V3 {
		c.encapsulations.Add(1)
	}
	p := tls13.PrepareZData(rec.Group, rec.KeyShare, c.prepareRand)
	if pk := rec.BFEPublicKey(); pk != nil {
		_ = p.EncapsulateBFE(pk, c.prepareRand) // on error the engine encapsulates when it sends
	}
	return p
}

// CacheOptions configure a Cache.
type CacheOptions struct {
	// MaxEntries bounds the services held; 0 means 256.
	MaxEntries int
	// Path, if set, is the file the entries' DNS answers are kept in
	// (created when first needed): see Cache.
	Path string
	// Refresh renews, in the background, entries that were used by a
	// connection (Lookup) and are in the last tenth of their life, fetching and
	// validating them again as Prefetch did (with its Options); entries
	// nobody used are left to expire. Close stops it.
	Refresh bool
	// KeyShares is how many keys of each kind the cache's
	// tls13.KeySharePool keeps: Prefetch makes them, a connection from a
	// prefetched entry takes its key shares' keys from it (when its
	// Config has no pool and no Rand), so its ClientHello needs no key
	// generation. 0 means 4; below 0, no pool.
	KeyShares int
}

// DefaultCacheKeyShares is the pool size of a Cache whose KeyShares is 0.
const DefaultCacheKeyShares = 4

// DefaultCacheEntries is the size of a Cache whose MaxEntries is 0.
const DefaultCacheEntries = 256

// NewCache returns an empty cache.
func NewCache(o CacheOptions) *Cache {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultCacheEntries
	}
	c := &Cache{max: o.MaxEntries, path: o.Path, ll: list.New(), m: map[string]*list.Element{},
		ocsp: map[ocspKey]*ocspAnswer{}, now: clock.Now, chains: tls13.NewChainCache(o.MaxEntries)}
	switch {
	case o.KeyShares == 0:
		c.keyShares = tls13.NewKeySharePool(DefaultCacheKeyShares)
	case o.KeyShares > 0:
		c.keyShares = tls13.NewKeySharePool(o.KeyShares)
	}
	if o.Refresh {
		c.refresh = newRefresher(c)
	}
	return c
}

// OpenCache returns a cache kept in o.Path, with the unexpired entries
// already there (their DNS answers only: see Cache). An unreadable or
// malformed file starts empty: forgetting costs only lookups.
func OpenCache(o CacheOptions) *Cache {
	c := NewCache(o)
	if o.Path != "" {
		c.load()
	}
	return c
}

// DefaultCachePath is where the CLI keeps its cache:
// $XDG_CACHE_HOME/ztls/prefetch.json or ~/.cache/ztls/prefetch.json.
func DefaultCachePath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "ztls", "prefetch.json")
}

// defaultCache is the cache of Options with a nil Cache (and of
// dial.Options with a nil Cache): empty until a Prefetch with a nil Cache
// fills it, so a connection is unchanged without one.
var defaultCache = NewCache(CacheOptions{Refresh: true})

// DefaultCache returns the process-wide cache that Options (and
// dial.Options) with a nil Cache use.
func DefaultCache() *Cache { return defaultCache }

// service is one cache entry.
type service struct {
	host    string
	port    int
	fetched time.Time
	expires time.Time
	why     string // what sets expires
	// answers are the DNS answers in the order LookupService lands
	// them (A, AAAA, HTTPS, TXT, CERT, TLSA); none without a resolver.
	answers []*resolver.Answer
	addrs   []netip.Addr
	https   *resolver.Answer // nil: not looked up
	v       *verdict         // nil: fetched, not validated (loaded from a file)
	used    bool             // by a connection (Lookup) since it was fetched
	opts    *Options         // how Prefetch fetched it, for the refresher
	// handshake is the chain a truncated handshake fetched (DER, leaf
	// first), kept so a file holds it.
	handshake [][]byte
}

// verdict is what Prefetch validated, under one policy.
type verdict struct {
	policy policyKey
	// The Z-data record selected and its TLSA leaf and CERT
	// intermediates, or why there is none (zerr, a *zdata.Error).
	rec   *zdata.Record
	leaf  *x509.Certificate
	inter []*x509.Certificate
	zerr  error
	// from is the record the Z-data checked came from (zdata.SourceHTTPS
	// or zdata.SourceTXT; "": none was checked); skipped, why the HTTPS
	// record's was not used.
	from, skipped string
	// chains are the verified chains by leaf DER.
	chains map[string][][]*x509.Certificate
	// prepared is the key share and Z-data ECDH made for rec, for one
	// connection (the next one takes it, see take).
	prepared *tls13.ZDataPrepared
}

// Policy is what a verdict is reached under and holds for: the
// certificate policy of TLS (RootCAs, ServerName, Revocation and
// InsecureSkipVerify: the checks of tls13.Config.VerifyServerChain), the
// OCSP check, NoBFE, and the record Z-data is taken from (ZDataFrom, with
// zdata.FromHTTPSFirst and zdata.FromBoth one choice here, and
// ZDataSvcParamKey): the record a prefetch selects, and encapsulates
// for, depends on them. A connection looks its entry up under its own.
type Policy struct {
	TLS              *tls13.Config
	OCSP             OCSPPolicy
	NoBFE            bool
	ZDataFrom        zdata.From
	ZDataSvcParamKey dns.SVCBKey
}

func (p Policy) key() policyKey {
	svcKey := p.ZDataSvcParamKey
	if svcKey == 0 {
		svcKey = zdata.DefaultSvcParamKey
	}
	k := policyKey{ocsp: p.OCSP, noBFE: p.NoBFE, txtOnly: p.ZDataFrom == zdata.FromTXT, svcKey: svcKey}
	if p.TLS != nil {
		k.roots, k.name, k.insecure, k.rev = p.TLS.RootCAs, canonicalName(p.TLS.ServerName), p.TLS.InsecureSkipVerify, p.TLS.Revocation
	}
	return k
}

// policyKey is a Policy as a verdict keeps it.
type policyKey struct {
	roots    *x509.CertPool
	name     string
	insecure bool
	rev      *revocation.Checker
	ocsp     OCSPPolicy
	noBFE    bool // Options.NoBFE: a record with a BFE key is not to be used
	txtOnly  bool // Options.ZDataFrom is zdata.FromTXT: no Z-data from the HTTPS record
	svcKey   dns.SVCBKey
}

// same reports whether p and q are one policy: the same roots (one pool,
// or pools holding the same certificates), name, revocation checker
// (one Checker: loaded once and shared), OCSP policy, NoBFE and Z-data
// source (the record a prefetch selected and encapsulated for depends on
// them).
func (p policyKey) same(q policyKey) bool {
	if p.name != q.name || p.insecure != q.insecure || p.rev != q.rev || p.ocsp != q.ocsp || p.noBFE != q.noBFE ||
		p.txtOnly != q.txtOnly || p.svcKey != q.svcKey {
		return false
	}
	if p.roots == q.roots {
		return true
	}
	return p.roots != nil && q.roots != nil && p.roots.Equal(q.roots)
}

func canonicalName(host string) string { return strings.ToLower(strings.TrimSuffix(host, ".")) }

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

func cacheKey(host string, port int) string { return hostPort(canonicalName(host), port) }

// Entry is what a connection takes from the cache: a snapshot of an
// entry, with the verdict when it holds under the connection's Policy.
type Entry struct {
	// Addrs are the addresses; HTTPS is the HTTPS answer (nil: not looked
	// up); Answers are all the DNS answers in the order a
	// resolver.LookupService lands them (none without a resolver).
	Addrs   []netip.Addr
	HTTPS   *resolver.Answer
	Answers []*resolver.Answer
	// Validated: the verdict below holds under the Policy looked up
	// with; otherwise the entry gives its DNS answers only.
	Validated bool
	// ZData is the Z-data record selected, with its TLSA Leaf and CERT
	// Intermediates, verified; or ZDataErr says why there is none (a
	// *zdata.Error, or nil when nothing was looked up).
	ZData         *zdata.Record
	Leaf          *x509.Certificate
	Intermediates []*x509.Certificate
	ZDataErr      error
	// ZDataFrom is the record the Z-data checked came from
	// (zdata.SourceHTTPS or zdata.SourceTXT; "" when none was checked),
	// HTTPSZDataSkipped why the HTTPS record's was not used (dial's
	// Report fields of the same names).
	ZDataFrom, HTTPSZDataSkipped string
	// Chains are the verified chains, by leaf DER (see VerifiedChains).
	Chains map[string][][]*x509.Certificate
	// Prepared is the key share and Z-data ECDH made for ZData: this
	// connection's alone (tls13.ZDataPrepared is single-use).
	Prepared *tls13.ZDataPrepared
}

// VerifiedChains is tls13.Config.VerifiedChains for a validated entry:
// the chains verified for the leaf certs[0].
func (e *Entry) VerifiedChains(certs []*x509.Certificate) [][]*x509.Certificate {
	return e.Chains[string(certs[0].Raw)]
}

// Lookup returns host:port's entry unexpired at now, marked used (the
// refresher renews used entries), or nil. A verdict under p comes with
// it, and its prepared key share, which no later Lookup gets (a new one
// is made in the background).
func (c *Cache) Lookup(host string, port int, p Policy, now time.Time) *Entry {
	return c.lookup(host, port, p.key(), now)
}

func (c *Cache) lookup(host string, port int, pk policyKey, now time.Time) *Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey(host, port)
	el, ok := c.m[k]
	if !ok {
		return nil
	}
	s := el.Value.(*service)
	if !now.Before(s.expires) {
		c.removeLocked(el)
		c.saveLocked(now)
		return nil
	}
	c.ll.MoveToFront(el)
	s.used = true
	if c.refresh != nil && s.opts != nil && !now.Before(refreshAt(s)) {
		c.refresh.wake() // used in its last tenth: renew it now
	}
	h := &Entry{Addrs: s.addrs, HTTPS: s.https, Answers: s.answers}
	if v := s.v; v != nil && v.policy.same(pk) {
		h.Validated = true
		h.ZData, h.Leaf, h.Intermediates, h.ZDataErr, h.Chains = v.rec, v.leaf, v.inter, v.zerr, v.chains
		h.ZDataFrom, h.HTTPSZDataSkipped = v.from, v.skipped
		h.Prepared, v.prepared = v.prepared, nil
		if h.Prepared != nil && !c.manualPrepare {
			go c.prepareNext(s, v)
		}
	}
	return h
}

// prepareNext makes the key share and Z-data ECDH for the next
// connection to s under v (each is used once): for a v3 record a new
// encapsulation, so no kem_share serves two ClientHellos
// (docs/ztls-spec.md, Section 9.3).
func (c *Cache) prepareNext(s *service, v *verdict) {
	p := c.prepare(v.rec)
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[cacheKey(s.host, s.port)]; ok && el.Value.(*service) == s && s.v == v && v.prepared == nil {
		v.prepared = p
	}
}

// store puts s in the cache (replacing the entry for its host and
// port), evicting the least recently used beyond the bound.
func (c *Cache) store(s *service) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey(s.host, s.port)
	if el, ok := c.m[k]; ok {
		c.removeLocked(el)
	}
	c.m[k] = c.ll.PushFront(s)
	for c.ll.Len() > c.max {
		c.removeLocked(c.ll.Back())
	}
	c.saveLocked(s.fetched)
	if c.refresh != nil && s.opts != nil {
		c.refresh.wake()
	}
}

// Forget drops host:port's entry (a connection does so when the server
// refused what the entry held, e.g. Z-data rotated away).
func (c *Cache) Forget(host string, port int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.m[cacheKey(host, port)]; ok {
		c.removeLocked(el)
		c.saveLocked(c.now())
	}
}

func (c *Cache) removeLocked(el *list.Element) {
	s := c.ll.Remove(el).(*service)
	delete(c.m, cacheKey(s.host, s.port))
}

// Len returns the number of entries (expired ones included until used).
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Clear forgets every entry and OCSP answer, and removes the file.
func (c *Cache) Clear() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ll.Init()
	c.m = map[string]*list.Element{}
	c.ocsp = map[ocspKey]*ocspAnswer{}
	c.chains.Clear()
	if c.path == "" {
		return nil
	}
	if err := os.Remove(c.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// Close stops the refresher (a refresh under way finishes first). The
// cache stays usable, without background renewal.
func (c *Cache) Close() error {
	if c.refresh != nil {
		c.refresh.stop()
	}
	return nil
}

// The file: each entry's DNS answers as zone-file lines, and the chain a
// truncated handshake fetched; no verdict.
type diskEntry struct {
	Host      string       `json:"host"`
	Port      int          `json:"port"`
	Fetched   time.Time    `json:"fetched"`
	Expires   time.Time    `json:"expires"`
	Why       string       `json:"expires_by"`
	Addresses []string     `json:"addresses"`
	Answers   []diskAnswer `json:"answers,omitempty"`
	Handshake []string     `json:"handshake_chain,omitempty"` // base64 DER, leaf first
}

type diskAnswer struct {
	Name  string   `json:"name"`
	Type  uint16   `json:"type"`
	Rcode int      `json:"rcode"`
	RRs   []string `json:"rrs,omitempty"`
}

// saveLocked writes the unexpired entries (best effort).
func (c *Cache) saveLocked(now time.Time) {
	if c.path == "" {
		return
	}
	var out []diskEntry
	for el := c.ll.Front(); el != nil; el = el.Next() {
		s := el.Value.(*service)
		if !now.Before(s.expires) {
			continue
		}
		d := diskEntry{Host: s.host, Port: s.port, Fetched: s.fetched, Expires: s.expires, Why: s.why}
		for _, ip := range s.addrs {
			d.Addresses = append(d.Addresses, ip.String())
		}
		for _, a := range s.answers {
			da := diskAnswer{Name: a.Name, Type: a.Qtype, Rcode: a.Rcode}
			for _, rr := range a.RRs {
				da.RRs = append(da.RRs, rr.String())
			}
			d.Answers = append(d.Answers, da)
		}
		for _, der := range s.handshake {
			d.Handshake = append(d.Handshake, base64.StdEncoding.EncodeToString(der))
		}
		out = append(out, d)
	}
	data, err := json.Marshal(out)
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return
	}
	tmp := c.path + ".tmp"
	if os.WriteFile(tmp, data, 0o600) == nil {
		os.Rename(tmp, c.path)
	}
}

// load reads the file's unexpired entries, least recently used last.
func (c *Cache) load() {
	data, err := os.ReadFile(c.path)
	if err != nil {
		return
	}
	var in []diskEntry
	if json.Unmarshal(data, &in) != nil {
		return
	}
	now := c.now()
	for i := len(in) - 1; i >= 0; i-- {
		d := in[i]
		if !now.Before(d.Expires) || d.Port < 1 || d.Port > 65535 || d.Host == "" {
			continue
		}
		s := &service{host: d.Host, port: d.Port, fetched: d.Fetched, expires: d.Expires, why: d.Why}
		for _, a := range d.Addresses {
			if ip, err := netip.ParseAddr(a); err == nil {
				s.addrs = append(s.addrs, ip)
			}
		}
		for _, da := range d.Answers {
			a := &resolver.Answer{Name: da.Name, Qtype: da.Type, Rcode: da.Rcode, FromCache: true}
			for _, text := range da.RRs {
				if rr, err := dns.NewRR(text); err == nil && rr != nil {
					a.RRs = append(a.RRs, rr)
				}
			}
			s.answers = append(s.answers, a)
			if a.Qtype == dns.TypeHTTPS {
				s.https = a
			}
		}
		for _, b := range d.Handshake {
			if der, err := base64.StdEncoding.DecodeString(b); err == nil {
				s.handshake = append(s.handshake, der)
			}
		}
		if len(s.addrs) == 0 {
			continue
		}
		if el, ok := c.m[cacheKey(s.host, s.port)]; ok {
			c.removeLocked(el)
		}
		c.m[cacheKey(s.host, s.port)] = c.ll.PushFront(s)
	}
	for c.ll.Len() > c.max {
		c.removeLocked(c.ll.Back())
	}
}

// fillKeyShares makes the keys of cfg's ClientHello key shares in the
// cache's pool, and reports whether they are ready.
func (c *Cache) fillKeyShares(cfg *tls13.Config) bool {
	pool := c.KeySharePool(cfg)
	return pool != nil && pool.Fill(cfg) == nil
}

// KeySharePool is the pool a connection with cfg takes its key shares'
// keys from (tls13.Config.KeySharePool), the one Prefetch fills: the
// cache's, or nil when cfg brings its own (or a Rand, whose keys must
// come from it) or the cache has none (CacheOptions.KeyShares < 0).
func (c *Cache) KeySharePool(cfg *tls13.Config) *tls13.KeySharePool {
	if c.keyShares == nil || cfg.Rand != nil || cfg.KeySharePool != nil {
		return nil
	}
	return c.keyShares
}

// ChainCache is the cache's tls13.ChainCache: the server chains its
// connections verified, for connections whose Config has none.
func (c *Cache) ChainCache() *tls13.ChainCache { return c.chains }
