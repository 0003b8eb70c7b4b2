package zdata

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/revocation"
)

// stage orders failures by how far a record got, so Select reports the
// reason of the record that came closest to being usable.
func stage(r Reason) int {
	switch r {
	case ReasonMalformed:
		return 1
	case ReasonUnknownGroup, ReasonUnknownScheme:
		return 2
	case ReasonInvalidShare:
		return 3
	case ReasonWindowTooLong, ReasonExpired, ReasonNotYetValid:
		return 4
	case ReasonNoLeaf:
		return 5
	case ReasonBadSignature:
		return 6
	case ReasonWrongService:
		return 7
	case ReasonUntrustedChain:
		return 8
	case ReasonWrongName:
		return 9
	case ReasonRevoked:
		return 10
	}
	return 0
}

// diagnosticPorts are the ports tried, besides the leaf's names on the
// asked port, to tell a record copied from another service ("wrong host or
// port") from a forgery. It is a diagnostic only: either way the client
// falls back, and a copy from an unlisted port reports "bad signature".
var diagnosticPorts = []int{443, 8443, 853, 4433, 444, 8080, 80}

// SelectOptions are a Selector's trust inputs.
type SelectOptions struct {
	Roots *x509.CertPool // nil: the system's roots
	// Now is the instant the records must be valid at (and the chains).
	Now time.Time
	// Revocation, if set, must pass every leaf's verified chains: a
	// revoked leaf (or intermediate) is ReasonRevoked (docs/ztls-spec.md, Section 6).
	Revocation *revocation.Checker
	// Policy, if set, is the client's whole certificate policy and
	// replaces the checks above: a TLS client passes its own (package dial
	// passes tls13.Config.VerifyZDataOffer), so the Z-data leaf meets the
	// roots, name, revocation and hooks its Certificate message would.
	// Its error's ReasonOf is ReasonWrongName for a name mismatch,
	// ReasonRevoked for a revoked chain, else ReasonUntrustedChain.
	Policy func(leaf *x509.Certificate, intermediates []*x509.Certificate) error
	// NoBFE makes the client one without Bloom filter encryption: it
	// ignores v2 records that carry bfe= (docs/ztls-spec.md, Section 7.1)
	// and uses their v1 twins. By default, among records with the latest
	// not-after, one with bfe= is preferred.
	NoBFE bool
	// PostQuantumOnly makes the Selector refuse v1 and v2 records: the
	// client of docs/ztls-spec.md, Section 9.6 whose user has not asked
	// for classical early data. Whatever it says, a v3 (post-quantum)
	// record comes first, and a valid one is selected before any v1 or
	// v2 record of the service.
	PostQuantumOnly bool
}

// Selector picks the Z-data a client should use for one service
// (docs/ztls-spec.md, Sections 1 and 6) from its DNS answers: the TXT
// records at TXTName (to Select and Likely) and the TLSA and CERT records
// at TLSAName (to StartChains). Among ztls1 records that parse, use a
// known group and scheme, carry a valid share, are valid at Now and
// verify with a TLSA 3 0 0 leaf whose chain leads to the roots (through
// CERT intermediates) and whose name matches the host, Select returns the
// one with the latest not-after among those valid at Now (a record within
// ClockSkew before its not-before only when none is: at a rollover the
// current record, whose key the server still takes, not the next one,
// which no server takes before its not-before: tls13.ZDataLive), with
// Host, Port and LeafHash set, and
// its leaf; otherwise the error's ReasonOf names why, taken from the
// record that got furthest.
//
// The answers may land in any order, and the checks are public-key work
// on a first connection's critical path, so each starts as soon as its
// input is in: StartChains runs each leaf's chain check in the background
// while the TXT answer is awaited, and Likely names the record Select
// will most likely return before any signature is checked, so that work
// made with it (a key share, a first flight) is ready when the verdict
// is. One-shot use:
//
//	sel := zdata.NewSelector(host, port, zdata.SelectOptions{Roots: roots, Now: time.Now()})
//	sel.StartChains(tlsa, certs)
//	rec, leaf, err := sel.Select(txt)
//
// StartChains must not run concurrently with the other methods, nor
// Select with itself; Likely may run concurrently with Select.
type Selector struct {
	host   string // canonical
	port   int
	o      SelectOptions
	err    error // the host is not a name
	leaves []*x509.Certificate
	held   bool         // some leaves were held, not only TLSA's
	checks *chainChecks // nil until StartChains
	mu     sync.Mutex   // guards last (Likely may run beside Select)
	last   *screening   // the last TXT records screened
}

