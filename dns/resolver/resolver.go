package resolver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
)

var (
	// ErrClosed is returned by queries on a closed Resolver.
	ErrClosed = errors.New("resolver: closed")
	// errTruncated asks the caller to retry a UDP query over TCP.
	errTruncated = errors.New("resolver: truncated reply")
)

// Answer is the outcome of one question.
type Answer struct {
	Qtype uint16 // the question's type, e.g. dns.TypeA
	Name  string // the question's name, fully qualified
	// RRs are the answer records for Name and the CNAME chain it leads
	// to; records about other names are removed.
	RRs   []dns.RR
	Rcode int   // the reply's RCODE (dns.RcodeSuccess, dns.RcodeNameError, ...)
	Err   error // set when no reply arrived within the time budget
	// Took is the wall time from the start of the lookup to its answer.
	Took      time.Duration
	FromCache bool
	// Transport is how the reply was fetched: "udp", "tcp" or "tls"
	// ("tcp" also when a truncated UDP reply was retried over TCP).
	Transport string
	// Reply is the whole reply (nil when Err is set), with its TTLs aged
	// when it comes from the cache.
	Reply *dns.Msg
}

// Resolver is a stub resolver speaking UDP, TCP or DNS over TLS to its
// upstream servers, with a cache. It is safe for concurrent use; its zero
// value is not usable: build one with New.
type Resolver struct {
	cfg       Config
	servers   []string
	udpAddrs  []*net.UDPAddr // per server, for the UDP transport
	tlsConfig *tls.Config
	cache     *cache

	mu      sync.Mutex
	streams map[string]*streamUpstream // key: transport + " " + server
	closed  bool
	bg      sync.WaitGroup // prefetches in flight
}

// New checks cfg and returns a Resolver. It opens no connection: stream
// connections are dialled on first use.
func New(cfg Config) (*Resolver, error) {
	if len(cfg.Servers) == 0 {
		return nil, errors.New("resolver: no servers configured")
	}
	switch cfg.Transport {
	case "":
		cfg.Transport = UDP
	case UDP, TCP, TLS:
	default:
		return nil, fmt.Errorf("resolver: unknown transport %q (want udp, tcp or tls)", cfg.Transport)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.ReconnectBackoff <= 0 {
		cfg.ReconnectBackoff = DefaultReconnectBackoff
	}
	if cfg.MaxReconnectBackoff <= 0 {
		cfg.MaxReconnectBackoff = DefaultMaxReconnectBackoff
	}
	cfg.MaxReconnectBackoff = max(cfg.MaxReconnectBackoff, cfg.ReconnectBackoff)
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	r := &Resolver{cfg: cfg, streams: make(map[string]*streamUpstream)}
	for _, s := range cfg.Servers {
		addr, err := normalizeServer(s, cfg.Transport)
		if err != nil {
			return nil, err
		}
		r.servers = append(r.servers, addr)
		if cfg.Transport == UDP {
			ua, err := net.ResolveUDPAddr("udp", addr)
			if err != nil {
				return nil, fmt.Errorf("resolver: server %q: %w", s, err)
			}
			r.udpAddrs = append(r.udpAddrs, ua)
		}
	}
	if cfg.Transport == TLS && cfg.Dialer == nil {
		if cfg.TLSConfig != nil {
			r.tlsConfig = cfg.TLSConfig.Clone()
		} else {
			r.tlsConfig = &tls.Config{}
		}
		if r.tlsConfig.ClientSessionCache == nil {
			r.tlsConfig.ClientSessionCache = tls.NewLRUClientSessionCache(len(r.servers) * 4)
		}
		if r.tlsConfig.MinVersion == 0 {
			r.tlsConfig.MinVersion = tls.VersionTLS12
		}
	}
	switch {
	case cfg.CacheSize == 0:
		r.cache = newCache(DefaultCacheSize, cfg.Now)
	case cfg.CacheSize > 0:
		r.cache = newCache(cfg.CacheSize, cfg.Now)
	}
	return r, nil
}

// Close closes the stream connections and waits for background prefetches.
// Queries after Close fail with ErrClosed.
func (r *Resolver) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	streams := r.streams
	r.streams = nil
	r.mu.Unlock()
	for _, s := range streams {
		s.close()
	}
	r.bg.Wait()
	return nil
}

