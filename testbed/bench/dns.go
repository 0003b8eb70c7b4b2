package bench

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/testbed/hosts"
)

// The benchmark's DNS: an authoritative server on the "dns" host, a caching
// resolver on the "resolver" host and a stub with its own cache in the
// client. They are deliberately small: the point is the round trips. Like
// real servers they answer over UDP and TCP, and over UDP within the
// buffer the query advertised (truncated, TC set, past it: the client asks
// again over TCP), so an answer over 1232 bytes costs what it costs on
// the Internet instead of being dropped by the client.

type rrKey struct {
	name  string
	qtype uint16
}

// authority answers from a fixed record set.
type authority struct {
	mu  sync.RWMutex
	rrs map[rrKey][]dns.RR
}

func (a *authority) add(rr dns.RR) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h := rr.Header()
	k := rrKey{strings.ToLower(h.Name), h.Rrtype}
	a.rrs[k] = append(a.rrs[k], rr)
}

// replace sets the records of every name and type in rrs to those in rrs
// (a publisher's update, such as rotated Z-data).
func (a *authority) replace(rrs []dns.RR) {
	a.mu.Lock()
	defer a.mu.Unlock()
	seen := map[rrKey]bool{}
	for _, rr := range rrs {
		h := rr.Header()
		k := rrKey{strings.ToLower(h.Name), h.Rrtype}
		if !seen[k] {
			seen[k] = true
			a.rrs[k] = nil
		}
		a.rrs[k] = append(a.rrs[k], dns.Copy(rr))
	}
}

// hasName reports whether any record is owned by name (then a missing type
// is NODATA, not NXDOMAIN). The caller holds a.mu.
// benchSOA is the SOA of the benchmark's zone, the parent of ServerName.
var benchSOA = &dns.SOA{
	Hdr: dns.RR_Header{Name: benchZone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 300},
	Ns:  "ns." + benchZone, Mbox: "hostmaster." + benchZone, Serial: 1,
	Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 300,
}

// benchZone is the zone the benchmark's authority serves.
var benchZone = dns.Fqdn(ServerName[strings.Index(ServerName, ".")+1:])

func (a *authority) hasName(name string) bool {
	for k, v := range a.rrs {
		if k.name == name && len(v) > 0 {
			return true
		}
	}
	return false
}

func (a *authority) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	if len(r.Question) != 1 || r.Opcode != dns.OpcodeQuery {
		m := new(dns.Msg)
		m.SetRcode(r, dns.RcodeFormatError)
		w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	m := new(dns.Msg)
	m.SetReply(r)
	m.Authoritative = true
	a.mu.RLock()
	m.Answer = append(m.Answer, a.rrs[rrKey{strings.ToLower(q.Name), q.Qtype}]...)
	if len(m.Answer) == 0 {
		if !a.hasName(strings.ToLower(q.Name)) {
			m.Rcode = dns.RcodeNameError
		}
		// NXDOMAIN and NODATA carry the zone's SOA, as a real authority's
		// do, so resolvers may cache them (RFC 2308, Section 5): the ztls
		// stub cache would otherwise ask again for an empty CERT set.
		m.Ns = []dns.RR{benchSOA}
	}
	a.mu.RUnlock()
	writeReply(w, r, m)
}

// udpBufferSize is the EDNS0 buffer the benchmark's servers and
// resolver advertise, DNS Flag Day 2020's, as the client's resolver does.
const udpBufferSize = 1232

// writeReply sends m, the reply to q. Over UDP it fits the buffer q
// advertised (RFC 6891, Section 7; 512 bytes without EDNS0, RFC 1035,
// Section 4.2.1): what does not is left out and TC set, and the client
// asks again over TCP.
func writeReply(w dns.ResponseWriter, q, m *dns.Msg) {
	size := dns.MinMsgSize
	if opt := q.IsEdns0(); opt != nil {
		size = max(size, int(opt.UDPSize()))
		m.SetEdns0(udpBufferSize, false)
	}
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
		m.Truncate(size)
	}
	w.WriteMsg(m)
}

// cache is a TTL cache of answers, shared by the resolver and the stub.
type cache struct {
	mu sync.Mutex
	m  map[rrKey]cached
}

type cached struct {
	msg     *dns.Msg
	expires time.Time
}

func newCache() *cache { return &cache{m: map[rrKey]cached{}} }

func (c *cache) get(k rrKey) *dns.Msg {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || time.Now().After(e.expires) {
		return nil
	}
	return e.msg
}

