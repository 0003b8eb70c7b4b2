package bench

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	dnsresolver "github.com/ztls-project/ztls/dns/resolver"
)

// TestStubCacheHoldsEveryServiceAnswer: in the stub scenario the ztls
// dialer's cache, filled by one service lookup through the benchmark's
// resolver, answers the next one entirely, negative answers (no AAAA, no
// CERT, no HTTPS record) included: they carry the SOA end to end.
func TestStubCacheHoldsEveryServiceAnswer(t *testing.T) {
	w := newLoopbackWorld(t)
	_, cl := w.start(t, "ztls", true)
	res, err := dnsresolver.New(dnsresolver.Config{Servers: []string{cl.dns.resolver.server.String()},
		Transport: dnsresolver.UDP, CacheSize: 0, Timeout: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := res.LookupService(ctx, ServerName, int(cl.Port), nil); err != nil {
		t.Fatal(err)
	}
	n := 0
	_, err = res.LookupService(ctx, ServerName, int(cl.Port), func(a dnsresolver.Answer) {
		n++
		if !a.FromCache {
			t.Errorf("%s %s (rcode %d, %d records) not answered from the cache", dns.TypeToString[a.Qtype], a.Name, a.Rcode, len(a.RRs))
		}
	})
	if err != nil || n != 6 {
		t.Fatalf("second lookup: %v, %d answers", err, n)
	}
}
