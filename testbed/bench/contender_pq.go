package bench

// The post-quantum contenders (issue 30; docs/ztls-spec.md, Section 9),
// each beside its classical twin in the same run:
//
//   - ztls-pq: ztls against a server that issues, beside its classical
//     keys (whose records then announce v3, Section 9.6), X25519MLKEM768
//     keys published as v3 TXT records (zdata.Options.PostQuantum). The
//     client runs dial's default policy (prefer), takes the v3 record and
//     encapsulates to it; both ends offer X25519MLKEM768 first for the
//     handshake, as post-quantum clients and servers do. Its twin is ztls
//     (a server without v3 keys, X25519). Over UDP the v3 TXT answer
//     (about 4 kB) is truncated and asked again over TCP.
//   - ztls-dot, ztls-pq-dot: ztls and ztls-pq asking the resolver over
//     DNS over TLS (RFC 7858) on a connection the client's worker keeps
//     open from visit to visit (dot.go): opened, or checked, by an
//     unmeasured question before each visit; a visit during which the
//     resolver accepted a DoT connection is refused. The issue's
//     comparison: the Z-data fetched over the kept-open DoT connection.
//   - ztls-turbo-pq, ztls-turbo-dot, ztls-turbo-pq-dot: the same over
//     TurboTLS (beside ztls-turbo).
//   - ztls-pq-prefetch, ztls-turbo-pq-prefetch: with prefetch before the
//     click (beside ztls-prefetch and ztls-turbo-prefetch).
//
// A post-quantum sample counts only if its early data was accepted under
// the v3 record (dial's report: early_data.post_quantum) and the
// handshake's group was X25519MLKEM768; a classical one only if its early
// data was not post-quantum.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	dnsresolver "github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

func init() {
	reg := func(name string, c func() Contender) { Register(name, c) }
	eng := func(name string, v variant, prefetch bool) {
		reg(name, func() Contender { return &engineContender{name: name, mode: "ztls", variant: v, prefetch: prefetch} })
	}
	turb := func(name string, v variant, prefetch bool) {
		reg(name, func() Contender { return &turboContender{name: name, mode: "ztls", variant: v, prefetch: prefetch} })
	}
	eng("ztls-pq", variant{pq: true}, false)
	eng("ztls-dot", variant{dot: true}, false)
	eng("ztls-pq-dot", variant{pq: true, dot: true}, false)
	eng("ztls-pq-prefetch", variant{pq: true}, true)
	turb("ztls-turbo-pq", variant{pq: true}, false)
	turb("ztls-turbo-dot", variant{dot: true}, false)
	turb("ztls-turbo-pq-dot", variant{pq: true, dot: true}, false)
	turb("ztls-turbo-pq-prefetch", variant{pq: true}, true)
}

// variant is what a contender adds to its base (tls, ztls, ztls-turbo):
// post-quantum Z-data, the resolver over kept-open DoT, ECH.
type variant struct {
	pq  bool // the server issues v3 keys; both ends offer X25519MLKEM768
	dot bool // the client asks the resolver over kept-open DoT
	ech bool // the server has ECH keys, published in its HTTPS record (contender_ech.go)
}

func (v variant) usesDoT() bool { return v.dot }

// variantSuffixes end the names of variants; baseName strips them (and
// the prefetch and OCSP suffixes) to name the protocol checkVisit checks.
var variantSuffixes = []string{prefetchSuffix, ocspSuffix, "-dot", "-pq", "-ech"}

// baseName is name without its variant suffixes: ztls-pq-dot → ztls.
func baseName(name string) string {
	for {
		n := name
		for _, s := range variantSuffixes {
			n = strings.TrimSuffix(n, s)
		}
		if n == name {
			return name
		}
		name = n
	}
}

// zdataOptions are the Z-data options of the variant's server.
func (v variant) zdataOptions() zdata.Options {
	return zdata.Options{PostQuantum: v.pq}
}

// pqGroups are a post-quantum client's and server's groups, hybrid first.
var pqGroups = []tls13.CurveID{tls13.X25519MLKEM768, tls13.X25519}

// clientGroups are the handshake groups a client offers.
func clientGroups(pq bool) []tls13.CurveID {
	if pq {
		return pqGroups
	}
	return []tls13.CurveID{tls13.X25519}
}

// serverConfig adds the variant to a server's configuration: the
// post-quantum groups, the ECH keys.
func (v variant) serverConfig(tc *tls13.Config, ech *echService) {
	if v.pq {
		tc.Groups = pqGroups
	}
	if ech != nil {
		tc.ECHKeySet = &ech.set
	}
}

// apply puts the variant into a visit.
func (v variant) apply(vis *visit, c *Client) {
	vis.PQ = v.pq
	if v.dot && c.dot != nil {
		vis.DoT = c.dot.addr.String()
	}
	if v.ech {
		vis.ECH = string(dial.ECHRequire)
	}
}

