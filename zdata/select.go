package zdata

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"
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

// Select picks the Z-data a client should use (docs/ztls-spec.md, Sections 1
// and 6). txt holds the TXT RRs at TXTName(host, port) (each as its
// character-strings), tlsa and cert the TLSA and CERT RRs of the service.
// Among ztls1 records that parse, use a known group and scheme, carry a
// valid share, are valid at now and verify with a TLSA 3 0 0 leaf whose
// chain leads to roots (through CERT intermediates) and whose name
// matches host, it returns the one with the latest not-after, with Host,
// Port and LeafHash set, and its leaf. Otherwise the error's ReasonOf
// names why, taken from the record that got furthest. Select checks no
// revocation; SelectWith does, given CRLs.
func Select(txt [][]string, tlsa []*dns.TLSA, cert []*dns.CERT, host string, port int, roots *x509.CertPool, now time.Time) (*Record, *x509.Certificate, error) {
	return SelectWith(txt, tlsa, cert, host, port, SelectOptions{Roots: roots, Now: now})
}

// SelectOptions are the trust inputs of SelectWith.
type SelectOptions struct {
	Roots *x509.CertPool // nil: the system's roots
	Now   time.Time
	// Revocation, if set, must pass every leaf's verified chains: a
	// revoked leaf (or intermediate) is ReasonRevoked (ZTLS-SPEC §6).
	Revocation *revocation.Checker
	// Policy, if set, is the client's whole certificate policy and
	// replaces the checks above: a TLS client passes its own (package dial
	// passes tls13.Config.VerifyZDataOffer), so the Z-data leaf meets the
	// roots, name, revocation and hooks its Certificate message would.
	// Its error's ReasonOf is ReasonWrongName for a name mismatch,
	// ReasonRevoked for a revoked chain, else ReasonUntrustedChain.
	Policy func(leaf *x509.Certificate, intermediates []*x509.Certificate) error
}

// SelectWith is Select with revocation checking (SelectOptions).
func SelectWith(txt [][]string, tlsa []*dns.TLSA, cert []*dns.CERT, host string, port int, o SelectOptions) (*Record, *x509.Certificate, error) {
	return StartChains(tlsa, cert, host, port, o).Select(txt)
}

// Chains is the trust half of SelectWith, started before the TXT records
// are in: the TLSA leaves and CERT intermediates parsed, and each leaf's
// chain, name and revocation check running in the background. On a first
// connection the TXT answer may land after the TLSA and CERT answers; the
// chain checks, public-key operations on the critical path of TurboTLS
// (which sends nothing before they are done), then overlap the wait.
type Chains struct {
	host   string // canonical
	port   int
	now    time.Time
	err    error // the host is not a name
	leaves []*x509.Certificate
	inter  []*x509.Certificate // from the CERT records
	checks *chainChecks
}

// Intermediates are the CA certificates parsed from the CERT records.
func (c *Chains) Intermediates() []*x509.Certificate { return c.inter }

// StartChains starts the chain checks of a service's TLSA 3 0 0 leaves
// (through its CERT intermediates) as SelectWith would make them.
func StartChains(tlsa []*dns.TLSA, cert []*dns.CERT, host string, port int, o SelectOptions) *Chains {
	chost, err := CanonicalHost(host)
	if err != nil {
		return &Chains{err: reasonErr(ReasonNoZData, err)}
	}
	c := &Chains{host: chost, port: port, now: o.Now, leaves: tlsaLeaves(tlsa, chost, port)}
	for _, rr := range cert {
		if rr == nil || rr.Type != dns.CertPKIX {
			continue
		}
		der, err := base64.StdEncoding.DecodeString(rr.Certificate)
		if err != nil {
			continue
		}
		if ic, err := x509.ParseCertificate(der); err == nil {
			c.inter = append(c.inter, ic)
		}
	}
	policy := o.Policy
	if policy == nil {
		policy = func(leaf *x509.Certificate, inter []*x509.Certificate) error {
			return checkLeaf(leaf, chost, o.Roots, inter, o.Now, o.Revocation)
		}
	}
	c.checks = startChainChecks(c.leaves, c.inter, policy)
	return c
}