// NewSelector returns the Selector of host:port's Z-data.
func NewSelector(host string, port int, o SelectOptions) *Selector {
	chost, err := CanonicalHost(host)
	if err != nil {
		return &Selector{port: port, o: o, err: reasonErr(ReasonNoZData, err)}
	}
	return &Selector{host: chost, port: port, o: o}
}

// StartChains takes the service's TLSA and CERT records and starts the
// chain, name and revocation checks of its TLSA 3 0 0 leaves (through
// the CERT intermediates) in the background. Select waits for them; a
// Selector that was given no TLSA leaf selects nothing (ReasonNoLeaf).
func (s *Selector) StartChains(tlsa []*dns.TLSA, cert []*dns.CERT) {
	s.StartLeaves(Leaves{TLSA: tlsa, CERT: cert})
}

// Leaves are the certificates a Selector verifies records with
// (docs/ztls-spec.md, Section 8.3): leaves the client already holds for
// the service (an earlier handshake's, an earlier TLSA answer's), which
// are tried first, and the service's TLSA and CERT answers. Held leaves
// are untrusted input like the others: the chain, name and revocation
// checks run on each before a record it verifies is selected.
type Leaves struct {
	Held          []*x509.Certificate
	Intermediates []*x509.Certificate // of the held leaves
	TLSA          []*dns.TLSA
	CERT          []*dns.CERT
}

// StartLeaves is StartChains with the leaves l gives: it starts the
// checks of each (held leaves first, the same leaf once) in the
// background. Call it, or StartChains, once.
func (s *Selector) StartLeaves(l Leaves) {
	if s.err != nil {
		return
	}
	seen := map[[32]byte]bool{}
	for _, c := range append(append([]*x509.Certificate(nil), l.Held...), tlsaLeaves(l.TLSA, s.host, s.port)...) {
		if c == nil || seen[sha256.Sum256(c.Raw)] {
			continue
		}
		seen[sha256.Sum256(c.Raw)] = true
		s.leaves = append(s.leaves, c)
		s.held = s.held || len(l.Held) > 0
	}
	inter := append([]*x509.Certificate(nil), l.Intermediates...)
	for _, rr := range l.CERT {
		if rr == nil || rr.Type != dns.CertPKIX {
			continue
		}
		der, err := base64.StdEncoding.DecodeString(rr.Certificate)
		if err != nil {
			continue
		}
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter = append(inter, ic)
		}
	}
	policy := s.o.Policy
	if policy == nil {
		policy = func(leaf *x509.Certificate, inter []*x509.Certificate) error {
			return checkLeaf(leaf, s.host, s.o.Roots, inter, s.o.Now, s.o.Revocation)
		}
	}
	s.checks = startChainChecks(s.leaves, inter, policy)
}

// Likely returns the record Select tries first among txt, unverified,
// with Host and Port set and, once StartChains found a leaf, the
// service's first TLSA leaf (and LeafHash): what Select most likely
// returns, known before the signature and chain checks are done. rec is
// nil when no record passes the checks made before the signature; leaf is
// nil before StartChains or without a TLSA leaf. Nothing about them is
// trusted: they serve to prepare work while the checks run, used only if
// Select returns the same record.
func (s *Selector) Likely(txt [][]string) (rec *Record, leaf *x509.Certificate) {
	if s.err != nil {
		return nil, nil
	}
	sc := s.screened(txt)
	for i := range sc.recs {
		if sc.share(i) == nil {
			rec = sc.recs[i].Clone()
			break
		}
	}
	if rec == nil {
		return nil, nil
	}
	rec.Host, rec.Port = s.host, s.port
	if len(s.leaves) > 0 {
		leaf = s.leaves[0]
		rec.LeafHash = sha256.Sum256(leaf.Raw)
	}
	return rec, leaf
}

