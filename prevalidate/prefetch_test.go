package prevalidate_test

// Prefetch and the cache of prevalidated services (issue 14): a
// prefetched entry is used (no DNS query at the server, no chain
// verification, from counters), an expired or revoked one is not, a
// Z-data record rotated after the prefetch falls back cleanly, and the
// precomputed key share serves one connection only.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"io"
	"math/big"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// dnsCounter forwards queries to the world's authority and counts them:
// what the server side sees of a client's lookups. It takes UDP and, on
// the same port, TCP, where a client asks again what came back truncated
// (the authority caps UDP answers to a client without a cookie).
type dnsCounter struct {
	addr string
	n    atomic.Int64
}

func countDNS(t *testing.T, w *lab.World) *dnsCounter {
	t.Helper()
	pc, ln := listenBoth(t)
	t.Cleanup(func() { pc.Close(); ln.Close() })
	d := &dnsCounter{addr: pc.LocalAddr().String()}
	go d.forwardUDP(pc, w.DNSAddr)
	go d.forwardTCP(ln, w.DNSAddr)
	return d
}

// listenBoth listens on UDP and TCP at one loopback port: a free UDP
// port whose TCP twin may be taken, so it tries a few.
func listenBoth(t *testing.T) (net.PacketConn, net.Listener) {
	t.Helper()
	var err error
	for range 20 {
		var pc net.PacketConn
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			break
		}
		var ln net.Listener
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			return pc, ln
		}
		pc.Close()
	}
	t.Fatal(err)
	return nil, nil
}

func (d *dnsCounter) forwardUDP(pc net.PacketConn, upstream string) {
	up, err := net.ResolveUDPAddr("udp", upstream)
	if err != nil {
		return
	}
	buf := make([]byte, 65535)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		d.n.Add(1)
		q := bytes.Clone(buf[:n])
		go func() {
			c, err := net.DialUDP("udp", nil, up)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write(q)
			reply := make([]byte, 65535)
			if n, err := c.Read(reply); err == nil {
				pc.WriteTo(reply[:n], from)
			}
		}()
	}
}

// forwardTCP relays each connection to upstream, counting the
// length-prefixed queries on the way (RFC 1035, Section 4.2.2).
func (d *dnsCounter) forwardTCP(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
			if err != nil {
				return
			}
			defer up.Close()
			go io.Copy(c, up)
			var n [2]byte
			for {
				if _, err := io.ReadFull(c, n[:]); err != nil {
					return
				}
				d.n.Add(1)
				if _, err := up.Write(n[:]); err != nil {
					return
				}
				if _, err := io.CopyN(up, c, int64(binary.BigEndian.Uint16(n[:]))); err != nil {
					return
				}
			}
		}()
	}
}

