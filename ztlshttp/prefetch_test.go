package ztlshttp

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/tls13"
)

// The net/http transport takes a prefetched service from its options'
// cache: the request leaves without a lookup or a chain verification.
func TestTransportUsesPrefetchedService(t *testing.T) {
	w, _, opts := setupWorld(t)
	opts.Cache = prevalidate.NewCache(prevalidate.CacheOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if p := prevalidate.Prefetch(ctx, opts.Prevalidation(), w.HostPort())[0]; p.Err != nil || p.ZData == nil {
		t.Fatalf("prefetch: %+v", p)
	}
	tr := NewTransport(opts)
	t.Cleanup(tr.CloseIdleConnections)
	v0 := tls13.ChainVerifications()
	body, rep := do(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "GET", "https://"+w.HostPort()+"/")
	if body == "" || rep.Mode != "ztls" || rep.Prefetch != dial.PrefetchValidated {
		t.Fatalf("mode %s (%s), prefetch %q", rep.Mode, rep.FallbackReason, rep.Prefetch)
	}
	if n := tls13.ChainVerifications() - v0; n != 0 {
		t.Fatalf("%d chain verifications with the service prefetched", n)
	}
}