// Select picks the record to use among the TXT records txt (each as its
// character-strings), with the chains StartChains checks, and returns it
// with its leaf; see Selector.
func (s *Selector) Select(txt [][]string) (*Record, *x509.Certificate, error) {
	if s.err != nil {
		return nil, nil, s.err
	}
	sc := s.screened(txt)
	recs, worst := sc.recs, sc.worst
	fail := func(err error) {
		if worst == nil || stage(ReasonOf(err)) > stage(ReasonOf(worst)) {
			worst = err
		}
	}
	if len(recs) == 0 && worst == nil {
		which := "ztls1"
		if s.o.PostQuantumOnly {
			which = "post-quantum (v=ztls3)"
		}
		return nil, nil, reasonErr(ReasonNoZData, fmt.Errorf("zdata: no %s TXT record for %s", which, TXTName(s.host, s.port)))
	}
	// In screen's order; the first fully valid record wins: the shares
	// and signatures of the records after it are not checked.
	for i, r := range recs {
		if err := sc.share(i); err != nil {
			fail(err)
			continue
		}
		r = r.Clone() // Verify sets its leaf, host and port
		if len(s.leaves) == 0 {
			fail(reasonErr(ReasonNoLeaf, fmt.Errorf("zdata: no TLSA 3 0 0 record at %s (and no leaf held for it)", TLSAName(s.host, s.port))))
			continue
		}
		leaf := verifyAny(r, s.leaves, s.host, s.port)
		if leaf == nil {
			fail(diagnose(r, s.leaves, s.host, s.port, s.held))
			continue
		}
		if err := s.checks.result(leaf); err != nil {
			fail(err)
			continue
		}
		return r, leaf, nil
	}
	return nil, nil, worst
}

// screen makes the checks of a record that come before its signature,
// its share's excepted (screening.share, made only for the records a
// Selector reaches): of the ztls records in txt, it returns those that
// parse, use a known group and scheme and are valid at now (with the
// ClockSkew allowance), in Select's order (Likely is its first with a
// valid share): v3 (post-quantum) records first (docs/ztls-spec.md,
// Section 9.6), then those valid at now without the allowance, then
// latest not-after, then a record with bfe= before one without; and the
// failure of the others that got furthest (nil: none failed).
func screen(txt [][]string, o SelectOptions) ([]*Record, error) {
	now := o.Now
	var recs []*Record
	var worst error
	for _, strs := range txt {
		r, err := ParseTXT(strs)
		if errors.Is(err, ErrNotZTLS) || (o.NoBFE && err == nil && len(r.BFE) > 0) || (o.PostQuantumOnly && err == nil && !r.V3) {
			continue
		}
		if err == nil {
			err = usable(r, now)
		}
		if err != nil {
			if worst == nil || stage(ReasonOf(err)) > stage(ReasonOf(worst)) {
				worst = err
			}
			continue
		}
		recs = append(recs, r)
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].V3 != recs[j].V3 {
			return recs[i].V3
		}
		if vi, vj := recs[i].ValidAt(now), recs[j].ValidAt(now); vi != vj {
			return vi
		}
		if !recs[i].NotAfter.Equal(recs[j].NotAfter) {
			return recs[i].NotAfter.After(recs[j].NotAfter)
		}
		return len(recs[i].BFE) > 0 && len(recs[j].BFE) == 0
	})
	return recs, worst
}

