package prevalidate

import (
	"context"
	"crypto/x509"
	"io"
	"net"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// What the tests (package prevalidate_test, which make connections with
// package dial) reach inside a Cache.

// SetNow moves the cache's clock (the refresher's).
func SetNow(c *Cache, now func() time.Time) { c.now = now }

// SetDialer has the cache open its TCP connections (truncated
// handshakes, OCSP) with dial.
func SetDialer(c *Cache, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	c.dialer = dial
}

// OCSPFetches is how many OCSP requests the cache sent.
func OCSPFetches(c *Cache) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ocspFetches
}

// KeyShares is the cache's key share pool.
func KeyShares(c *Cache) *tls13.KeySharePool { return c.keyShares }

// OCSPOutcome is one OCSP check's outcome.
type OCSPOutcome = ocspOutcome

// CheckOCSPChain runs one OCSP check on chain.
func CheckOCSPChain(ctx context.Context, c *Cache, pol OCSPPolicy, chain []*x509.Certificate, now time.Time) OCSPOutcome {
	return c.checkOCSP(ctx, pol, chain, now)
}

// StoreChains puts an entry for host:port with a verdict under p holding
// chains (by leaf DER), valid for an hour.
func StoreChains(c *Cache, host string, port int, p Policy, chains map[string][][]*x509.Certificate) {
	now := clock.Now()
	c.store(&service{host: host, port: port, fetched: now, expires: now.Add(time.Hour), v: &verdict{policy: p.key(), chains: chains}})
}

// ManualPrepare stops a Lookup that takes the prepared key share from
// making the next one (Refill makes it, off a benchmark's clock).
func ManualPrepare(c *Cache) { c.manualPrepare = true }

// Refill makes the next connection's key share and ECDH, and the keys of
// its ClientHello's key shares under cfg.
func Refill(c *Cache, host string, port int, cfg *tls13.Config) {
	c.fillKeyShares(cfg)
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.m[cacheKey(host, port)].Value.(*service).v
	if v.prepared == nil {
		v.prepared = c.prepare(v.rec)
	}
}

// SetPrepareRand makes the cache draw the randomness of its prepared key
// shares and encapsulations from r.
func SetPrepareRand(c *Cache, r io.Reader) { c.prepareRand = r }

// Encapsulations is how many encapsulations to v3 records the cache made
// ahead of connections.
func Encapsulations(c *Cache) int64 { return c.encapsulations.Load() }

// PreparedShare is the public key share prepared for host:port's next
// connection.
func PreparedShare(c *Cache, host string, port int) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[cacheKey(host, port)].Value.(*service).v.prepared.Public()
}

// StoreUnvalidated puts an entry for host:port without a verdict.
func StoreUnvalidated(c *Cache, host string, port int, expires time.Time) {
	c.store(&service{host: host, port: port, fetched: clock.Now(), expires: expires})
}

// EntryState is what the refresher's tests see of an entry.
type EntryState struct {
	Entry     any // the entry itself: a new one after a renewal
	Fetched   time.Time
	Used      bool // by a connection since it was fetched
	Renewable bool // the refresher knows how to fetch it again
	ZData     bool // it holds a validated Z-data record
}

// StateOf is host:port's entry's state.
func StateOf(c *Cache, host string, port int) EntryState {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.m[cacheKey(host, port)].Value.(*service)
	return EntryState{Entry: s, Fetched: s.fetched, Used: s.used, Renewable: s.opts != nil, ZData: s.v != nil && s.v.rec != nil}
}

// RefreshDue runs one round of the refresher.
func RefreshDue(ctx context.Context, c *Cache) { c.refreshDue(ctx) }