// resolver is a new resolver (an empty resolver cache) asking through d.
func (d *dnsCounter) resolver(t *testing.T) *resolver.Resolver {
	t.Helper()
	r, err := resolver.New(resolver.Config{Servers: []string{d.addr}, Transport: resolver.UDP, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func prefetch(t *testing.T, o dial.Options, targets ...string) []*prevalidate.Prefetched {
	t.Helper()
	ps := prevalidate.Prefetch(ctxT(t), o.Prevalidation(), targets...)
	for _, p := range ps {
		if p.Err != nil {
			t.Fatalf("prefetch %s: %v", p.Target, p.Err)
		}
	}
	return ps
}

// prefetchWorld prefetches the world's service into a new cache through
// a DNS counter.
func prefetchWorld(t *testing.T, w *lab.World, mutate func(*dial.Options)) (*prevalidate.Cache, *dnsCounter, *prevalidate.Prefetched) {
	t.Helper()
	cache := prevalidate.NewCache(prevalidate.CacheOptions{})
	t.Cleanup(func() { cache.Close() })
	d := countDNS(t, w)
	o := dial.Options{TLS: w.ClientTLS(), Resolver: d.resolver(t), Cache: cache}
	if mutate != nil {
		mutate(&o)
	}
	p := prefetch(t, o, w.HostPort())[0]
	if d.n.Load() == 0 {
		t.Fatal("the prefetch asked the DNS nothing")
	}
	return cache, d, p
}

// connectCounted connects with the cache and a fresh resolver through d,
// and returns the DNS queries and chain verifications it made.
func connectCounted(t *testing.T, w *lab.World, cache *prevalidate.Cache, d *dnsCounter, mutate func(*dial.Options)) (r *dial.Result, queries int64, verifications uint64, err error) {
	t.Helper()
	res := d.resolver(t)
	q0, v0 := d.n.Load(), tls13.ChainVerifications()
	r, err = connect(t, w, func(o *dial.Options) {
		o.Cache, o.Resolver = cache, res
		if mutate != nil {
			mutate(o)
		}
	})
	return r, d.n.Load() - q0, tls13.ChainVerifications() - v0, err
}

func TestPrefetchedZTLSConnectionAsksNothing(t *testing.T) {
	for _, turbo := range []bool{false, true} {
		name := map[bool]string{false: "tcp", true: "turbo"}[turbo]
		t.Run(name, func(t *testing.T) {
			w := startWorld(t, lab.Options{Turbo: turbo})
			cache, d, p := prefetchWorld(t, w, nil)
			if p.ZData == nil || p.ChainFrom != "zdata" || !p.Precomputed || !p.KeyShares || p.ServerContacted || len(p.Chain) != 2 {
				t.Fatalf("prefetched %+v", p)
			}
			taken, inline := prevalidate.KeyShares(cache).Taken(), prevalidate.KeyShares(cache).GeneratedInline()
			if turbo && p.TurboPort != w.Port {
				t.Fatalf("TurboTLS port %d, want %d", p.TurboPort, w.Port)
			}
			if !p.Expires.After(clock.Now()) || p.ExpiresBy == "" || p.Expires.After(p.ZData.NotAfter) {
				t.Fatalf("expires %v by %q (Z-data not after %v)", p.Expires, p.ExpiresBy, p.ZData.NotAfter)
			}
			r, queries, verifications, err := connectCounted(t, w, cache, d, func(o *dial.Options) {
				o.Turbo, o.TurboWait = turbo, 5*time.Second
			})
			if err != nil {
				t.Fatal(err)
			}
			rep := r.Report
			if rep.Mode != "ztls" || !rep.AnswerInFirstFlight || rep.Prefetch != dial.PrefetchValidated {
				t.Fatalf("mode %s (%s), answer in first flight %v, prefetch %q", rep.Mode, rep.FallbackReason, rep.AnswerInFirstFlight, rep.Prefetch)
			}
			if turbo && rep.Transport != "turbo" {
				t.Fatalf("transport %s (%s)", rep.Transport, rep.TurboFallback)
			}
			if queries != 0 || verifications != 0 || rep.TLS.Chain != tls13.ChainPrevalidated {
				t.Fatalf("the prefetched connection made %d DNS queries and %d chain verifications (chain %q)", queries, verifications, rep.TLS.Chain)
			}
			// Its ClientHello's key shares came from the keys Prefetch
			// made: the X25519MLKEM768 share's two (the x25519 share is
			// the Z-data one, prepared with its ECDH).
			if got, made := prevalidate.KeyShares(cache).Taken()-taken, prevalidate.KeyShares(cache).GeneratedInline()-inline; got != 2 || made != 0 {
				t.Fatalf("key shares' keys: %d from the prefetch's pool, %d made at connection time; want 2 and 0", got, made)
			}
			if st := r.Conn.ConnectionState(); len(st.VerifiedChains) == 0 || !st.PeerCertificates[0].Equal(w.Service.Leaf()) {
				t.Fatal("no verified chain reported for the prefetched leaf")
			}
			if !hasStep(rep, "prefetched") {
				t.Fatalf("trace lacks prefetched: %+v", rep.Trace)
			}

			// Without the cache, the same connection asks and verifies.
			_, queries, verifications, err = connectCounted(t, w, prevalidate.NewCache(prevalidate.CacheOptions{}), d, func(o *dial.Options) {
				o.Turbo, o.TurboWait = turbo, 5*time.Second
			})
			if err != nil || queries == 0 || verifications == 0 {
				t.Fatalf("without the cache: %v, %d queries, %d verifications", err, queries, verifications)
			}
		})
	}
}

// A host without Z-data: its certificate by a truncated handshake, then
// TLS 1.3 with neither DNS nor a chain verification.
func TestPrefetchedTLSConnectionAsksNothing(t *testing.T) {
	w := startWorld(t, lab.Options{NoZData: true})
	cache, d, p := prefetchWorld(t, w, nil)
	if p.ZData != nil || !strings.HasPrefix(p.ZDataReason, string(zdata.ReasonNoZData)) || p.ChainFrom != "handshake" || !p.ServerContacted {
		t.Fatalf("prefetched %+v", p)
	}
	r, queries, verifications, err := connectCounted(t, w, cache, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "tls" || r.Report.Prefetch != dial.PrefetchValidated || queries != 0 || verifications != 0 || r.Report.TLS.Chain != tls13.ChainPrevalidated {
		t.Fatalf("mode %s, prefetch %q, %d DNS queries, %d chain verifications, chain %q", r.Report.Mode, r.Report.Prefetch, queries, verifications, r.Report.TLS.Chain)
	}
}

// An entry past its expiry is dropped, and the connection looks up and
// verifies as without a cache.
func TestPrefetchedEntryExpired(t *testing.T) {
	w := startWorld(t, lab.Options{})
	cache, d, p := prefetchWorld(t, w, nil)
	later := p.Expires.Add(time.Second)
	r, queries, verifications, err := connectCounted(t, w, cache, d, func(o *dial.Options) {
		o.Now = func() time.Time { return later }
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Prefetch != "" || queries == 0 || verifications == 0 || cache.Len() != 0 {
		t.Fatalf("expired entry: prefetch %q, %d queries, %d verifications, %d entries left", r.Report.Prefetch, queries, verifications, cache.Len())
	}
}

// A revoked certificate: an entry prefetched before the revocation is not
// trusted under the new CRL (the verdict was for the old policy), and an
// entry prefetched after it holds no verified chain.
func TestPrefetchedEntryRevoked(t *testing.T) {
	w := startWorld(t, lab.Options{})
	checker := func(revoked ...*x509.Certificate) *revocation.Checker {
		var serials = make([]*big.Int, 0, len(revoked))
		for _, c := range revoked {
			serials = append(serials, c.SerialNumber)
		}
		der, err := w.CRL(serials...)
		if err != nil {
			t.Fatal(err)
		}
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			t.Fatal(err)
		}
		return revocation.New(crl)
	}
	good, revoked := checker(), checker(w.Cert.Leaf)
	withCRL := func(c *revocation.Checker) func(*dial.Options) {
		return func(o *dial.Options) { o.TLS = w.ClientTLS(); o.TLS.Revocation = c }
	}
	cache, d, p := prefetchWorld(t, w, withCRL(good))
	if p.ZData == nil || p.ExpiresBy == "" {
		t.Fatalf("prefetched %+v", p)
	}
	_, _, verifications, err := connectCounted(t, w, cache, d, withCRL(revoked))
	if !errors.Is(err, revocation.ErrRevoked) || verifications == 0 {
		t.Fatalf("revoked since the prefetch: %v, %d verifications", err, verifications)
	}

	cache, d, p = prefetchWorld(t, w, withCRL(revoked))
	if p.ZData != nil || !strings.HasPrefix(p.ZDataReason, string(zdata.ReasonRevoked)) || len(p.Chain) != 0 {
		t.Fatalf("prefetched a revoked leaf: %+v", p)
	}
	r, queries, verifications, err := connectCounted(t, w, cache, d, withCRL(revoked))
	if !errors.Is(err, revocation.ErrRevoked) || verifications == 0 || queries != 0 {
		t.Fatalf("revoked at the prefetch: %v, %d verifications, %d queries", err, verifications, queries)
	}
	if r.Report.Prefetch != dial.PrefetchValidated || r.Report.EarlyData.Offered {
		t.Fatalf("report %+v", r.Report)
	}
}

// The server rotates its Z-data after the prefetch and no longer holds
// the prefetched key: it rejects the early data, the request is resent
// over TLS 1.3, the entry is dropped, and the next connection looks the
// new record up and uses ZTLS.
func TestPrefetchedZDataRotatedAway(t *testing.T) {
	w := startWorld(t, lab.Options{})
	cache, d, p := prefetchWorld(t, w, nil)
	now := clock.Now()
	k, err := w.Service.Issue(now, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Service.Keyring.Add(k)
	w.Service.Keyring.Remove(p.ZData.ID)
	recs := []*zdata.Record{k.Record}
	if err := w.Publish(w.Host, w.Port, zdata.ZoneRRs(recs, w.Cert.Chain[0], nil, zdata.TTLFor(recs, now, 5*time.Minute))); err != nil {
		t.Fatal(err)
	}
	r, queries, _, err := connectCounted(t, w, cache, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Mode != "tls" || rep.FallbackReason != dial.ReasonRejected || !rep.PrefetchDropped || queries != 0 || cache.Len() != 0 {
		t.Fatalf("rotated away: mode %s (%s), dropped %v, %d queries, %d entries", rep.Mode, rep.FallbackReason, rep.PrefetchDropped, queries, cache.Len())
	}
	r, queries, _, err = connectCounted(t, w, cache, d, nil)
	if err != nil || r.Report.Mode != "ztls" || r.Report.Prefetch != "" || queries == 0 {
		t.Fatalf("after the drop: %v, mode %s (%s), prefetch %q, %d queries", err, r.Report.Mode, r.Report.FallbackReason, r.Report.Prefetch, queries)
	}
}

// helloRecorder is a TCP proxy that keeps the first bytes each
// connection sends (its ClientHello).
type helloRecorder struct {
	mu     sync.Mutex
	hellos [][]byte
}

// recordHellos listens on listen and forwards to target.
func recordHellos(t *testing.T, listen, target string) *helloRecorder {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", listen, err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &helloRecorder{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				buf := make([]byte, 16<<10)
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				n, _ := c.Read(buf)
				c.SetReadDeadline(time.Time{})
				h.mu.Lock()
				h.hellos = append(h.hellos, bytes.Clone(buf[:n]))
				h.mu.Unlock()
				up.Write(buf[:n])
				go func() { ioCopy(up, c) }()
				ioCopy(c, up)
			}()
		}
	}()
	return h
}

func ioCopy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if tc, ok := dst.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			return
		}
	}
}

// x25519Share returns the x25519 key_exchange of a ClientHello record.
func x25519Share(t *testing.T, rec []byte) []byte {
	t.Helper()
	b := rec
	take := func(n int) []byte {
		if len(b) < n {
			t.Fatalf("ClientHello cut short")
		}
		v := b[:n]
		b = b[n:]
		return v
	}
	u16 := func() int { v := take(2); return int(v[0])<<8 | int(v[1]) }
	take(5 + 4 + 2 + 32)  // record header, handshake header, legacy_version, random
	take(int(take(1)[0])) // legacy_session_id
	take(u16())           // cipher_suites
	take(int(take(1)[0])) // legacy_compression_methods
	exts := take(u16())   // extensions
	for b = exts; len(b) > 0; {
		typ, body := u16(), []byte(nil)
		body = take(u16())
		if typ != 51 { // key_share (RFC 8446, Section 4.2.8)
			continue
		}
		b = body
		shares := take(u16())
		for b = shares; len(b) > 0; {
			group, kx := u16(), take(u16())
			if group == int(tls13.X25519) {
				return kx
			}
		}
	}
	t.Fatal("no x25519 key share in the ClientHello")
	return nil
}

// The key share and Z-data ECDH made at prefetch time serve exactly one
// connection: the first sends that share, the second another. (And a
// Z-data prefetch costs the web server nothing: no connection reaches it.)
func TestPrefetchedKeyShareUsedOnce(t *testing.T) {
	w := startWorld(t, lab.Options{HostIP: "127.0.0.2"})
	rec := recordHellos(t, net.JoinHostPort("127.0.0.2", strings.Split(w.ServerAddr, ":")[1]), w.ServerAddr)
	cache, d, _ := prefetchWorld(t, w, nil)
	rec.mu.Lock()
	contacted := len(rec.hellos)
	rec.mu.Unlock()
	if contacted != 0 {
		t.Fatal("prefetching Z-data contacted the web server")
	}
	prepared := prevalidate.PreparedShare(cache, w.Host, w.Port)
	for i := 0; i < 2; i++ {
		r, _, _, err := connectCounted(t, w, cache, d, nil)
		if err != nil || r.Report.Mode != "ztls" || r.Report.Prefetch != dial.PrefetchValidated {
			t.Fatalf("connection %d: %v %+v", i+1, err, r)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.hellos) != 2 {
		t.Fatalf("%d connections recorded", len(rec.hellos))
	}
	first, second := x25519Share(t, rec.hellos[0]), x25519Share(t, rec.hellos[1])
	if !bytes.Equal(first, prepared) {
		t.Fatal("the first connection did not send the key share made at prefetch time")
	}
	if bytes.Equal(first, second) {
		t.Fatal("the second connection reused the first one's key share")
	}
}

// Clear forgets the entries and the file; a cache opened from the file
// has the DNS answers but no verdict: its connection skips the lookups
// and verifies.
func TestCacheFileKeepsAnswersNotVerdicts(t *testing.T) {
	w := startWorld(t, lab.Options{})
	path := t.TempDir() + "/prefetch.json"
	cache, d, _ := prefetchWorld(t, w, func(o *dial.Options) { o.Cache = prevalidate.OpenCache(prevalidate.CacheOptions{Path: path}) })
	_ = cache
	loaded := prevalidate.OpenCache(prevalidate.CacheOptions{Path: path})
	if loaded.Len() != 1 {
		t.Fatalf("%d entries loaded", loaded.Len())
	}
	r, queries, verifications, err := connectCounted(t, w, loaded, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "ztls" || r.Report.Prefetch != dial.PrefetchDNS || queries != 0 || verifications == 0 {
		t.Fatalf("loaded entry: mode %s (%s), prefetch %q, %d queries, %d verifications", r.Report.Mode, r.Report.FallbackReason, r.Report.Prefetch, queries, verifications)
	}
	if err := loaded.Clear(); err != nil || loaded.Len() != 0 || prevalidate.OpenCache(prevalidate.CacheOptions{Path: path}).Len() != 0 {
		t.Fatalf("Clear: %v", err)
	}
}

// The cache is bounded: the least recently used entry goes.
func TestCacheBounded(t *testing.T) {
	c := prevalidate.NewCache(prevalidate.CacheOptions{MaxEntries: 2})
	exp := clock.Now().Add(time.Hour)
	for _, h := range []string{"a.test", "b.test"} {
		prevalidate.StoreUnvalidated(c, h, 443, exp)
	}
	var pol prevalidate.Policy
	if c.Lookup("a.test", 443, pol, clock.Now()) == nil {
		t.Fatal("a.test missing")
	}
	prevalidate.StoreUnvalidated(c, "c.test", 443, exp)
	if c.Len() != 2 || c.Lookup("b.test", 443, pol, clock.Now()) != nil || c.Lookup("A.TEST.", 443, pol, clock.Now()) == nil {
		t.Fatal("the least recently used entry was not the one evicted")
	}
}

// The refresher renews an entry that was used once it is in the last
// tenth of its life, and leaves one nobody used to expire.
func TestCacheRefreshesUsedEntries(t *testing.T) {
	w := startWorld(t, lab.Options{})
	cache, d, p := prefetchWorld(t, w, nil)
	entry := func() prevalidate.EntryState { return prevalidate.StateOf(cache, w.Host, w.Port) }
	if _, _, _, err := connectCounted(t, w, cache, d, nil); err != nil {
		t.Fatal(err)
	}
	used := entry()
	life := p.Expires.Sub(used.Fetched)
	prevalidate.SetNow(cache, func() time.Time { return p.Expires.Add(-life / 20) })
	prevalidate.RefreshDue(ctxT(t), cache)
	renewed := entry()
	if renewed.Entry == used.Entry || renewed.Used || !renewed.Renewable || !renewed.ZData {
		t.Fatal("the used entry was not renewed")
	}
	prevalidate.RefreshDue(ctxT(t), cache)
	if entry().Entry != renewed.Entry {
		t.Fatal("an entry nobody used was renewed")
	}
}

// A server that aborts on the ztls ClientHello (crypto/tls) is Memory's
// business: the retry without ztls takes the prefetched chain, and the
// entry stays.
func TestPrefetchedEntryKeptWhenServerAbortsOnZTLS(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	cert, err := tls.LoadX509KeyPair(w.CertFile, w.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	testproc.ServeGoTLS(t, w.ServerAddr, &tls.Config{Certificates: []tls.Certificate{cert}}, func(c *tls.Conn) {
		if _, err := c.Read(make([]byte, 100)); err == nil {
			c.Write([]byte("hello"))
		}
	})
	cache, d, _ := prefetchWorld(t, w, nil)
	r, queries, verifications, err := connectCounted(t, w, cache, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.FallbackReason != dial.ReasonServerAborted || r.Report.Prefetch != dial.PrefetchValidated || r.Report.PrefetchDropped ||
		cache.Len() != 1 || queries != 0 || verifications != 0 {
		t.Fatalf("abort on ztls: %q, prefetch %q dropped %v, %d entries, %d queries, %d verifications", r.Report.FallbackReason,
			r.Report.Prefetch, r.Report.PrefetchDropped, cache.Len(), queries, verifications)
	}
}
