package dial

import (
	"crypto/x509"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// Options.NoBFE is part of an entry's policy: a prefetch that selected
// (and encapsulated for) a record with a BFE key does not serve a
// connection that refuses BFE, which then looks the service up itself.
func TestCacheNoBFEIsPolicy(t *testing.T) {
	cfg := &tls13.Config{ServerName: "www.ztls.test"}
	c := NewCache(CacheOptions{})
	now := time.Now()
	c.store(&service{host: "www.ztls.test", port: 443, fetched: now, expires: now.Add(time.Hour),
		v: &verdict{policy: policyOf(cfg, &Options{}), chains: map[string][][]*x509.Certificate{}}})
	if h := c.lookup("www.ztls.test", 443, policyOf(cfg, &Options{}), now); h == nil || !h.validated {
		t.Fatal("the entry does not serve its own policy")
	}
	if h := c.lookup("www.ztls.test", 443, policyOf(cfg, &Options{NoBFE: true}), now); h != nil && h.validated {
		t.Fatal("an entry prefetched with BFE serves a connection with NoBFE")
	}
}
