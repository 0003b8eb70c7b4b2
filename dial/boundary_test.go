package dial

// The boundary suite (issue 25, item 4). Every end-to-end flow is driven
// by the real client (Connect, Prefetch) at simulated instants around a
// rollover nb: v1 ZTLS, v2/BFE ZTLS, a fleet of two servers on a shared
// Redis register and BFE puncture log, each over TCP and over TurboTLS,
// with a fresh client and with a prefetching one. Every clock of a world
// (the client's, the servers', the registers', TurboTLS's, the
// publication's) is one settable clock; at each instant the servers'
// keepers rotate their keys and the world publishes what they hold.
//
// Asserted:
//   - no fallback caused by the rotation: a fresh client's early data is
//     accepted at every instant, over v1 and BFE, TCP and TurboTLS, with
//     and without a prefetched entry (one prefetched at the instant
//     before, used as a real client would, and one prefetched now);
//   - with a server restart (same keys, a fresh default register), a
//     fleet member restart, a Redis FLUSHALL and a Redis failover (the
//     register's address now reaches a Redis without the data) placed at
//     each instant: every first flight captured just before is accepted
//     at most once in total when replayed afterwards to every member
//     (over TCP, and for TurboTLS flights also over UDP); every refusal
//     of early data for safety says why, in the client's Report
//     (FallbackReason) and in the server's ConnectionState; and early
//     data comes back when the guards no longer need to refuse it.
//
// A prefetched entry never outlives its record: the DNS TTLs end a
// second before the record's not-after (zdata.TTLFor), so in the last
// second of a period Prefetch caches nothing, and an entry taken earlier
// has expired by the rollover; the client then looks the service up, as
// a real one would, and keeps its early data.
//
// The instants are nb-30m, nb-TwinLead±1s, nb-60s, nb-1s, nb-1ms, nb,
// nb+1ms and nb+61s. Within an instant the clock moves in microseconds
// (event, then replays), so the next instant is still ahead.
//
// Worlds share one authority and CA (internal/testsupport/lab, External) and one TCP
// and UDP port, so that BFE key files, which bind the port, are made once
// and copied (zdata.Service.GenerateBFE finds them, as it finds those a
// fleet member made from the seed). Run alone with
//
//	go test ./dial -run TestDialBoundary -v

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/dialhook"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
	"github.com/ztls-project/ztls/zdata/redisreg"
)

const (
	bndHost     = "www.ztls.test"
	bndResponse = "hello"
	// bndBFEConnections sizes the BFE keys: a long world decapsulates
	// about a hundred flights a period, which keeps a fresh ciphertext's
	// false-positive rate under 1e-5 (bfe.DefaultFalsePositiveRate sizing).
	bndBFEConnections = 256
	// bndWorldStart is when a world's servers start, relative to nb: their
	// registers' memory begins then, well before the first instant.
	bndWorldStart = -45 * time.Minute
	// bndRedisStart is when a fleet's Redis is first used: its memory
	// covers the period before nb (BFE punctures are refused for a period
	// that began before Redis's memory, docs/ztls-spec.md, Section 7.6).
	bndRedisStart = -61 * time.Minute
	// bndStep is how far the clock moves between an instant's steps.
	bndStep = time.Microsecond
)

type bndInstant struct {
	name string
	at   time.Duration // from nb
}

var bndInstants = []bndInstant{
	{"nb-30m", -30 * time.Minute},
	{"nb-TwinLead-1s", -zdata.TwinLead - time.Second},
	{"nb-TwinLead+1s", -zdata.TwinLead + time.Second},
	{"nb-60s", -60 * time.Second},
	{"nb-1s", -time.Second},
	{"nb-1ms", -time.Millisecond},
	{"nb", 0},
	{"nb+1ms", time.Millisecond},
	{"nb+61s", 61 * time.Second},
}

// bndFlow is what kind of client connects: one preferring v2 records
// with bfe= (else a client without BFE, using v1 records), over TurboTLS
// or TCP.
type bndFlow struct {
	name  string
	bfe   bool
	turbo bool
}

var (
	bndV1Flows  = []bndFlow{{"v1-tcp", false, false}, {"v1-turbo", false, true}}
	bndBFEFlows = []bndFlow{{"bfe-tcp", true, false}, {"bfe-turbo", true, true}}
	bndAllFlows = append(append([]bndFlow{}, bndV1Flows...), bndBFEFlows...)
)

