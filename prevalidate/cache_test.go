package prevalidate_test

import (
	"bytes"
	"crypto/x509"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
)

// Options.NoBFE is part of an entry's policy: a prefetch that selected
// (and encapsulated for) a record with a BFE key does not serve a
// connection that refuses BFE, which then looks the service up itself.
func TestCacheNoBFEIsPolicy(t *testing.T) {
	cfg := &tls13.Config{ServerName: "www.ztls.test"}
	c := prevalidate.NewCache(prevalidate.CacheOptions{})
	now := clock.Now()
	prevalidate.StoreChains(c, "www.ztls.test", 443, prevalidate.Policy{TLS: cfg}, map[string][][]*x509.Certificate{})
	if h := c.Lookup("www.ztls.test", 443, prevalidate.Policy{TLS: cfg}, now); h == nil || !h.Validated {
		t.Fatal("the entry does not serve its own policy")
	}
	if h := c.Lookup("www.ztls.test", 443, prevalidate.Policy{TLS: cfg, NoBFE: true}, now); h != nil && h.Validated {
		t.Fatal("an entry prefetched with BFE serves a connection with NoBFE")
	}
}

// Connections through one Cache share the chains they verified
// (tls13.ChainCache): without any prefetch, the second connection to a
// server verifies no chain, over TLS 1.3 and over ZTLS; after Clear the
// next one verifies again.
func TestConnectionsShareVerifiedChains(t *testing.T) {
	eachChainWorld(t, func(t *testing.T, noZData bool, w *lab.World, d *dnsCounter, cache *prevalidate.Cache) {
		var verified [3]uint64
		for i := range verified {
			if i == 2 {
				if err := cache.Clear(); err != nil {
					t.Fatal(err)
				}
			}
			r, _, v, err := connectCounted(t, w, cache, d, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r.Report.Prefetch != "" || (r.Report.Mode == "ztls") == noZData {
				t.Fatalf("connection %d: prefetch %q, mode %s", i+1, r.Report.Prefetch, r.Report.Mode)
			}
			if st := r.Conn.ConnectionState(); len(st.VerifiedChains) == 0 {
				t.Fatalf("connection %d: no verified chain", i+1)
			}
			if want := map[bool]string{true: tls13.ChainCached, false: tls13.ChainVerified}[i == 1]; r.Report.TLS.Chain != want {
				t.Fatalf("connection %d: report says the chain is %q, want %q", i+1, r.Report.TLS.Chain, want)
			}
			var text bytes.Buffer
			r.Report.WriteText(&text)
			if strings.Contains(text.String(), "from the chain cache") != (i == 1) {
				t.Fatalf("connection %d: report text\n%s", i+1, text.String())
			}
			verified[i] = v
		}
		if verified[0] == 0 || verified[1] != 0 || verified[2] == 0 {
			t.Fatalf("chain verifications per connection %v: want some, none (same cache), some (after Clear)", verified)
		}
	})
}

// eachChainWorld runs f, as a subtest, against a world without Z-data
// (TLS 1.3) and one with (ZTLS), each with a DNS counter and a new Cache.
func eachChainWorld(t *testing.T, f func(t *testing.T, noZData bool, w *lab.World, d *dnsCounter, cache *prevalidate.Cache)) {
	for _, noZData := range []bool{true, false} {
		t.Run(map[bool]string{true: "tls", false: "ztls"}[noZData], func(t *testing.T) {
			w := startWorld(t, lab.Options{NoZData: noZData})
			f(t, noZData, w, countDNS(t, w), prevalidate.NewCache(prevalidate.CacheOptions{}))
		})
	}
}

// The Cache's shared chains serve only the name and roots they were
// verified for: after a good connection, one through the same Cache
// that names another server (ServerName) or trusts other roots fails
// as it would without the Cache, over TLS 1.3 and ZTLS.
func TestSharedChainsRefuseOtherNameAndRoots(t *testing.T) {
	eachChainWorld(t, func(t *testing.T, _ bool, w *lab.World, d *dnsCounter, cache *prevalidate.Cache) {
		if _, _, _, err := connectCounted(t, w, cache, d, nil); err != nil {
			t.Fatal(err)
		}
		for name, mutate := range map[string]func(*dial.Options){
			"other name": func(o *dial.Options) { o.TLS.ServerName = "evil.test" },
			"other roots": func(o *dial.Options) {
				o.TLS.RootCAs = x509.NewCertPool() // trusts nothing
			},
		} {
			r, _, _, err := connectCounted(t, w, cache, d, func(o *dial.Options) {
				o.TLS = o.TLS.Clone()
				mutate(o)
			})
			if err == nil {
				t.Fatalf("%s: connected (chain %q)", name, r.Report.TLS.Chain)
			}
		}
	})
}
