package turbo

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/turbohook"
	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// FlightFunc answers one client flight received over UDP: it returns the
// server's flight and a value kept until a TCP connection links to it
// (handed to Config.Release if none does). It runs in its own goroutine;
// ctx ends when the entry expires or the server closes.
type FlightFunc func(ctx context.Context, from netip.AddrPort, clientFlight []byte) (serverFlight []byte, state any, err error)

// Config bounds the UDP state of a Server. The zero values are the
// documented defaults.
type Config struct {
	// Flight produces the server's flight; required.
	Flight FlightFunc
	// Release is called with the state of an entry that expired or was
	// evicted without a TCP link (may be nil).
	Release func(state any)
	// TTL is how long an entry lives without a TCP link; 0 means 2 s.
	TTL time.Duration
	// MaxEntries caps the table; 0 means 1024. A datagram that would make
	// a new entry beyond it evicts an entry worth less (see Server), or is
	// dropped.
	MaxEntries int
	// PrefixEntries is the share of the table a source prefix (/24 for
	// IPv4, /56 for IPv6) may keep once the table is full; 0 means
	// MaxEntries/16 (at least 1). A prefix may go over it while the table
	// has room; when full, a newcomer from a prefix at or over it may
	// take the place only of an entry of its own prefix (or a failed
	// one), and a newcomer from a prefix under it evicts an entry of the
	// prefix furthest over it.
	PrefixEntries int
	// SourceRate and SourceBurst rate-limit new entries per source IP
	// address (a token bucket); 0 means 20 per second and a burst of 40.
	SourceRate  float64
	SourceBurst int
	// MaxClientFlight bounds a client flight; 0 means 16 KiB.
	MaxClientFlight int
	// Now is the clock (tests); nil means the ztls clock (internal/clock: the system clock, unless ZTLS_CLOCK_OFFSET shifts it).
	Now func() time.Time

	// exec, if set (internal/turbohook), runs each call of Flight: the
	// testbed's thread-per-connection server queues the flight on its
	// fixed worker pool, next to its TCP connections.
	exec turbohook.Exec
}

func init() {
	turbohook.SetExec = func(cfg any, exec turbohook.Exec) { cfg.(*Config).exec = exec }
}

// Stats are counters of a Server since it started.
type Stats struct {
	DatagramsIn, DatagramsOut int64
	BytesIn, BytesOut         int64
	Entries                   int   // live entries now
	PeakEntries               int   // most live entries at once
	ReassemblyBytes           int   // flight buffers held now
	PeakReassemblyBytes       int   // most flight buffer bytes held at once
	Dropped                   int64 // datagrams dropped: malformed, over a limit, unknown
	Unqualified               int64 // of which may not open an entry (wire.CheckOpening) and made none
	Evicted                   int64 // entries evicted to make room for a new one
	RateLimited               int64 // new entries refused by the per-source limit
	Full                      int64 // new entries refused because the table was full
	Linked                    int64 // entries joined by their TCP connection
	Expired                   int64 // entries that expired unlinked
	FlightErrors              int64 // client flights the FlightFunc refused
	AmplificationHeld         int64 // response datagrams held back by the 3x rule
}

// Server is the UDP side of a TurboTLS server: a bounded table of
// handshakes in progress, keyed by connection id, each limited to one
// response datagram per request datagram and to three times the bytes
// its source sent (RFC 9000, Section 8.1). Link finds an entry for a TCP
// connection. A Server is safe for concurrent use.
//
// The table is what a spoofing flood aims at, so only a request that
// passes CheckOpening (padded to 1200 bytes, the start of a ClientHello)
// opens an entry, within its source IP's rate. When the table is full a
// new entry takes the place of the oldest entry whose flight failed;
// else, when its prefix holds Config.PrefixEntries or more, of its own
// prefix's oldest entry still reassembling (so a prefix that floods
// churns only itself, not another prefix's flights between their
// fragments); else of the oldest entry still reassembling of the prefix
// furthest over its share, or that prefix's oldest finished flight; and
// when no prefix is over its share, of the oldest entry still
// reassembling. An entry whose flight the engine is working on is never
// evicted: that work is spent already.
type Server struct {
	cfg Config
	ctx context.Context
	end context.CancelFunc

	mu         sync.Mutex
	entries    map[ConnID]*entry
	prefixes   map[netip.Prefix]*prefixState
	over       map[*prefixState]struct{} // prefixes over PrefixEntries
	failed     list.List                 // *entry, oldest first
	incomplete list.List                 // *entry, oldest first
	sources    map[netip.Addr]*source
	stats      Stats
	pcs        []net.PacketConn
	janitorOn  bool
	lastSweep  time.Time
	wg         sync.WaitGroup
}