// TestDialBoundary runs the suite: each part is a subtest.
func TestDialBoundary(t *testing.T) {
	s := newBndSuite(t)
	// A v1 server (an in-memory strike register, since it started).
	t.Run("v1", func(t *testing.T) {
		s.world(t, "v1", false, nil).runInstants(bndV1Flows, false)
	})
	// The same restarted at the instant with the default register (nil
	// Config.StrikeRegister), whose memory begins at its first handshake.
	// At nb the restarted server accepted the flight a second time while
	// that memory's start was rounded down to the millisecond
	// (tls13.Config's lazy): it then vouched for the instants of its
	// first millisecond before it ran, among them nb, the earliest time
	// the flight's key could take it.
	t.Run("v1-restart", func(t *testing.T) {
		for _, in := range bndInstants {
			t.Run(in.name, func(t *testing.T) { s.runEvent(t, in, false, nil, "restart") })
		}
	})
	// A BFE server (v2 twins) restarted at every instant: its punctured
	// key file survives, so it needs no quiet period.
	t.Run("bfe", func(t *testing.T) {
		s.world(t, "bfe", true, nil).runInstants(bndBFEFlows, true)
	})
	// A fleet of two BFE servers on one Redis (strike register and
	// puncture log), v1 and BFE clients; a member restarts at every
	// instant, Redis keeping its data.
	t.Run("fleet", func(t *testing.T) {
		rp := bndStartRedisPair(t)
		s.world(t, "fleet", true, rp).runInstants(bndAllFlows, true)
	})
	for _, event := range []string{"flushall", "failover"} {
		t.Run("fleet-"+event, func(t *testing.T) {
			rp := bndStartRedisPair(t)
			for _, in := range bndInstants {
				t.Run(in.name, func(t *testing.T) { s.runEvent(t, in, true, rp, event) })
			}
		})
	}
}

// bndSuite is what the worlds share: the authority and CA, the port, the
// fleet seed and the BFE key files made for them.
type bndSuite struct {
	t      *testing.T
	nb     time.Time
	lab    *lab.World
	port   int
	seed   []byte
	tmpl   string // BFE key files for (bndHost, port, seed), made once
	tmplMu sync.Mutex
	made   bool
	worlds atomic.Int32
}