// usable is what screen checks of a parsed record: known group and
// scheme, valid at now (its share is checked when it is reached).
func usable(r *Record, now time.Time) error {
	if !r.knownGroup() {
		return reasonErr(ReasonUnknownGroup, fmt.Errorf("%w %d", ErrUnknownGroup, r.Group))
	}
	if !KnownScheme(r.Scheme) {
		return reasonErr(ReasonUnknownScheme, fmt.Errorf("%w %d", ErrUnknownScheme, r.Scheme))
	}
	if err := r.CheckValidity(now); err != nil {
		return reasonErr(ReasonOf(err), fmt.Errorf("%w (not-before %s, not-after %s, now %s)", err,
			formatTime(r.NotBefore), formatTime(r.NotAfter), formatTime(now)))
	}
	return nil
}

// screening is screen's outcome for one set of TXT records, kept by the
// Selector so that Likely (dial asks it twice) and Select parse a v3
// answer's ~4 kB once, and each record's share checked at most once,
// only when a Selector reaches it in order: the next period's v3 key is
// not checked while the current one serves, nor the classical records'
// keys once a v3 record is valid. The records are never handed out:
// Likely and Select return clones.
type screening struct {
	txt    [][]string
	recs   []*Record
	worst  error
	mu     sync.Mutex
	shares []error // per record, once checked
	done   []bool
}

// screened returns the screening of txt: the last one when txt holds
// the same strings, else a new one.
func (s *Selector) screened(txt [][]string) *screening {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && slices.EqualFunc(s.last.txt, txt, slices.Equal[[]string]) {
		return s.last
	}
	recs, worst := screen(txt, s.o)
	s.last = &screening{txt: slices.Clone(txt), recs: recs, worst: worst, shares: make([]error, len(recs)), done: make([]bool, len(recs))}
	return s.last
}

// share checks the i-th record's key share (ValidateShare; for a v3
// record FIPS 203's modulus check of its ML-KEM key), once.
func (sc *screening) share(i int) error {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if !sc.done[i] {
		sc.shares[i], sc.done[i] = ValidateShare(sc.recs[i].Group, sc.recs[i].KeyShare), true
	}
	return sc.shares[i]
}

// tlsaLeaves returns the parsed certificates of the TLSA 3 0 0 records
// owned by the service's TLSA name (or with no owner name).
func tlsaLeaves(tlsa []*dns.TLSA, host string, port int) []*x509.Certificate {
	want := TLSAName(host, port)
	var out []*x509.Certificate
	seen := map[[32]byte]bool{}
	for _, t := range tlsa {
		if t == nil || t.Usage != 3 || t.Selector != 0 || t.MatchingType != 0 {
			continue
		}
		if t.Hdr.Name != "" && !strings.EqualFold(dns.Fqdn(t.Hdr.Name), want) {
			continue
		}
		der, err := hex.DecodeString(t.Certificate)
		if err != nil {
			continue
		}
		h := sha256.Sum256(der)
		if seen[h] {
			continue
		}
		if c, err := x509.ParseCertificate(der); err == nil {
			seen[h] = true
			out = append(out, c)
		}
	}
	return out
}

// verifyAny returns the leaf whose hash makes r's signature verify.
func verifyAny(r *Record, leaves []*x509.Certificate, host string, port int) *x509.Certificate {
	for _, l := range leaves {
		if r.Verify(l, host, port) == nil {
			return l
		}
	}
	return nil
}