// check decides whether a visit counts for the variant: a post-quantum
// one had its early data accepted under the v3 record and an
// X25519MLKEM768 handshake, a classical ZTLS one's early data was not
// post-quantum; a DoT one asked over the connection opened before it
// (dw: the resolver's DoT accepts around the visit); an ECH one had ECH
// accepted, any other none.
func (v variant) check(name, mode string, r dial.Report, dw dotWindow) error {
	switch {
	case v.pq && (!r.EarlyData.Accepted || !r.EarlyData.PostQuantum):
		return fmt.Errorf("bench: %s: early data accepted %v, post-quantum %v (fallback: %s)", name, r.EarlyData.Accepted, r.EarlyData.PostQuantum, r.FallbackReason)
	case v.pq && r.TLS.Group != tls13.X25519MLKEM768.String():
		return fmt.Errorf("bench: %s: handshake group %s, want %s", name, r.TLS.Group, tls13.X25519MLKEM768)
	case !v.pq && mode == "ztls" && r.EarlyData.PostQuantum:
		return fmt.Errorf("bench: %s: classical ZTLS, but the early data was post-quantum", name)
	}
	if v.dot {
		if err := dw.check(name); err != nil {
			return err
		}
	}
	return checkECHReport(name, v.ech, r)
}

// checkVariant refuses a visit's variant fields no worker can use.
func (v *visit) checkVariant() error {
	if v.DoT != "" {
		if _, err := netip.ParseAddrPort(v.DoT); err != nil {
			return fmt.Errorf("bad DoT resolver %q", v.DoT)
		}
	}
	if v.DoTOpen && (v.DoT == "" || v.Prefetch || v.Prefetched) {
		return errors.New("opening the DoT connection is a job of its own, and needs a DoT resolver")
	}
	if v.ECH != "" {
		if _, err := dial.ParseECHMode(v.ECH); err != nil {
			return err
		}
	}
	return nil
}

// dotResolverConfig is the DoT resolver's configuration: the
// benchmark's CA, ResolverName checked, an idle timeout past the gaps
// between visits.
func dotResolverConfig(addr string, roots *x509.CertPool, cacheSize int) dnsresolver.Config {
	return dnsresolver.Config{Servers: []string{addr}, Transport: dnsresolver.TLS, CacheSize: cacheSize,
		Timeout: 4 * time.Second, IdleTimeout: dotIdleTimeout,
		TLSConfig: &tls.Config{RootCAs: roots, ServerName: ResolverName}}
}

// resolverFor is a visit's resolver: over UDP a new one; over DoT the
// worker's kept one (kept: not closed with the visit), or, in the stub
// scenario, a new one whose cache is filled first (the fill opens its
// connection).
func (st *workerState) resolverFor(v visit, roots *x509.CertPool, cacheSize int) (res *dnsresolver.Resolver, kept bool, err error) {
	if v.DoT == "" {
		res, err = dnsresolver.New(dnsresolver.Config{Servers: []string{v.Resolver}, Transport: dnsresolver.UDP, CacheSize: cacheSize, Timeout: 4 * time.Second})
		return res, false, err
	}
	if v.StubCache {
		res, err = dnsresolver.New(dotResolverConfig(v.DoT, roots, cacheSize))
		return res, false, err
	}
	if st.dot == nil || st.dotAddr != v.DoT {
		if st.dot != nil {
			st.dot.Close()
		}
		// No cache: every lookup of a measured visit goes to the
		// scenario's resolver, as over UDP.
		if st.dot, err = dnsresolver.New(dotResolverConfig(v.DoT, roots, -1)); err != nil {
			return nil, false, err
		}
		st.dotAddr = v.DoT
	}
	return st.dot, true, nil
}

// openDoT opens the worker's kept-open DoT connection (or finds it open)
// with one question, the service's address, before a measured visit.
func (st *workerState) openDoT(v visit) *workerResult {
	roots, err := st.rootsFor(v.CAFile)
	if err != nil {
		return &workerResult{Err: err.Error()}
	}
	v.StubCache = false
	res, _, err := st.resolverFor(v, roots, -1)
	if err != nil {
		return &workerResult{Err: err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	host, _, _ := net.SplitHostPort(v.Addr)
	a, err := res.Lookup(ctx, host, dns.TypeA)
	if err != nil {
		return &workerResult{Err: fmt.Sprintf("bench: worker: opening the DoT connection to %s: %v", v.DoT, err)}
	}
	if a.Transport != string(dnsresolver.TLS) {
		return &workerResult{Err: fmt.Sprintf("bench: worker: the DoT question went over %s", a.Transport)}
	}
	return &workerResult{}
}