// Likeliest returns the record Select tries first among txt, unverified:
// of those that parse, use a known group and scheme, carry a valid share
// and are valid at now, the one with the latest not-after (nil: none).
// Nothing about it is trusted; it serves to prepare work (a key share, a
// first flight) while the checks run, and the work is used only if Select
// returns the same record.
func Likeliest(txt [][]string, now time.Time) *Record {
	var best *Record
	for _, strs := range txt {
		r, err := ParseTXT(strs)
		if err != nil || usable(r, now) != nil {
			continue
		}
		if best == nil || r.NotAfter.After(best.NotAfter) {
			best = r
		}
	}
	return best
}

// usable is what Select checks of a record before its signature: known
// group and scheme, a valid share, valid at now.
func usable(r *Record, now time.Time) error {
	if !KnownGroup(r.Group) {
		return reasonErr(ReasonUnknownGroup, fmt.Errorf("%w %d", ErrUnknownGroup, r.Group))
	}
	if !KnownScheme(r.Scheme) {
		return reasonErr(ReasonUnknownScheme, fmt.Errorf("%w %d", ErrUnknownScheme, r.Scheme))
	}
	if err := ValidateShare(r.Group, r.KeyShare); err != nil {
		return err
	}
	if err := r.CheckValidity(now); err != nil {
		return reasonErr(ReasonOf(err), fmt.Errorf("%w (not-before %s, not-after %s, now %s)", err,
			formatTime(r.NotBefore), formatTime(r.NotAfter), formatTime(now)))
	}
	return nil
}

// Likely is Likeliest completed as Select would complete it, with the
// service's first TLSA leaf (host, port and leaf hash set), unverified:
// what Select most likely returns, known before the signature and chain
// checks are done (nil: nothing likely).
func (c *Chains) Likely(txt [][]string) (*Record, *x509.Certificate) {
	if c.err != nil || len(c.leaves) == 0 {
		return nil, nil
	}
	r := Likeliest(txt, c.now)
	if r == nil {
		return nil, nil
	}
	leaf := c.leaves[0]
	r.Host, r.Port, r.LeafHash = c.host, c.port, sha256.Sum256(leaf.Raw)
	return r, leaf
}

// Select is SelectWith's choice among the TXT records txt, with these
// chains. It is not safe for concurrent use.
func (c *Chains) Select(txt [][]string) (*Record, *x509.Certificate, error) {
	if c.err != nil {
		return nil, nil, c.err
	}
	chost, port, now, leaves, chains := c.host, c.port, c.now, c.leaves, c.checks
	var recs []*Record
	var worst error
	fail := func(err error) {
		if worst == nil || stage(ReasonOf(err)) > stage(ReasonOf(worst)) {
			worst = err
		}
	}
	for _, strs := range txt {
		r, err := ParseTXT(strs)
		if errors.Is(err, ErrNotZTLS) {
			continue
		}
		if err != nil {
			fail(err)
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		if worst != nil {
			return nil, nil, worst
		}
		return nil, nil, reasonErr(ReasonNoZData, fmt.Errorf("zdata: no ztls1 TXT record for %s", TXTName(chost, port)))
	}
	// Latest not-after first; the first fully valid record wins.
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].NotAfter.After(recs[j].NotAfter) })
	for _, r := range recs {
		if err := usable(r, now); err != nil {
			fail(err)
			continue
		}
		if len(leaves) == 0 {
			fail(reasonErr(ReasonNoLeaf, fmt.Errorf("zdata: no TLSA 3 0 0 record at %s", TLSAName(chost, port))))
			continue
		}
		leaf := verifyAny(r, leaves, chost, port)
		if leaf == nil {
			fail(diagnose(r, leaves, chost, port))
			continue
		}
		if err := chains.result(leaf); err != nil {
			fail(err)
			continue
		}
		return r, leaf, nil
	}
	return nil, nil, worst
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
func diagnose(r *Record, leaves []*x509.Certificate, host string, port int) error {
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
	return reasonErr(ReasonBadSignature, fmt.Errorf("%w with any TLSA 3 0 0 leaf of %s port %d", ErrBadSignature, host, port))
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