func (c *cache) put(k rrKey, m *dns.Msg) {
	ttl := uint32(300)
	for _, rr := range m.Answer {
		ttl = min(ttl, rr.Header().Ttl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m[k] = cached{msg: m.Copy(), expires: time.Now().Add(time.Duration(ttl) * time.Second)}
}

func (c *cache) flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
}

// exchanger sends queries on one UDP socket and matches replies by ID, so
// several lookups may run at once; a truncated reply is asked again over
// TCP, on a connection from dial.
type exchanger struct {
	conn    net.PacketConn
	server  net.Addr
	dial    dialFunc
	mu      sync.Mutex
	waiting map[uint16]chan *dns.Msg
	nextID  uint16
}

// dialFunc opens a connection from the exchanger's host (in the testbed,
// its network namespace: hosts.Host.DialContext).
type dialFunc func(ctx context.Context, network, address string) (net.Conn, error)

func newExchanger(conn net.PacketConn, server netip.AddrPort, dial dialFunc) *exchanger {
	e := &exchanger{conn: conn, server: net.UDPAddrFromAddrPort(server), dial: dial, waiting: map[uint16]chan *dns.Msg{}, nextID: 1}
	go e.readLoop()
	return e
}

func (e *exchanger) readLoop() {
	buf := make([]byte, 65535)
	for {
		n, from, err := e.conn.ReadFrom(buf)
		if err != nil {
			return
		}
		if from.String() != e.server.String() {
			continue
		}
		m := new(dns.Msg)
		if m.Unpack(buf[:n]) != nil {
			continue
		}
		e.mu.Lock()
		ch := e.waiting[m.Id]
		delete(e.waiting, m.Id)
		e.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

func (e *exchanger) exchange(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	m, err := e.exchangeAny(ctx, name, qtype)
	if err != nil {
		return nil, err
	}
	if m.Rcode != dns.RcodeSuccess {
		return nil, fmt.Errorf("bench: dns: %s %s: %s", name, dns.TypeToString[qtype], dns.RcodeToString[m.Rcode])
	}
	return m, nil
}

// exchangeAny is exchange that returns negative answers (NXDOMAIN) too.
func (e *exchanger) exchangeAny(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	q.RecursionDesired = true
	q.SetEdns0(udpBufferSize, false)
	ch := make(chan *dns.Msg, 1)
	e.mu.Lock()
	for e.waiting[e.nextID] != nil || e.nextID == 0 {
		e.nextID++
	}
	q.Id = e.nextID
	e.nextID++
	e.waiting[q.Id] = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.waiting, q.Id)
		e.mu.Unlock()
	}()
	wire, err := q.Pack()
	if err != nil {
		return nil, fmt.Errorf("bench: dns: %w", err)
	}
	// Retry like a stub does; loss on the emulated links may eat a query.
	for try := 0; try < 4; try++ {
		if _, err := e.conn.WriteTo(wire, e.server); err != nil {
			return nil, fmt.Errorf("bench: dns: %w", err)
		}
		select {
		case m := <-ch:
			if m.Truncated {
				return e.exchangeTCP(ctx, q)
			}
			return m, nil
		case <-time.After(time.Second << try):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("bench: dns: %s %s: no answer", name, dns.TypeToString[qtype])
}

// exchangeTCP asks q again over a TCP connection of its own (RFC 7766),
// after a truncated UDP reply.
func (e *exchanger) exchangeTCP(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
	what := q.Question[0].Name + " " + dns.TypeToString[q.Question[0].Qtype]
	c, err := e.dial(ctx, "tcp", e.server.String())
	if err != nil {
		return nil, fmt.Errorf("bench: dns: %s over TCP: %w", what, err)
	}
	defer c.Close()
	if d, ok := ctx.Deadline(); ok {
		c.SetDeadline(d)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	dc := &dns.Conn{Conn: c}
	if err := dc.WriteMsg(q); err != nil {
		return nil, fmt.Errorf("bench: dns: %s over TCP: %w", what, err)
	}
	for {
		m, err := dc.ReadMsg()
		if err != nil {
			return nil, fmt.Errorf("bench: dns: %s over TCP: %w", what, err)
		}
		if m.Id == q.Id && len(m.Question) == 1 && strings.EqualFold(m.Question[0].Name, q.Question[0].Name) &&
			m.Question[0].Qtype == q.Question[0].Qtype {
			return m, nil
		}
	}
}

// resolver is a caching resolver that asks the authority on a miss.
type resolver struct {
	cache    *cache
	upstream *exchanger
	// queries counts the queries it got, over UDP and TCP: the
	// stub↔resolver questions of a visit (measure reads it around one).
	queries atomic.Uint64
}

func (r *resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	r.queries.Add(1)
	if len(q.Question) != 1 || q.Opcode != dns.OpcodeQuery {
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeFormatError)
		w.WriteMsg(m)
		return
	}
	qq := q.Question[0]
	k := rrKey{strings.ToLower(qq.Name), qq.Qtype}
	ans := r.cache.get(k)
	if ans == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		up, err := r.upstream.exchangeAny(ctx, qq.Name, qq.Qtype)
		cancel()
		if err != nil {
			m := new(dns.Msg)
			m.SetRcode(q, dns.RcodeServerFailure)
			w.WriteMsg(m)
			return
		}
		r.cache.put(k, up)
		ans = up
	}
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	m.Rcode = ans.Rcode
	m.Answer = append(m.Answer, ans.Answer...)
	m.Ns = append(m.Ns, ans.Ns...) // the SOA of a negative answer (RFC 2308)
	writeReply(w, q, m)
}

// stub is the client's DNS: a cache, then the resolver.
type stub struct {
	cache    *cache
	resolver *exchanger
	useCache bool
}

func (s *stub) lookup(ctx context.Context, name string, qtype uint16) (*dns.Msg, error) {
	name = dns.Fqdn(name)
	k := rrKey{strings.ToLower(name), qtype}
	if s.useCache {
		if m := s.cache.get(k); m != nil {
			return m, nil
		}
	}
	m, err := s.resolver.exchange(ctx, name, qtype)
	if err != nil {
		return nil, err
	}
	s.cache.put(k, m)
	return m, nil
}

func (s *stub) lookupA(ctx context.Context, name string) (netip.Addr, error) {
	m, err := s.lookup(ctx, name, dns.TypeA)
	if err != nil {
		return netip.Addr{}, err
	}
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			if ip, ok := netip.AddrFromSlice(a.A.To4()); ok {
				return ip, nil
			}
		}
	}
	return netip.Addr{}, fmt.Errorf("bench: dns: no A record for %s", name)
}