// entry is one handshake in progress.
type entry struct {
	id       ConnID
	from     netip.AddrPort
	pc       net.PacketConn
	created  time.Time
	asm      wire.Reassembler
	bytesIn  int
	bytesOut int
	requests int // request datagrams received
	sent     int // response datagrams sent
	working  bool
	ready    bool
	failed   bool
	out      [][]byte // the server flight's datagrams
	state    any
	cancel   context.CancelFunc
	heldBuf  int // reassembly bytes accounted in stats
	prefix   *prefixState
	queue    *list.List // the eviction queue e is on (nil: working)
	elem     *list.Element
	pelem    *list.Element // e in prefix.incomplete (queue is the table's incomplete)
}

// prefixState counts the entries of one source prefix.
type prefixState struct {
	key        netip.Prefix
	entries    int
	ready      list.List // *entry with a finished flight, oldest first
	incomplete list.List // *entry still reassembling, oldest first
}

// sourcePrefix is the prefix a source is counted in: /24 for IPv4, /56
// for IPv6 (a site's usual allocation), so that one network cannot take
// the table by spreading over its addresses.
func sourcePrefix(a netip.Addr) netip.Prefix {
	a = a.Unmap().WithZone("")
	bits := 56
	if a.Is4() {
		bits = 24
	}
	p, _ := a.Prefix(bits)
	return p
}

// source is the per-IP rate limiter.
type source struct {
	tokens float64
	last   time.Time
}

// NewServer returns a Server; call ServeUDP to run it.
func NewServer(cfg Config) *Server {
	if cfg.TTL <= 0 {
		cfg.TTL = 2 * time.Second
	}
	if cfg.MaxEntries <= 0 {
		cfg.MaxEntries = 1024
	}
	if cfg.PrefixEntries <= 0 {
		cfg.PrefixEntries = max(cfg.MaxEntries/16, 1)
	}
	if cfg.SourceRate <= 0 {
		cfg.SourceRate = 20
	}
	if cfg.SourceBurst <= 0 {
		cfg.SourceBurst = 40
	}
	if cfg.MaxClientFlight <= 0 {
		cfg.MaxClientFlight = 16 << 10
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{cfg: cfg, ctx: ctx, end: cancel, entries: map[ConnID]*entry{}, sources: map[netip.Addr]*source{},
		prefixes: map[netip.Prefix]*prefixState{}, over: map[*prefixState]struct{}{}}
}

// ServeUDP reads datagrams from pc until it is closed or the server is
// closed (a server closed already closes pc and returns at once). Several
// PacketConns may be served at once.
func (s *Server) ServeUDP(pc net.PacketConn) error {
	if s.cfg.Flight == nil {
		return errors.New("turbo: Server needs a Flight function")
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		// Closed before this call got here: Close could not close pc.
		s.mu.Unlock()
		pc.Close()
		return nil
	}
	s.pcs = append(s.pcs, pc)
	if !s.janitorOn {
		s.janitorOn = true
		s.wg.Add(1)
		go s.janitor()
	}
	s.mu.Unlock()
	buf := make([]byte, 2048)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			if s.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return err
			}
			continue // ICMP errors on some systems: not fatal
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		s.handle(pc, ua.AddrPort(), buf[:n])
	}
}