func newBndSuite(t *testing.T) *bndSuite {
	// The next rollover after now: the test certificates are valid
	// around now (the lab's from 3 hours before nb to 22 hours after).
	nb := clock.Now().Truncate(time.Hour).Add(time.Hour)
	start := nb.Add(-2 * time.Hour)
	w, err := lab.Start(lab.Options{Host: bndHost, External: true, Now: func() time.Time { return start }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	s := &bndSuite{t: t, nb: nb, lab: w, port: bndPickPort(t), seed: bytes.Repeat([]byte{0x5a}, 32), tmpl: t.TempDir()}
	// TurboTLS's advertisement: UDP on the TCP port's number.
	if err := w.Zones.ReplaceRRset(dnsname.HTTPSOwner(bndHost, s.port), dns.TypeHTTPS,
		[]dns.RR{turbo.HTTPSRecord(bndHost, s.port, uint16(s.port), 300)}); err != nil {
		t.Fatal(err)
	}
	t.Logf("rollover nb = %s; servers on port %d", nb.UTC().Format(time.RFC3339), s.port)
	return s
}

// bndPickPort finds a port free for TCP and UDP on 127.0.0.1 and
// 127.0.0.2, below the ephemeral range (so that no client socket of
// another test process takes it between two worlds).
func bndPickPort(t *testing.T) int {
	for range 200 {
		p := 20000 + rand.IntN(12000)
		var open []io.Closer
		ok := true
		for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
			addr := net.JoinHostPort(ip, strconv.Itoa(p))
			l, err := net.Listen("tcp", addr)
			if err != nil {
				ok = false
				break
			}
			open = append(open, l)
			u, err := net.ListenPacket("udp", addr)
			if err != nil {
				ok = false
				break
			}
			open = append(open, u)
		}
		for _, c := range open {
			c.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("no free port for the boundary worlds")
	return 0
}

// bfeDir returns a new directory holding the BFE key files of the
// periods the worlds see (nb-1h to nb+3h: a keeper generates the
// period's and the next two's), made once for the suite and copied.
func (s *bndSuite) bfeDir(t *testing.T) string {
	s.tmplMu.Lock()
	defer s.tmplMu.Unlock()
	if !s.made {
		svc, err := zdata.NewService(bndHost, s.port, s.lab.Cert, zdata.Options{BFEConnections: bndBFEConnections}, s.seed)
		if err != nil {
			t.Fatal(err)
		}
		svc.BFEDir = s.tmpl
		for _, at := range []time.Duration{bndWorldStart, time.Millisecond, time.Hour + time.Millisecond} {
			if _, err := svc.GenerateBFE(context.Background(), s.nb.Add(at)); err != nil {
				t.Fatal(err)
			}
		}
		s.made = true
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(s.tmpl)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(s.tmpl, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// forward moves a world's clock to t; the worlds only go forward (their
// servers, registers and caches never saw a clock step back).
func forward(c *clock.Manual, t time.Time) {
	if t.Before(c.Now()) {
		panic("boundary world: the clock would go back")
	}
	c.Set(t)
}

// bndWorld is one deployment: a server, or a fleet of two on Redis.
type bndWorld struct {
	t       *testing.T
	s       *bndSuite
	name    string
	clk     *clock.Manual
	bfe     bool
	redis   *bndRedisPair // fleet: nil for a single server
	proxy   *bndProxy     // fleet: the register's address
	prefix  string        // fleet: the register's key prefix
	members []*bndMember
	seq     atomic.Int64

	mu       sync.Mutex
	accepted map[string]int // early request -> times a server's application took it
}

// world starts a world at nb+bndWorldStart: one server, or with rp a
// fleet of two on rp's first Redis (through a proxy a failover re-points),
// whose memory begins at nb+bndRedisStart.
func (s *bndSuite) world(t *testing.T, name string, bfeKeys bool, rp *bndRedisPair) *bndWorld {
	n := s.worlds.Add(1)
	w := &bndWorld{t: t, s: s, name: name, clk: clock.NewManual(s.nb.Add(bndRedisStart)), bfe: bfeKeys, redis: rp,
		accepted: map[string]int{}}
	ips := []string{"127.0.0.1"}
	if rp != nil {
		ips = append(ips, "127.0.0.2")
		w.prefix = fmt.Sprintf("ztls:bnd%d:", n)
		w.proxy = bndListenProxy(t, rp.a)
		// Redis's memory is complete from now on (a new Redis counts as
		// one that lost its data): the first use records that.
		reg, err := redisreg.New(redisreg.Options{Addr: w.proxy.addr(), Prefix: w.prefix, Timeout: 2 * time.Second, Now: w.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		now := w.clk.Now()
		reg.CheckAndInsert([]byte("warm-up"), now, now.Add(-10*time.Second), now.Add(10*time.Second))
		reg.Close()
	}
	forward(w.clk, s.nb.Add(bndWorldStart))
	t.Cleanup(w.close)
	for _, ip := range ips {
		dir := ""
		if bfeKeys {
			dir = s.bfeDir(t)
		}
		w.members = append(w.members, w.startMember(ip, dir, false))
	}
	w.publish()
	return w
}

func (w *bndWorld) close() {
	for _, m := range w.members {
		m.stop()
	}
}

// moveTo sets the world's clock to nb+at; every server's keeper rotates
// its keys then, and the world publishes them.
func (w *bndWorld) moveTo(at time.Duration) {
	forward(w.clk, w.s.nb.Add(at))
	for _, m := range w.members {
		m.keep()
	}
	w.publish()
}

// publish puts the records the (first) server holds at now in DNS, with
// the TTLs its publisher gives them.
func (w *bndWorld) publish() {
	now := w.clk.Now()
	recs := w.members[0].svc.Records(now)
	cert := w.s.lab.Cert
	rrs := zdata.ZoneRRs(recs, cert.Chain[0], cert.Chain[1:], zdata.TTLFor(recs, now, 5*time.Minute))
	if err := w.s.lab.Publish(bndHost, w.s.port, rrs); err != nil {
		w.t.Fatal(err)
	}
}

// restart replaces member i by a new process with the same keys (the
// fleet seed; its BFE key files as the old one left them): a single
// server gets the default register, whose memory begins at its first
// handshake; a fleet member the fleet's Redis again.
func (w *bndWorld) restart(i int) {
	old := w.members[i]
	old.stop()
	w.members[i] = w.startMember(old.ip, old.bfeDir, true)
	w.publish()
}

func (w *bndWorld) accept(early string) {
	w.mu.Lock()
	w.accepted[early]++
	w.mu.Unlock()
}

func (w *bndWorld) acceptedCount(early string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.accepted[early]
}

// bndMember is one server process: TCP and TurboTLS's UDP on ip:port.
type bndMember struct {
	w       *bndWorld
	ip      string
	svc     *zdata.Service
	bfeDir  string
	reg     *redisreg.Register // fleet
	cfg     *tls13.Config
	ln      *bndListener
	pc      net.PacketConn
	tsrv    *turbo.TLSServer
	srv     *server.Server
	results chan bndResult
	wg      sync.WaitGroup
}

// bndResult is what a server's application saw of one TCP connection.
type bndResult struct {
	state tls13.ConnectionState
	early string // the early data it took (TCP) or that was answered over UDP
}

func (w *bndWorld) startMember(ip, bfeDir string, restarted bool) *bndMember {
	t, s := w.t, w.s
	var opts zdata.Options
	if w.bfe {
		opts.BFEConnections = bndBFEConnections
	}
	svc, err := zdata.NewService(bndHost, s.port, s.lab.Cert, opts, s.seed)
	if err != nil {
		t.Fatal(err)
	}
	m := &bndMember{w: w, ip: ip, svc: svc, bfeDir: bfeDir, results: make(chan bndResult, 256)}
	var strike tls13.StrikeRegister
	switch {
	case w.redis != nil:
		reg, err := redisreg.New(redisreg.Options{Addr: w.proxy.addr(), Prefix: w.prefix, Timeout: 2 * time.Second, Now: w.clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		m.reg, strike = reg, reg
		if w.bfe {
			svc.BFELog = reg.PunctureLog(bndHost, s.port, zdata.EpochLength)
		}
	case !restarted:
		// The server has run since the world began.
		strike = tls13.NewMemoryStrikeRegister(1<<12, w.clk.Now())
	}
	if w.bfe {
		svc.BFEDir, svc.BFEServe = bfeDir, true
	}
	m.keep()
	m.cfg = &tls13.Config{Certificates: []tls13.Certificate{s.lab.Cert}, ZData: svc.Keyring, StrikeRegister: strike, Time: w.clk.Now}
	addr := net.JoinHostPort(ip, strconv.Itoa(s.port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the boundary port was taken meanwhile: %v", err)
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		ln.Close()
		t.Fatalf("the boundary port was taken meanwhile: %v", err)
	}
	m.ln, m.pc = &bndListener{Listener: ln}, pc
	// One client address makes all the flights, hundreds within
	// simulated milliseconds: no rate limit per source.
	m.tsrv = turbo.NewTLSServer(m.cfg, m.answer, turbo.Config{Now: w.clk.Now, SourceRate: 1e9, SourceBurst: 1 << 20})
	m.srv, err = server.New(server.Config{TLS: func() *tls13.Config { return m.cfg }, Turbo: m.tsrv,
		HandshakeTimeout: 10 * time.Second, Handler: m.handle})
	if err != nil {
		t.Fatal(err)
	}
	m.wg.Add(2)
	go func() { defer m.wg.Done(); m.tsrv.ServeUDP(pc) }()
	go func() { defer m.wg.Done(); m.srv.Serve(m.ln) }()
	return m
}

// keep is the serving process's keeper at the world's instant: BFE keys
// made ahead (found on disk here), then the key ring's rotation.
func (m *bndMember) keep() {
	now := m.w.clk.Now()
	if m.w.bfe {
		if _, err := m.svc.GenerateBFE(context.Background(), now); err != nil {
			m.w.t.Fatal(err)
		}
	}
	if _, err := m.svc.Rotate(now); err != nil {
		m.w.t.Fatal(err)
	}
}

func (m *bndMember) stop() {
	m.srv.Close()
	m.tsrv.Close()
	m.wg.Wait()
	m.svc.CloseBFE()
	if m.reg != nil {
		m.reg.Close()
	}
}

func (m *bndMember) addr() string { return net.JoinHostPort(m.ip, strconv.Itoa(m.w.s.port)) }

// answer is the TurboTLS answer: early data accepted in a UDP flight is
// the application's, answered in that flight.
func (m *bndMember) answer(early []byte, st tls13.ConnectionState) []byte {
	if len(early) > 0 {
		m.w.accept(string(early))
	}
	return []byte(bndResponse)
}

// handle answers the request (early or not) and reports what it saw.
func (m *bndMember) handle(c *server.Conn) {
	if c.EarlyAnswered {
		if c.FinishHandshake() == nil {
			c.CloseWrite()
		}
		m.results <- bndResult{state: c.ConnectionState(), early: "(over UDP)"}
		return
	}
	res := bndResult{state: c.ConnectionState()}
	buf := make([]byte, 4096)
	if n, _ := c.ReadEarlyData(buf); n > 0 {
		res.early = string(buf[:n])
		m.w.accept(res.early)
		c.Write([]byte(bndResponse))
		c.Handshake()
	} else if n, _ := c.Read(buf); n > 0 {
		c.Write([]byte(bndResponse))
	}
	c.CloseWrite()
	m.results <- res
}

// result is what the application saw of the connection that just ended.
func (m *bndMember) result(label string) bndResult {
	select {
	case r := <-m.results:
		return r
	case <-time.After(10 * time.Second):
		m.w.t.Fatalf("%s: the server at %s reported nothing", label, m.ip)
		return bndResult{}
	}
}

// bndListener keeps what each accepted connection read before the
// server first wrote: an attacker's recording of the client's first
// flight (the ClientHello and its early data).
type bndListener struct {
	net.Listener
	mu   sync.Mutex
	last *bndRecConn
}

func (l *bndListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	rc := &bndRecConn{Conn: c, flight: -1}
	l.mu.Lock()
	l.last = rc
	l.mu.Unlock()
	return rc, nil
}

func (l *bndListener) lastFlight() []byte {
	l.mu.Lock()
	rc := l.last
	l.mu.Unlock()
	if rc == nil {
		return nil
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	b := rc.in.Bytes()
	if rc.flight >= 0 {
		b = b[:rc.flight]
	}
	return bytes.Clone(b)
}

type bndRecConn struct {
	net.Conn
	mu     sync.Mutex
	in     bytes.Buffer
	flight int // bytes read before the first write; -1 before it
}

func (c *bndRecConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.flight < 0 {
		c.flight = c.in.Len()
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *bndRecConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in.Write(p[:n])
	c.mu.Unlock()
	return n, err
}

func (c *bndRecConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// bndDatagrams keeps the datagrams a client's TurboTLS sockets sent.
type bndDatagrams struct {
	mu sync.Mutex
	d  [][]byte
}

type bndUDPConn struct {
	net.Conn
	rec *bndDatagrams
}

func (c *bndUDPConn) Write(p []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.d = append(c.rec.d, bytes.Clone(p))
	c.rec.mu.Unlock()
	return c.Conn.Write(p)
}

// bndFlight reassembles the client flight (its TLS records) from request
// datagrams (docs/turbotls-spec.md, Section 2: type, conn_id[12],
// uint24 flight_length, uint24 offset, uint16 fragment_length, fragment).
func bndFlight(t *testing.T, dgrams [][]byte) []byte {
	var flight []byte
	for _, d := range dgrams {
		if len(d) < 21 || d[0] != 1 {
			t.Fatalf("not a TurboTLS request datagram: % x", d[:min(len(d), 21)])
		}
		u24 := func(b []byte) int { return int(b[0])<<16 | int(b[1])<<8 | int(b[2]) }
		total, off, n := u24(d[13:16]), u24(d[16:19]), int(d[19])<<8|int(d[20])
		if flight == nil {
			flight = make([]byte, total)
		}
		copy(flight[off:off+n], d[21:21+n])
	}
	return flight
}

// bndDial is one connection of the client, and what the server saw.
type bndDial struct {
	label  string
	req    string
	rep    Report
	server bndResult
	tcp    []byte   // TCP flows: the client's first flight, as the server read it
	udp    [][]byte // TurboTLS flows: the datagrams the client sent
}

// pointAt makes the host's address m's (a fleet behind DNS).
func (w *bndWorld) pointAt(m *bndMember) {
	if err := w.s.lab.AddAddress(bndHost, m.ip); err != nil {
		w.t.Fatal(err)
	}
}

// resolver is a new client's resolver (nothing cached), on the world's clock.
func (w *bndWorld) resolver() *resolver.Resolver {
	r, err := resolver.New(resolver.Config{Servers: []string{w.s.lab.DNSAddr}, Transport: resolver.UDP,
		Timeout: 2 * time.Second, Now: w.clk.Now})
	if err != nil {
		w.t.Fatal(err)
	}
	return r
}

func (w *bndWorld) clientOptions(f bndFlow, res *resolver.Resolver, cache *prevalidate.Cache) Options {
	o := Options{Mode: "auto", TLS: &tls13.Config{RootCAs: w.s.lab.Roots, Time: w.clk.Now}, Resolver: res,
		Memory: NewMemory(), ZDataBudget: 2 * time.Second, Cache: cache, Now: w.clk.Now, NoBFE: !f.bfe, Turbo: f.turbo}
	o.TurboWait = 5 * time.Second
	return o
}

func (w *bndWorld) target() string { return net.JoinHostPort(bndHost, strconv.Itoa(w.s.port)) }

// connect is one Connect to m sending a request that names the
// connection, early when allowed; cache nil is a fresh client.
func (w *bndWorld) connect(m *bndMember, f bndFlow, cache *prevalidate.Cache, label string) *bndDial {
	t := w.t
	t.Helper()
	label = w.name + "/" + label
	w.pointAt(m)
	res := w.resolver()
	defer res.Close()
	if cache == nil {
		cache = prevalidate.NewCache(prevalidate.CacheOptions{})
		defer cache.Close()
	}
	req := fmt.Sprintf("GET /%s/%d", label, w.seq.Add(1))
	var dgrams bndDatagrams
	ctx := dialhook.WithWrapUDP(context.Background(), func(c net.Conn) net.Conn { return &bndUDPConn{Conn: c, rec: &dgrams} })
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var out bytes.Buffer
	o := w.clientOptions(f, res, cache)
	o.Request, o.ReplaySafe, o.ReadResponse, o.Out = []byte(req), true, 1<<10, &out
	r, err := Connect(ctx, w.target(), o)
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	r.Conn.Close()
	if r.Err != nil || out.String() != bndResponse {
		t.Fatalf("%s: response %q, %v", label, out.String(), r.Err)
	}
	d := &bndDial{label: label, req: req, rep: r.Report, server: m.result(label)}
	t.Logf("%s: %s over %s, early data %+v, prefetch %q, fallback %q; server: %q", label, r.Report.Mode, r.Report.Transport,
		r.Report.EarlyData, r.Report.Prefetch, r.Report.FallbackReason, d.server.state.ZTLSRejectReason)
	if f.turbo {
		dgrams.mu.Lock()
		d.udp = dgrams.d
		dgrams.mu.Unlock()
	} else {
		d.tcp = m.ln.lastFlight()
	}
	return d
}

// prefetch fills cache for m's service as Prefetch does at the world's
// instant, and returns when the entry expires (zero: nothing cached).
func (w *bndWorld) prefetch(m *bndMember, f bndFlow, cache *prevalidate.Cache, label string) time.Time {
	t := w.t
	t.Helper()
	label = w.name + "/" + label
	w.pointAt(m)
	res := w.resolver()
	defer res.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	now := w.clk.Now()
	p := prevalidate.Prefetch(ctx, w.clientOptions(f, res, cache).Prevalidation(), w.target())[0]
	switch {
	case p.Err == nil && p.ZData != nil:
		t.Logf("%s: prefetched Z-data %d (%s to %s), expires %s by %s", label, p.ZData.ID,
			p.ZData.NotBefore.Format(time.TimeOnly), p.ZData.NotAfter.Format(time.TimeOnly), p.Expires.Format(time.TimeOnly), p.ExpiresBy)
		return p.Expires
	case p.Err == nil:
		t.Errorf("%s: prefetched without Z-data: %s", label, p.ZDataReason)
	case strings.Contains(p.Error, "ends at once") && now.Add(time.Second).Truncate(zdata.EpochLength).After(now):
		// The DNS TTLs end a second before the current record's
		// not-after (zdata.TTLFor): from then until the rollover an
		// entry would expire at once, and nothing is cached.
		t.Logf("%s: nothing prefetched: %s", label, p.Error)
	default:
		t.Errorf("%s: prefetch: %v", label, p.Err)
	}
	return time.Time{}
}

// wantAccepted: no fallback; the early request was taken, once.
func (w *bndWorld) wantAccepted(d *bndDial, f bndFlow) {
	t, rep := w.t, d.rep
	t.Helper()
	switch {
	case rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.FallbackReason != "":
		t.Errorf("%s: early data not accepted: mode %s, fallback %q; server: %q", d.label, rep.Mode, rep.FallbackReason,
			d.server.state.ZTLSRejectReason)
	case rep.EarlyData.BFE != f.bfe:
		t.Errorf("%s: early data under a BFE key %v, want %v", d.label, rep.EarlyData.BFE, f.bfe)
	case f.turbo && rep.Transport != "turbo":
		t.Errorf("%s: transport %s (%s), want turbo", d.label, rep.Transport, rep.TurboFallback)
	case w.acceptedCount(d.req) != 1:
		t.Errorf("%s: the server's application took the early request %d times", d.label, w.acceptedCount(d.req))
	}
}

// wantRefused: early data offered and refused for safety, which the
// client's report says (and the server's state, naming the guard).
func (w *bndWorld) wantRefused(d *bndDial, guard string) {
	t, rep := w.t, d.rep
	t.Helper()
	sr := d.server.state.ZTLSRejectReason
	switch {
	case rep.EarlyData.Accepted || w.acceptedCount(d.req) != 0:
		t.Errorf("%s: early data accepted; want it refused (%s)", d.label, guard)
	case !rep.EarlyData.Offered:
		t.Errorf("%s: no early data offered: %q", d.label, rep.FallbackReason)
	case rep.FallbackReason != ReasonRejected:
		t.Errorf("%s: fallback reason %q, want %q", d.label, rep.FallbackReason, ReasonRejected)
	case !strings.HasPrefix(sr, guard):
		t.Errorf("%s: server refused with %q, want %q…", d.label, sr, guard)
	case rep.Prefetch == PrefetchValidated && !rep.PrefetchDropped:
		t.Errorf("%s: the server refused the prefetched Z-data and the entry was kept", d.label)
	}
}

// The guards that refuse early data for safety (tls13 acceptZTLS).
const (
	bndGuardReplay   = "replayed ClientHello"
	bndGuardRegister = "strike register unavailable"
	bndGuardBFE      = "BFE: "
)

// replay delivers a captured first flight to every member, as an
// attacker holding no key: over TCP, and a TurboTLS flight over UDP and,
// its records taken out of the datagrams, over TCP. Of all of them and
// the original at most one is accepted; every refusal names a guard.
func (w *bndWorld) replay(d *bndDial) {
	t := w.t
	t.Helper()
	for _, m := range w.members {
		if d.tcp != nil {
			w.checkReplay(d, m, "TCP", w.replayTCP(m, d.tcp))
		}
		if d.udp != nil {
			w.replayUDP(m, d.udp)
			w.checkReplay(d, m, "TCP (the UDP flight's records)", w.replayTCP(m, bndFlight(t, d.udp)))
		}
	}
	if n := w.acceptedCount(d.req); n > 1 {
		t.Errorf("%s: a captured flight was accepted %d times", d.label, n)
	}
}

func (w *bndWorld) checkReplay(d *bndDial, m *bndMember, how string, r bndResult) {
	t := w.t
	t.Helper()
	reason := r.state.ZTLSRejectReason
	t.Logf("%s: replayed over %s to %s: accepted %v; server: %q", d.label, how, m.ip, r.state.EarlyDataAccepted, reason)
	switch {
	case r.state.EarlyDataAccepted:
		t.Errorf("%s: replay over %s to %s accepted", d.label, how, m.ip)
	case !strings.HasPrefix(reason, bndGuardReplay) && !strings.HasPrefix(reason, bndGuardRegister) && !strings.HasPrefix(reason, bndGuardBFE):
		t.Errorf("%s: replay over %s to %s refused with %q, not by an anti-replay guard", d.label, how, m.ip, reason)
	}
}

func (w *bndWorld) replayTCP(m *bndMember, flight []byte) bndResult {
	c, err := net.DialTimeout("tcp", m.addr(), 5*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write(flight)
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c)
	c.Close()
	return m.result("replay")
}

// replayUDP sends the datagrams from a new socket and waits for the
// server's flight: by then its application has seen any early data.
func (w *bndWorld) replayUDP(m *bndMember, dgrams [][]byte) {
	c, err := net.Dial("udp", m.addr())
	if err != nil {
		w.t.Fatal(err)
	}
	defer c.Close()
	for _, d := range dgrams {
		c.Write(d)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 2048)); err != nil {
		w.t.Fatalf("UDP replay to %s: no server flight: %v", m.ip, err)
	}
}

// runInstants drives a world through every instant. At each: fresh
// clients to every member, and per flow a prefetching client (with the
// entry it prefetched at the instant before, then one prefetched now),
// all get their early data; with restart, member 0 restarts just after;
// the flights are replayed to every member; with restart, fresh clients
// get their early data again at once (BFE keys and a fleet's Redis need
// no quiet period).
func (w *bndWorld) runInstants(flows []bndFlow, restart bool) {
	type prefetching struct {
		cache   *prevalidate.Cache
		expires time.Time
	}
	pre := map[string]*prefetching{}
	for _, f := range flows {
		c := prevalidate.NewCache(prevalidate.CacheOptions{})
		w.t.Cleanup(func() { c.Close() })
		pre[f.name] = &prefetching{cache: c}
	}
	for _, in := range bndInstants {
		w.moveTo(in.at)
		var flights []*bndDial
		for i, f := range flows {
			for _, m := range w.members {
				d := w.connect(m, f, nil, in.name+"/"+f.name+"/fresh@"+m.ip)
				w.wantAccepted(d, f)
				flights = append(flights, d)
			}
			p, m := pre[f.name], w.members[i%len(w.members)]
			for _, when := range []string{"before", "now"} {
				if when == "now" {
					p.expires = w.prefetch(m, f, p.cache, in.name+"/"+f.name+"/prefetch")
				}
				d := w.connect(m, f, p.cache, in.name+"/"+f.name+"/prefetched-"+when+"@"+m.ip)
				w.wantAccepted(d, f)
				if want := w.clk.Now().Before(p.expires); (d.rep.Prefetch == PrefetchValidated) != want {
					w.t.Errorf("%s: prefetch %q, want the entry used: %v (it expires %s)", d.label, d.rep.Prefetch, want, p.expires.Format(time.RFC3339))
				}
				flights = append(flights, d)
			}
		}
		if restart {
			w.clk.Add(bndStep)
			w.restart(0)
		}
		w.clk.Add(bndStep)
		for _, d := range flights {
			w.replay(d)
		}
		if restart {
			for _, f := range flows {
				for _, m := range w.members {
					w.wantAccepted(w.connect(m, f, nil, in.name+"/"+f.name+"/after-restart@"+m.ip), f)
				}
			}
		}
	}
}

// runEvent starts a world (a v1 server, or with rp a BFE fleet) and at
// the instant: flights from fresh clients (accepted), a prefetch per
// flow; then the event; then the flights replayed to every member and
// new clients, fresh and with the prefetched entry, whose early data is
// refused for safety, saying why; then, later, fresh clients whose early
// data is back when the guards no longer need to refuse it.
func (s *bndSuite) runEvent(t *testing.T, in bndInstant, fleet bool, rp *bndRedisPair, event string) {
	flows := bndV1Flows
	if fleet {
		flows = bndAllFlows
	}
	w := s.world(t, event+"@"+in.name, fleet, rp)
	w.moveTo(in.at)
	var flights []*bndDial
	caches := make([]*prevalidate.Cache, len(flows))
	for i, f := range flows {
		m := w.members[i%len(w.members)]
		d := w.connect(m, f, nil, f.name+"/before@"+m.ip)
		w.wantAccepted(d, f)
		flights = append(flights, d)
		caches[i] = prevalidate.NewCache(prevalidate.CacheOptions{})
		t.Cleanup(func() { caches[i].Close() })
		w.prefetch(m, f, caches[i], f.name+"/prefetch")
	}
	w.clk.Add(bndStep)
	switch event {
	case "restart":
		w.restart(0)
	case "flushall":
		if _, err := bndRedisDo(rp.a, "FLUSHALL"); err != nil {
			t.Fatal(err)
		}
	case "failover":
		w.proxy.switchTo(rp.b)
	}
	w.clk.Add(bndStep)
	for _, d := range flights {
		w.replay(d)
	}
	for i, f := range flows {
		// Both guards measure from before the loss: the register from
		// the flight's earliest acceptable time, the puncture log from
		// the key's epoch.
		guard := bndGuardRegister
		if f.bfe {
			guard = bndGuardBFE
		}
		for _, m := range w.members {
			w.wantRefused(w.connect(m, f, nil, f.name+"/after@"+m.ip), guard)
		}
		m := w.members[i%len(w.members)]
		w.wantRefused(w.connect(m, f, caches[i], f.name+"/prefetched-after@"+m.ip), guard)
	}
	// Recovery: the guards refuse only what may predate the event. W and
	// the skew bound after it, v1 early data is back. A fleet's BFE early
	// data is back with the first key whose epoch began, less the skew
	// bound, no earlier than Redis's memory did again: the first use
	// after the event (the replays, 1µs after it) in whole milliseconds,
	// rounded up (redisreg). A loss in the last second before a rollover
	// so costs the next period's key too.
	lost := s.nb.Add(in.at).Add(bndStep)
	memory := lost.Add(bndStep).Truncate(time.Millisecond).Add(time.Millisecond)
	next := lost.Truncate(zdata.EpochLength).Add(zdata.EpochLength)
	for _, r := range []struct {
		name string
		at   time.Time
	}{{"W+skew+1s later", lost.Add(12 * time.Second)}, {"next period+12s", next.Add(12 * time.Second)}} {
		w.moveTo(r.at.Sub(s.nb))
		bfeBack := rp == nil || !r.at.Truncate(zdata.EpochLength).Add(-redisreg.DefaultMaxClockSkew).Before(memory)
		for _, f := range flows {
			for _, m := range w.members {
				d := w.connect(m, f, nil, f.name+"/"+r.name+"@"+m.ip)
				if f.bfe && !bfeBack {
					w.wantRefused(d, bndGuardBFE)
				} else {
					w.wantAccepted(d, f)
				}
			}
		}
	}
}

// bndRedisPair is a fleet's Redis and the one a failover reaches, which
// lacks the data (a replica that was behind, or a restart without
// persistence).
type bndRedisPair struct{ a, b string }

func bndStartRedisPair(t *testing.T) *bndRedisPair {
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make deps)")
	}
	return &bndRedisPair{a: bndStartRedis(t), b: bndStartRedis(t)}
}

// bndStartRedis starts redis-server without persistence on a free port
// and stops it (by its pid) when the test ends.
func bndStartRedis(t *testing.T) string {
	for try := 0; try < 5; try++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", t.TempDir(), "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		t.Cleanup(func() { cmd.Process.Kill(); <-done })
		pid := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
		for i := 0; i < 500; i++ {
			select {
			case <-done:
				i = 500 // exited: the port was taken
				continue
			default:
			}
			if info, err := bndRedisDo(addr, "INFO", "server"); err == nil {
				if strings.Contains(info, pid) {
					return addr
				}
				break // another process's Redis
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
	}
	t.Fatal("redis-server did not come up")
	return ""
}

// bndRedisDo runs one command on a new connection and returns its reply
// (a status, integer or bulk string).
func bndRedisDo(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c, b.String()); err != nil {
		return "", err
	}
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return "", fmt.Errorf("redis: empty reply")
	case line[0] == '+' || line[0] == ':':
		return line[1:], nil
	case line[0] == '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redis: reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redis: %s", line)
}

// bndProxy is the register's address: it forwards to one Redis, and a
// failover points it at another, cutting the connections open (as the
// old primary's end does).
type bndProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	conns  map[net.Conn]bool
}

func bndListenProxy(t *testing.T, target string) *bndProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &bndProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); p.cut(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			target := p.target
			p.mu.Unlock()
			up, err := net.DialTimeout("tcp", target, 2*time.Second)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(up, c); up.Close() }()
			go func() { defer wg.Done(); io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

func (p *bndProxy) addr() string { return p.ln.Addr().String() }

func (p *bndProxy) switchTo(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
	p.cut()
}

func (p *bndProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
	}
}