// diagnose tells a record signed for another service of the same leaf
// from a forgery (see diagnosticPorts).
func diagnose(r *Record, leaves []*x509.Certificate, host string, port int, held bool) error {
	for _, l := range leaves {
		if s, err := SchemeFor(l.PublicKey); err != nil || s != r.Scheme {
			continue
		}
		c := r.Clone()
		c.LeafHash = sha256.Sum256(l.Raw)
		hosts := []string{host}
		for i, n := range l.DNSNames {
			if i == 8 {
				break
			}
			if n = strings.ToLower(n); !strings.Contains(n, "*") && n != host {
				hosts = append(hosts, n)
			}
		}
		ports := append([]int{port}, diagnosticPorts...)
		for _, h := range hosts {
			for _, p := range ports {
				if h == host && p == port {
					continue
				}
				if c.verifyWith(l.PublicKey, h, p) {
					return reasonErr(ReasonWrongService, fmt.Errorf("zdata: record is signed for %s port %d, not %s port %d", h, p, host, port))
				}
			}
		}
	}
	which := "TLSA 3 0 0 leaf"
	if held {
		which = "leaf held or TLSA 3 0 0 leaf"
	}
	return reasonErr(ReasonBadSignature, fmt.Errorf("%w with any %s of %s port %d", ErrBadSignature, which, host, port))
}

// maxParallelChains bounds the chain checks started ahead of need; a
// service publishes one leaf, two while its certificate is rotated.
const maxParallelChains = 4

// chainChecks holds the outcome of each leaf's chain check, started in
// the background for the first maxParallelChains leaves and computed on
// demand for the others.
type chainChecks struct {
	inter   []*x509.Certificate
	policy  func(leaf *x509.Certificate, inter []*x509.Certificate) error
	pending map[*x509.Certificate]chan error
	done    map[*x509.Certificate]error
}

func startChainChecks(leaves, inter []*x509.Certificate, policy func(*x509.Certificate, []*x509.Certificate) error) *chainChecks {
	c := &chainChecks{inter: inter, policy: policy,
		pending: map[*x509.Certificate]chan error{}, done: map[*x509.Certificate]error{}}
	for i, l := range leaves {
		if i == maxParallelChains {
			break
		}
		ch := make(chan error, 1) // buffered: a check nobody waits for still ends
		c.pending[l] = ch
		go func() { ch <- c.check(l) }()
	}
	return c
}

// check runs the policy on leaf, naming the reason of a failure.
func (c *chainChecks) check(leaf *x509.Certificate) error {
	err := c.policy(leaf, c.inter)
	if err == nil || ReasonOf(err) != ReasonOther {
		return err
	}
	var host x509.HostnameError
	switch {
	case errors.As(err, &host):
		return reasonErr(ReasonWrongName, fmt.Errorf("zdata: %w", err))
	case errors.Is(err, revocation.ErrRevoked):
		return reasonErr(ReasonRevoked, fmt.Errorf("zdata: TLSA leaf: %w", err))
	}
	return reasonErr(ReasonUntrustedChain, fmt.Errorf("zdata: leaf %q: %w", leaf.Subject.CommonName, err))
}

// result waits for (or runs) the chain check of leaf.
func (c *chainChecks) result(leaf *x509.Certificate) error {
	if err, ok := c.done[leaf]; ok {
		return err
	}
	var err error
	if ch, ok := c.pending[leaf]; ok {
		err = <-ch
		delete(c.pending, leaf)
	} else {
		err = c.check(leaf)
	}
	c.done[leaf] = err
	return err
}

// checkLeaf verifies the leaf's PKIX chain to roots, its name and, with
// rev, that nothing in the chain is revoked.
func checkLeaf(leaf *x509.Certificate, host string, roots *x509.CertPool, inter []*x509.Certificate, now time.Time, rev *revocation.Checker) error {
	pool := x509.NewCertPool()
	for _, ic := range inter {
		pool.AddCert(ic)
	}
	chains, err := leaf.Verify(x509.VerifyOptions{
		Roots:         roots,
		Intermediates: pool,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return reasonErr(ReasonUntrustedChain, fmt.Errorf("zdata: leaf %q: %v", leaf.Subject.CommonName, err))
	}
	if err := leaf.VerifyHostname(host); err != nil {
		return reasonErr(ReasonWrongName, fmt.Errorf("zdata: %v", err))
	}
	if err := rev.CheckAny(chains, now); err != nil {
		return reasonErr(ReasonRevoked, fmt.Errorf("zdata: TLSA leaf: %w", err))
	}
	return nil
}