// Close stops the janitor and the flight goroutines, releases every
// entry's state and closes the PacketConns given to ServeUDP.
func (s *Server) Close() error {
	s.end()
	s.mu.Lock()
	pcs := s.pcs
	s.pcs = nil
	var states []any
	for id, e := range s.entries {
		s.dropLocked(id, e)
		if e.state != nil {
			states = append(states, e.state)
		}
	}
	s.mu.Unlock()
	for _, pc := range pcs {
		pc.Close()
	}
	s.wg.Wait()
	s.release(states)
	return nil
}

func (s *Server) release(states []any) {
	if s.cfg.Release == nil {
		return
	}
	for _, st := range states {
		s.cfg.Release(st)
	}
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Entries = len(s.entries)
	return st
}

func (s *Server) handle(pc net.PacketConn, from netip.AddrPort, b []byte) {
	from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
	// Parsed and checked before taking the table's lock: neither needs it.
	d, err := wire.ParseDatagram(b)
	opening := err == nil && wire.CheckOpening(d, len(b)) == nil
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.DatagramsIn++
	s.stats.BytesIn += int64(len(b))
	if err != nil || d.Type != wire.TypeRequest {
		s.stats.Dropped++ // never answer what cannot be parsed
		return
	}
	e := s.entries[d.ID]
	now := s.cfg.Now()
	if e != nil && e.from != from {
		s.stats.Dropped++ // an id is bound to the address that opened it
		return
	}
	if e != nil && now.Sub(e.created) > s.cfg.TTL {
		s.expireLocked(e)
		e = nil
	}
	if e == nil {
		if !opening {
			s.stats.Unqualified++ // no state for what costs a spoofer 21 bytes
			s.stats.Dropped++
			return
		}
		if !s.allowLocked(from.Addr(), now) {
			s.stats.RateLimited++
			s.stats.Dropped++
			return
		}
		if len(s.entries) >= s.cfg.MaxEntries && now.Sub(s.lastSweep) > s.cfg.TTL/8 {
			s.sweepLocked(now) // expired entries first, before evicting live ones
		}
		key := sourcePrefix(from.Addr())
		if len(s.entries) >= s.cfg.MaxEntries && !s.evictForLocked(s.prefixes[key]) {
			s.stats.Full++
			s.stats.Dropped++
			return
		}
		e = &entry{id: d.ID, from: from, pc: pc, created: now}
		e.asm.Max = s.cfg.MaxClientFlight
		// Looked up after the eviction, which may have dropped the
		// prefix's last entry and with it the prefix's state.
		s.addLocked(e, s.prefixLocked(key))
	}
	if e.failed {
		s.stats.Dropped++
		return
	}
	e.requests++
	e.bytesIn += len(b)
	if !e.working && !e.ready {
		if err := e.asm.Add(d.FlightLength, d.Offset, d.Fragment); err != nil {
			s.failLocked(e)
			s.stats.Dropped++
			return
		}
		s.accountBufLocked(e)
		if e.asm.Complete() {
			s.queueLocked(e, nil) // working: not evictable
			e.working = true
			flight := e.asm.Flight()
			e.asm = wire.Reassembler{}
			s.accountBufLocked(e)
			ctx, cancel := context.WithCancel(s.ctx)
			e.cancel = cancel
			s.wg.Add(1)
			go s.runFlight(ctx, e, flight)
		}
		return
	}
	if e.ready {
		s.sendLocked(e)
	}
}

// accountBufLocked keeps the reassembly byte counters current.
func (s *Server) accountBufLocked(e *entry) {
	held := e.asm.Held()
	s.stats.ReassemblyBytes += held - e.heldBuf
	e.heldBuf = held
	s.stats.PeakReassemblyBytes = max(s.stats.PeakReassemblyBytes, s.stats.ReassemblyBytes)
}

// allowLocked takes a token from from's bucket.
func (s *Server) allowLocked(from netip.Addr, now time.Time) bool {
	src := s.sources[from]
	if src == nil {
		if len(s.sources) >= 4*s.cfg.MaxEntries {
			s.pruneSourcesLocked(now)
			if len(s.sources) >= 4*s.cfg.MaxEntries {
				return false
			}
		}
		src = &source{tokens: float64(s.cfg.SourceBurst), last: now}
		s.sources[from] = src
	}
	src.tokens = min(float64(s.cfg.SourceBurst), src.tokens+now.Sub(src.last).Seconds()*s.cfg.SourceRate)
	src.last = now
	if src.tokens < 1 {
		return false
	}
	src.tokens--
	return true
}

