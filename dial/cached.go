package dial

// The attempt's use of the prevalidate.Cache: before the lookups, the
// entry for host:port (whose answers the lookup phase then delivers as
// landed, lookup.go), the chains verified through the cache and the OCSP
// check with its answers; after the handshake, dropping an entry the
// server refused.

import (
	"context"

	"github.com/ztls-project/ztls/prevalidate"
)

// consultCache settles what the attempt takes from the cache: the entry
// for host:port, whose verified chains the handshake then takes
// (tls13.Config.VerifiedChains), and, with Options.OCSP, the OCSP check
// with the cache's answers.
func (a *attempt) consultCache(ctx context.Context) {
	pol := prevalidate.Policy{TLS: a.cfg, OCSP: a.o.OCSP, NoBFE: a.o.NoBFE, ZDataFrom: a.o.ZDataFrom, ZDataSvcParamKey: a.o.ZDataSvcParamKey}
	cloned := false
	clone := func() {
		if !cloned {
			a.cfg, cloned = a.cfg.Clone(), true
		}
	}
	if a.o.OCSP != prevalidate.OCSPOff {
		clone()
		a.cfg.VerifyPeerCertificate = a.cache.CheckOCSP(ctx, a.o.OCSP, a.now, a.cfg.VerifyPeerCertificate)
	}
	if a.cfg.ChainCache == nil && !a.cfg.InsecureSkipVerify {
		clone()
		a.cfg.ChainCache = a.cache.ChainCache()
	}
	h := a.cache.Lookup(a.host, a.port, pol, a.now())
	if h == nil || (!h.Validated && len(h.Answers) == 0 && a.o.Resolver != nil) {
		return // nothing, or addresses only where the resolver finds more
	}
	a.hit = h
	if !h.Validated {
		a.r.Prefetch = PrefetchDNS
		a.step("prefetched_dns")
		return
	}
	a.r.Prefetch = PrefetchValidated
	a.step("prefetched")
	if len(h.Chains) > 0 {
		clone()
		a.cfg.VerifiedChains = h.VerifiedChains
	}
	if pool := a.cache.KeySharePool(a.cfg); pool != nil {
		clone()
		a.cfg.KeySharePool = pool // the keys Prefetch made
	}
}

// dropCached forgets the entry whose Z-data the server refused (rotated
// away since the prefetch, or a server that lost its keys): the next
// connection looks it up again. (A server that aborts on the ztls
// ClientHello is Memory's business: the entry stays, its DNS answers
// and chains are good.)
func (a *attempt) dropCached() {
	if a.hit == nil || a.r.PrefetchDropped {
		return
	}
	a.cache.Forget(a.host, a.port)
	a.r.PrefetchDropped = true
	a.step("prefetched_entry_dropped")
}