// dnsSetup runs the authority and resolver and builds the client's stub.
type dnsSetup struct {
	auth    *authority
	res     *resolver
	stub    *stub
	closers []func()
}

func startDNS(authHost, resHost, client *hosts.Host) (*dnsSetup, error) {
	d := &dnsSetup{auth: &authority{rrs: map[rrKey][]dns.RR{}}}
	serve := func(h *hosts.Host, handler dns.Handler) error {
		addr := netip.AddrPortFrom(h.Addr, 53).String()
		pc, err := h.ListenPacket("udp4", addr)
		if err != nil {
			return fmt.Errorf("bench: dns server on %s: %w", h.Name, err)
		}
		ln, err := h.Listen("tcp4", addr)
		if err != nil {
			pc.Close()
			return fmt.Errorf("bench: dns server on %s: %w", h.Name, err)
		}
		d.closers = append(d.closers, serveDNS(pc, ln, handler))
		return nil
	}
	if err := serve(authHost, d.auth); err != nil {
		d.close()
		return nil, err
	}
	up, err := resHost.ListenPacket("udp4", netip.AddrPortFrom(resHost.Addr, 0).String())
	if err != nil {
		d.close()
		return nil, fmt.Errorf("bench: resolver socket: %w", err)
	}
	d.closers = append(d.closers, func() { up.Close() })
	d.res = &resolver{cache: newCache(), upstream: newExchanger(up, netip.AddrPortFrom(authHost.Addr, 53), resHost.DialContext)}
	if err := serve(resHost, d.res); err != nil {
		d.close()
		return nil, err
	}
	cl, err := client.ListenPacket("udp4", netip.AddrPortFrom(client.Addr, 0).String())
	if err != nil {
		d.close()
		return nil, fmt.Errorf("bench: stub socket: %w", err)
	}
	d.closers = append(d.closers, func() { cl.Close() })
	d.stub = &stub{cache: newCache(), resolver: newExchanger(cl, netip.AddrPortFrom(resHost.Addr, 53), client.DialContext)}
	return d, nil
}

// serveDNS answers on pc (UDP) and ln (TCP, the same address) with h
// until the returned function stops both.
func serveDNS(pc net.PacketConn, ln net.Listener, h dns.Handler) (stop func()) {
	var srvs []*dns.Server
	for _, srv := range []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}} {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		go srv.ActivateAndServe()
		<-started
		srvs = append(srvs, srv)
	}
	return func() {
		for _, srv := range srvs {
			srv.Shutdown()
		}
	}
}

func (d *dnsSetup) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
	d.closers = nil
}