// pruneSourcesLocked forgets buckets that have refilled (idle sources).
func (s *Server) pruneSourcesLocked(now time.Time) {
	full := time.Duration(float64(s.cfg.SourceBurst) / s.cfg.SourceRate * float64(time.Second))
	for a, src := range s.sources {
		if now.Sub(src.last) >= full {
			delete(s.sources, a)
		}
	}
}

func (s *Server) runFlight(ctx context.Context, e *entry, clientFlight []byte) {
	defer s.wg.Done()
	var flight []byte
	var state any
	var err error
	compute := func() { flight, state, err = s.cfg.Flight(ctx, e.from, clientFlight) }
	if s.cfg.exec == nil {
		compute()
	} else if xerr := s.cfg.exec(ctx, compute); xerr != nil {
		flight, state, err = nil, nil, fmt.Errorf("turbo: the flight was not run: %w", xerr)
	}
	var dgrams [][]byte
	if err == nil {
		dgrams, err = wire.Fragment(wire.TypeResponse, e.id, flight)
	}
	s.mu.Lock()
	live := s.entries[e.id] == e
	if err != nil || !live {
		if err != nil {
			s.stats.FlightErrors++
		}
		if live {
			s.failLocked(e)
		}
		s.mu.Unlock()
		if state != nil {
			s.release([]any{state})
		}
		return
	}
	e.working, e.ready = false, true
	e.out, e.state = dgrams, state
	s.queueLocked(e, &e.prefix.ready)
	s.sendLocked(e)
	s.mu.Unlock()
}

// sendLocked sends what e's credit allows: one response datagram per
// request datagram, and never more than 3x the bytes received.
func (s *Server) sendLocked(e *entry) {
	for e.sent < len(e.out) && e.sent < e.requests {
		d := e.out[e.sent]
		if e.bytesOut+len(d) > 3*e.bytesIn {
			s.stats.AmplificationHeld++
			return
		}
		if _, err := e.pc.WriteTo(d, net.UDPAddrFromAddrPort(e.from)); err != nil {
			return
		}
		e.sent++
		e.bytesOut += len(d)
		s.stats.DatagramsOut++
		s.stats.BytesOut += int64(len(d))
	}
}

// failLocked keeps a failed entry (so its later datagrams are ignored
// cheaply) until it expires, without its buffers.
func (s *Server) failLocked(e *entry) {
	s.queueLocked(e, &s.failed)
	e.failed = true
	e.asm = wire.Reassembler{}
	e.out = nil
	s.accountBufLocked(e)
}

func (s *Server) dropLocked(id ConnID, e *entry) {
	if e.cancel != nil {
		e.cancel()
	}
	e.asm = wire.Reassembler{}
	s.accountBufLocked(e)
	delete(s.entries, id)
	s.queueLocked(e, nil)
	if p := e.prefix; p != nil {
		e.prefix = nil
		p.entries--
		s.notePrefixLocked(p)
		if p.entries == 0 {
			delete(s.prefixes, p.key)
		}
	}
}

// prefixLocked returns the state of prefix key, made if needed; the
// caller adds an entry to it.
func (s *Server) prefixLocked(key netip.Prefix) *prefixState {
	p := s.prefixes[key]
	if p == nil {
		p = &prefixState{key: key}
		s.prefixes[key] = p
	}
	return p
}

// notePrefixLocked keeps the set of prefixes over their share current.
func (s *Server) notePrefixLocked(p *prefixState) {
	if p.entries > s.cfg.PrefixEntries {
		s.over[p] = struct{}{}
	} else {
		delete(s.over, p)
	}
}