// Exchange answers q, which must hold exactly one question, from the cache
// or from an upstream server. The reply carries q's ID; the ID on the wire
// is random. The returned message may be modified by the caller.
func (r *Resolver) Exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	reply, _, _, err := r.exchange(ctx, q)
	return reply, err
}

// Lookup asks for name's records of type qtype (recursion desired).
// A reply with an error RCODE such as NXDOMAIN is an answer, not an error:
// the error is set only when no usable reply arrived. The Answer is
// non-nil either way.
func (r *Resolver) Lookup(ctx context.Context, name string, qtype uint16) (*Answer, error) {
	start := time.Now() // real time: elapsed
	fqdn := dns.Fqdn(name)
	a := &Answer{Qtype: qtype, Name: fqdn}
	if _, ok := dns.IsDomainName(fqdn); !ok || name == "" {
		a.Err = fmt.Errorf("resolver: bad domain name %q", name)
		return a, a.Err
	}
	q := new(dns.Msg)
	q.SetQuestion(fqdn, qtype)
	reply, transport, fromCache, err := r.exchange(ctx, q)
	a.Took = time.Since(start)
	a.Transport = transport
	a.FromCache = fromCache
	if err != nil {
		a.Err = err
		return a, err
	}
	a.Rcode = reply.Rcode
	a.RRs = reply.Answer
	a.Reply = reply
	return a, nil
}

func (r *Resolver) exchange(ctx context.Context, q *dns.Msg) (*dns.Msg, string, bool, error) {
	if q == nil || len(q.Question) != 1 {
		return nil, "", false, errors.New("resolver: query must hold exactly one question")
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return nil, "", false, ErrClosed
	}
	key := keyOf(q.Question[0])
	if r.cache != nil {
		if hit, ok := r.cache.get(key); ok {
			if hit.prefetch {
				r.startPrefetch(key, q)
			}
			hit.msg.Id = q.Id
			return hit.msg, hit.transport, true, nil
		}
	}
	var (
		reply     *dns.Msg
		transport string
		err       error
	)
	r.queryBatch(ctx, []*dns.Msg{q}, func(_ int, m *dns.Msg, tr string, e error) {
		reply, transport, err = m, tr, e
	})
	if err != nil {
		return nil, transport, false, err
	}
	if r.cache != nil {
		r.cache.put(key, reply, transport)
	}
	reply.Id = q.Id
	return reply, transport, false, nil
}

// startPrefetch refreshes a cache entry in the background.
func (r *Resolver) startPrefetch(key cacheKey, q *dns.Msg) {
	if !r.cfg.Prefetch {
		r.cache.prefetchDone(key)
		return
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.bg.Add(1)
	r.mu.Unlock()
	q = q.Copy()
	go func() {
		defer r.bg.Done()
		defer r.cache.prefetchDone(key)
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		defer cancel()
		r.queryBatch(ctx, []*dns.Msg{q}, func(_ int, reply *dns.Msg, transport string, err error) {
			if err == nil {
				r.cache.put(key, reply, transport)
			}
		})
	}()
}

// stream returns the kept-open connection manager for a server.
func (r *Resolver) stream(t Transport, server string) (*streamUpstream, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, ErrClosed
	}
	key := string(t) + " " + server
	if s, ok := r.streams[key]; ok {
		return s, nil
	}
	s := &streamUpstream{
		addr:       server,
		transport:  t,
		padding:    t == TLS,
		idle:       r.cfg.IdleTimeout,
		dial:       r.dialFunc(t, server),
		backoff:    r.cfg.ReconnectBackoff,
		maxBackoff: r.cfg.MaxReconnectBackoff,
		closedCh:   make(chan struct{}),
	}
	r.streams[key] = s
	return s, nil
}

func (r *Resolver) dialFunc(t Transport, server string) func(context.Context) (net.Conn, error) {
	if r.cfg.Dialer != nil && t == r.cfg.Transport {
		d := r.cfg.Dialer
		return func(ctx context.Context) (net.Conn, error) {
			return d.DialContext(ctx, "tcp", server)
		}
	}
	var cfg *tls.Config
	if t == TLS {
		cfg = r.tlsConfig
		if cfg.ServerName == "" {
			cfg = cfg.Clone() // shares the session cache
			host, _, _ := net.SplitHostPort(server)
			cfg.ServerName = host
		}
	}
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", server)
		if err != nil {
			return nil, err
		}
		c = withQuickAck(c)
		if cfg == nil {
			return c, nil
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}
}
