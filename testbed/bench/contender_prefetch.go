package bench

// The prefetch contenders (issue 14): tls-prefetch, ztls-prefetch and
// ztls-turbo-prefetch are tls, ztls and ztls-turbo with prevalidate.Prefetch
// run before the click: Prime, unmeasured, prefetches the service into
// the worker's prevalidate.Cache (addresses, HTTPS record, Z-data verified and
// the key share and ECDH made, or the certificate by a truncated
// handshake), then the harness flushes the DNS caches as for every
// contender, and the measured visit, timed from the click as the others,
// takes everything from the cache: no DNS lookup, no certificate
// verification before its first flight (a visit that did is an error).
// ztls-turbo-prefetch's first response is then one round trip after the
// click; ztls-prefetch's two (TCP, then the ZTLS flight); tls-prefetch's
// three. TLS 1.3 with DNS prefetch only, what browsers do today, is tls
// in the stub scenario (the client's cache filled before the click).

import (
	"context"
	"fmt"
	"strings"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/prevalidate"
)

// prefetchSuffix ends the name of a prefetch contender.
const prefetchSuffix = "-prefetch"

func (e *turboContender) Prime(ctx context.Context, c *Client) error {
	if e.dot {
		// The kept-open DoT connection, opened (or kept) before the visit.
		if _, err := e.call(ctx, c, false, true); err != nil {
			return err
		}
	}
	if !e.prefetch {
		return nil
	}
	_, err := e.call(ctx, c, true, false)
	return err
}

// prefetchVisit prefetches addr with o into a new cache, kept for the
// next visit.
func (st *workerState) prefetchVisit(ctx context.Context, o dial.Options, addr string) *workerResult {
	st.cache = prevalidate.NewCache(prevalidate.CacheOptions{})
	o.Cache = st.cache
	p := prevalidate.Prefetch(ctx, o.Prevalidation(), addr)[0]
	if p.Err != nil {
		return &workerResult{Err: fmt.Sprintf("bench: prefetch: %v", p.Err)}
	}
	if len(p.Chain) == 0 {
		return &workerResult{Err: fmt.Sprintf("bench: prefetch of %s validated no chain (%s %s)", addr, p.ZDataReason, p.ChainError)}
	}
	return &workerResult{}
}

// cacheFor is the cache a visit uses: the prefetched one, else a new
// empty one (not the process default: every other visit is a first
// contact).
func (st *workerState) cacheFor(prefetched bool) *prevalidate.Cache {
	if prefetched && st.cache != nil {
		c := st.cache
		st.cache = nil // one visit per prefetch
		return c
	}
	return prevalidate.NewCache(prevalidate.CacheOptions{})
}

// checkPrefetched: a prefetch contender's visit took everything from the
// cache.
func checkPrefetched(name string, r dial.Report) error {
	if !strings.HasSuffix(name, prefetchSuffix) {
		return nil
	}
	if r.Prefetch != dial.PrefetchValidated {
		return fmt.Errorf("bench: %s: the visit did not use the prefetched entry (prefetch %q)", name, r.Prefetch)
	}
	return nil
}