// addLocked puts a new entry, still reassembling, in the table.
func (s *Server) addLocked(e *entry, p *prefixState) {
	s.entries[e.id] = e
	e.prefix = p
	p.entries++
	s.notePrefixLocked(p)
	s.queueLocked(e, &s.incomplete)
	s.stats.PeakEntries = max(s.stats.PeakEntries, len(s.entries))
}

// queueLocked moves e to the back of eviction queue q (nil: none). An
// entry on the table's incomplete queue is on its prefix's too.
func (s *Server) queueLocked(e *entry, q *list.List) {
	if e.queue != nil {
		e.queue.Remove(e.elem)
		e.queue, e.elem = nil, nil
	}
	if e.pelem != nil {
		e.prefix.incomplete.Remove(e.pelem)
		e.pelem = nil
	}
	if q != nil {
		e.queue, e.elem = q, q.PushBack(e)
		if q == &s.incomplete {
			e.pelem = e.prefix.incomplete.PushBack(e)
		}
	}
}

// evictForLocked makes room in a full table for a new entry from prefix
// p (nil: a prefix with no entries), in the order the Server documents,
// and reports whether it did.
func (s *Server) evictForLocked(p *prefixState) bool {
	var victim *entry
	switch {
	case s.failed.Len() > 0:
		victim = s.failed.Front().Value.(*entry)
	case p != nil && p.entries >= s.cfg.PrefixEntries:
		// At its share: the prefix's newcomers churn only its own
		// flights, however many of them it sends.
		if p.incomplete.Len() == 0 {
			return false
		}
		victim = p.incomplete.Front().Value.(*entry)
	default:
		victim = s.overShareVictimLocked()
		if victim == nil && s.incomplete.Len() > 0 {
			victim = s.incomplete.Front().Value.(*entry)
		}
		if victim == nil {
			return false
		}
	}
	s.stats.Evicted++
	s.dropLocked(victim.id, victim)
	if victim.state != nil && s.cfg.Release != nil {
		st := victim.state
		victim.state = nil
		go s.cfg.Release(st)
	}
	return true
}

// overShareVictimLocked is the entry a newcomer from a prefix under its
// share evicts from the prefix furthest over its share: its oldest entry
// still reassembling, else its oldest finished flight (nil: no prefix over
// its share has either).
func (s *Server) overShareVictimLocked() *entry {
	var worst *prefixState
	for q := range s.over {
		if q.incomplete.Len()+q.ready.Len() > 0 && (worst == nil || q.entries > worst.entries) {
			worst = q
		}
	}
	switch {
	case worst == nil:
		return nil
	case worst.incomplete.Len() > 0:
		return worst.incomplete.Front().Value.(*entry)
	default:
		return worst.ready.Front().Value.(*entry)
	}
}

func (s *Server) expireLocked(e *entry) {
	s.dropLocked(e.id, e)
	s.stats.Expired++
	if e.state != nil && s.cfg.Release != nil {
		st := e.state
		e.state = nil
		go s.cfg.Release(st)
	}
}

func (s *Server) janitor() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.TTL / 4)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep removes expired entries now (the server also does it on its own
// four times per TTL).
func (s *Server) Sweep() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweepLocked(s.cfg.Now())
}

func (s *Server) sweepLocked(now time.Time) {
	s.lastSweep = now
	for _, e := range s.entries {
		if now.Sub(e.created) > s.cfg.TTL {
			s.expireLocked(e)
		}
	}
	if len(s.sources) > s.cfg.MaxEntries {
		s.pruneSourcesLocked(now)
	}
}

// Link takes the entry a TCP connection from remote names. It succeeds
// only for an entry whose flight is ready, not expired, opened from the
// same IP address; the entry leaves the table either way it is found.
func (s *Server) Link(id ConnID, remote netip.Addr) (any, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[id]
	if e == nil {
		return nil, false
	}
	if e.from.Addr() != remote.Unmap() {
		return nil, false // not the address that opened it: leave it alone
	}
	if !e.ready || s.cfg.Now().Sub(e.created) > s.cfg.TTL {
		s.expireLocked(e)
		return nil, false
	}
	st := e.state
	e.state = nil
	s.dropLocked(id, e)
	s.stats.Linked++
	return st, true
}
