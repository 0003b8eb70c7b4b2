package dial

// The attempt's use of the prevalidate.Cache: what Prefetch fetched and
// validated replaces the lookup phase's answers and the verifications, as
// inputs that have already landed.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/zdata"
)

// Report.Prefetch values.
const (
	// PrefetchValidated: the addresses, the HTTPS record and the Z-data
	// verdict came from the cache, and the chains it verified were not
	// verified again.
	PrefetchValidated = "validated"
	// PrefetchDNS: the DNS answers came from the cache (an entry loaded
	// from a file, or validated under another certificate policy); the
	// Z-data and the certificate were verified as without a cache.
	PrefetchDNS = "dns"
)

// consultCache settles what the attempt takes from the cache: the entry
// for host:port, whose verified chains the handshake then takes
// (tls13.Config.VerifiedChains), and, with Options.OCSP, the OCSP check
// with the cache's answers.
func (a *attempt) consultCache(ctx context.Context) {
	pol := prevalidate.Policy{TLS: a.cfg, OCSP: a.o.OCSP, NoBFE: a.o.NoBFE}
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
		return zresult{err: err, at: at}
	}
	offer := h.ZData.Offer(h.Leaf)
	offer.Intermediates = h.Intermediates
	offer.Prepared = h.Prepared
	if err := a.cfg.VerifyZDataOffer(offer); err != nil {
		return zresult{err: &zdata.Error{Reason: zdata.ReasonUntrustedChain, Err: err}, at: at}
	}
	return zresult{offer: offer, at: at}
}

// replayAnswers is the lookup phase of an entry holding DNS answers but
// no verdict for this policy: its answers land, in the order the
// resolver lands them, on the same path as the resolver's (the Z-data
// is verified as without a cache).
func (a *attempt) replayAnswers(l *lookups) {
	s := &serviceLookup{out: l, host: a.host, port: a.port, pendingAddr: 2}
	if a.wantZ {
		s.z = a.newZDataCheck(l)
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
