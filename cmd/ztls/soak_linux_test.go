//go:build linux

package main

// The soak (issue 25, item 5; `make soak`, docs/soak.md): a fleet of three
// `ztls serve` members made from one seed, each with its own Z-data
// directory and BFE keys, sharing anti-replay register and puncture log in
// a redis-server without persistence; the authority (`ztls dns serve`) on
// their directories; all on loopback. For ZTLS_SOAK_PERIODS key periods of
// a clock that runs ZTLS_CLOCK_RATE times as fast as the system's
// (internal/clock), honest clients (package dial, half of them with BFE)
// connect a few times a second through a proxy that also records their
// first flights (soak_proxy_linux_test.go) and replays each to every
// member, while the soak kills members with SIGKILL and restarts them and
// restarts Redis (a data loss). The members' logs (-v) say, per
// connection, whether early data was accepted: a flight accepted twice
// fails the soak. It reports connections, the ZTLS share, fallbacks by
// reason, early data refused for safety after kills and Redis losses,
// replays, and each member's memory and goroutines at start and end.
//
//	ZTLS_SOAK=1 go test ./cmd/ztls -run '^TestSoak$' -v -timeout 0
//
// Member 2 is never killed: its figures at start and end are those of one
// process across the whole run.

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

const (
	soakMembers = 3
	soakHost    = "www.ztls.test"
	// soakLead is the real time between the clock's anchor and the first
	// measured period: setup (Z-data with BFE keys, processes) and a
	// warm-up, during which the fresh Redis's memory begins (a new Redis
	// counts as lost data: BFE early data is refused until the next
	// epoch, so that epoch starts the measurement).
	soakLead = 40 * time.Second
)

// soakConfig is the run's size, from the environment.
type soakConfig struct {
	periods   int     // ZTLS_SOAK_PERIODS: measured key periods (1 h of the ztls clock each)
	rate      float64 // ZTLS_SOAK_RATE: the clock's rate (ZTLS_CLOCK_RATE of every process)
	cps       float64 // ZTLS_SOAK_CPS: honest connections per real second
	raceEvery int     // one connection in raceEvery (drawn) is raced by its replays
	bfeConns  int     // --bfe-connections: room for each period's BFE flights, twice over
	downFor   time.Duration
	report    string // ZTLS_SOAK_REPORT: also write the report to this file
}

func soakConfigFromEnv(t *testing.T) soakConfig {
	c := soakConfig{periods: 15, rate: 30, cps: 4, raceEvery: 4, downFor: 3 * time.Second, report: os.Getenv("ZTLS_SOAK_REPORT")}
	for _, v := range []struct {
		name string
		f    func(string) error
	}{
		{"ZTLS_SOAK_PERIODS", func(s string) (err error) { c.periods, err = strconv.Atoi(s); return }},
		{"ZTLS_SOAK_RATE", func(s string) (err error) { c.rate, err = strconv.ParseFloat(s, 64); return }},
		{"ZTLS_SOAK_CPS", func(s string) (err error) { c.cps, err = strconv.ParseFloat(s, 64); return }},
	} {
		if s := os.Getenv(v.name); s != "" {
			if err := v.f(s); err != nil {
				t.Fatalf("%s=%q: %v", v.name, s, err)
			}
		}
	}
	if c.periods < 1 || c.cps <= 0 || c.rate < 1 || c.rate > 120 {
		t.Fatalf("soak: want ZTLS_SOAK_PERIODS >= 1, ZTLS_SOAK_CPS > 0 and ZTLS_SOAK_RATE from 1 to 120 (the freshness window is 10 s of the clock: %v real at 120)", clockReal(10*time.Second, 120))
	}
	perPeriod := c.cps / 2 * zdata.EpochLength.Seconds() / c.rate // BFE clients' connections
	c.bfeConns = max(256, int(math.Ceil(2*perPeriod/64))*64)
	return c
}

func clockReal(d time.Duration, rate float64) time.Duration {
	return time.Duration(float64(d) / rate)
}

// soakClient is one honest connection attempt.
type soakClient struct {
	id     int
	bfe    bool      // a client with BFE (else --no-bfe: the v1 records)
	at     time.Time // the ztls clock when it started
	rep    dial.Report
	err    string
	flight *soakFlight // the proxy's record of its (last) connection
}

// soakEvent is a kill or a Redis restart, planned and then done.
type soakEvent struct {
	at      time.Time // planned, ztls clock
	redis   bool
	members []int
	period  int
	// done
	did, back time.Time // ztls clock: when it happened, when all was up again
	err       string
}

func (e *soakEvent) String() string {
	what := "Redis restarted (data lost)"
	if !e.redis {
		var ms []string
		for _, m := range e.members {
			ms = append(ms, "member "+strconv.Itoa(m))
		}
		what = strings.Join(ms, " and ") + " SIGKILLed and restarted"
	}
	return fmt.Sprintf("%s at %s of period %d", what, e.at.Sub(e.at.Truncate(zdata.EpochLength)).String(), e.period)
}

type soak struct {
	t    *testing.T
	cfg  soakConfig
	bin  string
	dir  string
	port int
	e0   time.Time // ztls clock: start of the first measured period
	end  time.Time

	members    [soakMembers]*soakProc
	metricAddr [soakMembers]string
	redis      *soakProc
	redisAddr  string
	dns        *soakProc
	dnsAddr    string
	proxy      *soakProxy
	res        *resolver.Resolver
	pool       *x509.CertPool
	started    time.Time // real

	replays sync.WaitGroup
	clients sync.WaitGroup
	doing   sync.WaitGroup // events under way

	mu       sync.Mutex
	stopping bool
	pending  map[string][]*soakConn
	orphans  map[string][]soakLogLine
	conns    []*soakConn // every connection to a member the soak made or proxied
	all      []*soakClient
	events   []*soakEvent
	warnings map[string]int // "member 0: WARN msg" → times
	samples  [soakMembers + 1][]soakSample
	tails    [soakMembers + 1]*soakTail
}

func (s *soak) memberAddr(m int) string {
	return net.JoinHostPort(fmt.Sprintf("127.0.0.%d", m+1), strconv.Itoa(s.port))
}

func TestSoak(t *testing.T) {
	if os.Getenv("ZTLS_SOAK") != "1" {
		t.Skip("the soak runs with ZTLS_SOAK=1 (make soak; tens of minutes)")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make deps installs it)")
	}
	cfg := soakConfigFromEnv(t)
	s := &soak{t: t, cfg: cfg, pending: map[string][]*soakConn{}, orphans: map[string][]soakLogLine{}, warnings: map[string]int{}}
	s.bin = ztlsBinary(t) // built before the clock starts running fast
	s.startClock()
	s.setUp()
	s.run()
	s.finish()
}

// startClock sets the clock of this process and of every process it
// starts: ZTLS_CLOCK_RATE from an anchor now, and an offset that puts the
// first measured period's start soakLead of real time ahead.
func (s *soak) startClock() {
	t := s.t
	anchor := time.Now() // real time: the anchor is an instant of the system clock
	next := anchor.Truncate(zdata.EpochLength).Add(zdata.EpochLength)
	lead := time.Duration(float64(soakLead) * s.cfg.rate)
	offset := next.Add(-lead).Sub(anchor.Round(0)).Round(time.Millisecond)
	t.Setenv(clock.EnvOffset, offset.String())
	t.Setenv(clock.EnvRate, strconv.FormatFloat(s.cfg.rate, 'g', -1, 64))
	t.Setenv(clock.EnvAnchor, anchor.UTC().Format(time.RFC3339Nano))
	rate, a, err := clock.Rate()
	if d, _ := clock.Offset(); err != nil || rate != s.cfg.rate || !a.Equal(anchor.Round(0)) || d != offset {
		t.Fatalf("this process read its clock before the soak set it (rate %v, anchor %v, offset %v, %v): run the soak alone, -run '^TestSoak$'", rate, a, d, err)
	}
	s.started = anchor
	s.e0 = next
	s.end = next.Add(time.Duration(s.cfg.periods) * zdata.EpochLength)
	t.Logf("soak: %d periods of %v at clock rate %g (%v real each; freshness window 10 s = %v real), %g connections/s, BFE keys for %d connections; the clock reads %s, the first measured period starts at %s",
		s.cfg.periods, zdata.EpochLength, s.cfg.rate, clock.Real(zdata.EpochLength), clock.Real(10*time.Second), s.cfg.cps, s.cfg.bfeConns,
		clock.Now().UTC().Format(time.RFC3339), s.e0.UTC().Format(time.RFC3339))
}

// setUp makes the PKI and the Z-data, and starts Redis, the members, the
// authority and the proxy.
func (s *soak) setUp() {
	t := s.t
	// Kept after the run, for its logs (the report names it).
	dir, err := os.MkdirTemp("", "ztls-soak-")
	if err != nil {
		t.Fatal(err)
	}
	s.dir = dir
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{soakHost}})
	cert, key := leaf.WritePEM(t, s.dir)
	s.pool = ca.Pool()
	seed := make([]byte, 32)
	rand.Read(seed)
	seedFile := filepath.Join(s.dir, "fleet.seed")
	if err := os.WriteFile(seedFile, []byte(hex.EncodeToString(seed)), 0o600); err != nil {
		t.Fatal(err)
	}
	s.port = freePort(t)
	p := strconv.Itoa(s.port)
	var wg sync.WaitGroup
	errs := make([]error, soakMembers)
	for i := range soakMembers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command(s.bin, "zdata", "new", "--host", soakHost, "--port", p, "--cert", cert, "--key", key,
				"--out", s.zdataDir(i), "--seed-file", seedFile, "--bfe-connections", strconv.Itoa(s.cfg.bfeConns)).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("zdata new: %v\n%s", err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	s.redisAddr = "127.0.0.1:" + strconv.Itoa(freePort(t))
	_, rport, _ := net.SplitHostPort(s.redisAddr)
	s.redis = &soakProc{name: "redis", path: "redis-server", logPath: filepath.Join(s.dir, "redis.log"),
		args: []string{"--port", rport, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"}}
	s.startRedis()
	t.Cleanup(func() { s.redis.kill() })

	for i := range soakMembers {
		s.metricAddr[i] = "127.0.0.1:" + strconv.Itoa(freePort(t))
		s.members[i] = &soakProc{name: fmt.Sprintf("member %d", i), path: s.bin, logPath: filepath.Join(s.dir, fmt.Sprintf("member%d.log", i)),
			args: []string{"serve", "--listen", s.memberAddr(i), "--zdata", s.zdataDir(i), "--respond", "hello", "-v",
				"--log-format", "json", "--strike-register", "redis://" + s.redisAddr, "--metrics", s.metricAddr[i]}}
		s.tails[i] = &soakTail{path: s.members[i].logPath}
		m := s.members[i]
		t.Cleanup(func() { m.kill() })
	}
	for i := range soakMembers {
		if err := s.startMember(i); err != nil {
			t.Fatal(err)
		}
	}

	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, strings.Replace(testZone, "www IN A 127.0.0.1", "www IN A 127.0.0.10", 1))
	// No --metrics: dns serve panics with it on several directories of
	// one service (a duplicate ztls_zdata_live_keys gauge); its memory
	// comes from /proc instead.
	s.dns = &soakProc{name: "dns serve", path: s.bin, logPath: filepath.Join(s.dir, "dns.log"),
		args: []string{"dns", "serve", "--zone", zone, "--listen", "127.0.0.1:0", "--log-format", "json", "-v"}}
	for i := range soakMembers {
		s.dns.args = append(s.dns.args, "--zdata", s.zdataDir(i))
	}
	s.tails[soakMembers] = &soakTail{path: s.dns.logPath}
	off, err := s.dns.start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.dns.kill() })
	line, err := s.dns.waitLog(off, "serving udp on", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l, _ := parseLogLine(line)
	s.dnsAddr = l.Addr
	s.dns.setUp(true)

	if s.res, err = resolver.New(resolver.Config{Servers: []string{s.dnsAddr}}); err != nil {
		t.Fatal(err)
	}
	if s.proxy, err = newSoakProxy(s, net.JoinHostPort("127.0.0.10", p)); err != nil {
		t.Fatal(err)
	}
	t.Logf("soak: set up in %v (clock %s): members on 127.0.0.1-3:%s, proxy on 127.0.0.10:%s, authority on %s, Redis on %s, logs in %s",
		time.Since(s.started).Round(time.Millisecond), clock.Now().UTC().Format(time.RFC3339), p, p, s.dnsAddr, s.redisAddr, s.dir)
}

func (s *soak) zdataDir(i int) string { return filepath.Join(s.dir, fmt.Sprintf("zd%d", i)) }

func (s *soak) startRedis() error {
	if _, err := s.redis.start(); err != nil {
		return err
	}
	if err := soakWaitTCP(s.redisAddr, 10*time.Second); err != nil {
		return err
	}
	s.redis.setUp(true)
	return nil
}

// startMember starts member i and waits until it serves ZTLS.
func (s *soak) startMember(i int) error {
	m := s.members[i]
	off, err := m.start()
	if err != nil {
		return err
	}
	if _, err := m.waitLog(off, `"msg":"ZTLS on"`, 30*time.Second); err != nil {
		return err
	}
	m.setUp(true)
	return nil
}

// run drives the load, the kills and the Redis restarts until the end of
// the last measured period, with a progress line every 15 s.
func (s *soak) run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.tailLogs(ctx)
	go s.load(ctx)
	plan := s.plan()
	for _, e := range plan {
		go s.do(ctx, e)
	}
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	sampled := false
	for {
		now := clock.Now()
		if !sampled && !now.Before(s.e0) {
			s.sample()
			sampled = true
		}
		if !now.Before(s.end) {
			break
		}
		select {
		case <-tick.C:
			s.sample()
			s.progress()
		case <-time.After(clock.Real(min(s.end.Sub(now), time.Minute)) + time.Millisecond):
		}
	}
	cancel()
	waitTimeout(&s.clients, 20*time.Second)
	waitTimeout(&s.replays, 10*time.Second)
	s.mu.Lock()
	s.stopping = true // no event starts from now on
	s.mu.Unlock()
	s.doing.Wait() // a kill or Redis restart under way: until all is back up
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// plan is the kills and Redis restarts of the measured periods: each
// period one member is killed (0 and 1 in turn; both at once every fourth
// period), every third period in its last minute; every fourth period
// Redis restarts, alternately in its middle and in its last minute (the
// rollover's edge cases of docs/security.md). Member 2 lives throughout.
func (s *soak) plan() []*soakEvent {
	var out []*soakEvent
	for p := range s.cfg.periods {
		start := s.e0.Add(time.Duration(p) * zdata.EpochLength)
		at := 20*time.Minute + time.Duration(p*13%30)*time.Minute
		if p%3 == 1 {
			at = 59*time.Minute + 30*time.Second
		}
		ev := &soakEvent{at: start.Add(at), members: []int{p % 2}, period: p}
		if p%4 == 2 {
			ev.members = []int{0, 1}
		}
		out = append(out, ev)
		if p%4 == 3 || (s.cfg.periods < 4 && p == s.cfg.periods-1) {
			at := 30 * time.Minute
			if p%8 == 7 {
				at = 59*time.Minute + 40*time.Second
			}
			out = append(out, &soakEvent{at: start.Add(at), redis: true, period: p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	s.mu.Lock()
	s.events = out
	s.mu.Unlock()
	return out
}

// do waits for an event's time and carries it out.
func (s *soak) do(ctx context.Context, e *soakEvent) {
	for {
		d := e.at.Sub(clock.Now())
		if d <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(clock.Real(d), time.Second)):
		}
	}
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.doing.Add(1)
	defer s.doing.Done()
	e.did = clock.Now()
	s.mu.Unlock()
	var err error
	if e.redis {
		s.redis.kill()
		time.Sleep(time.Second)
		err = s.startRedis()
	} else {
		for _, m := range e.members {
			s.members[m].kill()
		}
		time.Sleep(s.cfg.downFor)
		for _, m := range e.members {
			if serr := s.startMember(m); serr != nil {
				err = serr
			}
		}
	}
	s.mu.Lock()
	e.back = clock.Now()
	if err != nil {
		e.err = err.Error()
	}
	s.mu.Unlock()
	s.t.Logf("soak: %s: back after %v of the clock%s", e, e.back.Sub(e.did).Round(time.Second), map[bool]string{true: ": " + e.err}[err != nil])
}

// load starts honest connections at cfg.cps until ctx ends; half of them
// are BFE clients.
func (s *soak) load(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / s.cfg.cps))
	defer tick.Stop()
	sem := make(chan struct{}, 64)
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case sem <- struct{}{}:
		default:
			continue // 64 in flight: the machine is overloaded; skip
		}
		s.clients.Add(1)
		go func() {
			defer func() { <-sem; s.clients.Done() }()
			s.connect(n)
		}()
	}
}

// connect is one honest client: a replay-safe request as early data.
func (s *soak) connect(n int) {
	c := &soakClient{id: n, bfe: n%2 == 0, at: clock.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	res, err := dial.Connect(ctx, net.JoinHostPort(soakHost, strconv.Itoa(s.port)), dial.Options{
		Mode:     "auto",
		TLS:      &tls13.Config{RootCAs: s.pool, ServerName: soakHost},
		Resolver: s.res,
		// Wide, so that a loaded machine's DNS does not count as a
		// fallback: the soak looks for rotation, kills and Redis.
		ZDataBudget:  500 * time.Millisecond,
		Request:      []byte(fmt.Sprintf("GET /soak/%d HTTP/1.1\r\nHost: %s\r\n\r\n", n, soakHost)),
		ReplaySafe:   true,
		ReadResponse: 64,
		Memory:       dial.NewMemory(), // each client a different user
		NoBFE:        !c.bfe,
	})
	switch {
	case err != nil:
		c.err = err.Error()
		if res != nil {
			c.rep = res.Report
		}
	default:
		c.rep = res.Report
		if res.Conn != nil {
			c.flight = s.proxy.flightOf(res.Conn.LocalAddr().String())
			res.Conn.Close()
		}
		if res.Err != nil {
			c.err = "after the handshake: " + res.Err.Error()
		}
	}
	s.mu.Lock()
	s.all = append(s.all, c)
	s.mu.Unlock()
}

// expect registers a connection to member m from remote, to be matched
// with the member's log line about it.
func (s *soak) expect(m int, remote, kind string, f *soakFlight) *soakConn {
	sc := &soakConn{member: m, remote: remote, kind: kind, flight: f}
	key := strconv.Itoa(m) + " " + remote
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, sc)
	if kind != "honest" {
		f.replays = append(f.replays, sc)
	}
	if ls := s.orphans[key]; len(ls) > 0 {
		s.orphans[key] = ls[1:]
		sc.apply(ls[0])
		return sc
	}
	s.pending[key] = append(s.pending[key], sc)
	return sc
}

// addReplay records a replay that could not reach its member.
func (s *soak) addReplay(f *soakFlight, sc *soakConn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conns = append(s.conns, sc)
	f.replays = append(f.replays, sc)
}

func (c *soakConn) apply(l soakLogLine) {
	c.verdict = true
	if l.Msg == "connection" {
		c.state = l.State
	} else {
		c.ended = l.Err
	}
}

// tailLogs reads the members' and the authority's logs as they grow.
func (s *soak) tailLogs(ctx context.Context) {
	for {
		s.readLogs()
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *soak) readLogs() {
	for i, tl := range s.tails {
		name := "dns serve"
		if i < soakMembers {
			name = "member " + strconv.Itoa(i)
		}
		for _, raw := range tl.lines() {
			l, ok := parseLogLine(raw)
			if !ok {
				if strings.TrimSpace(raw) != "" && !strings.HasPrefix(raw, "ztls: warning: ZTLS_CLOCK_RATE") {
					s.note(name + ": " + soakShorten(raw))
				}
				continue
			}
			if l.Level == "WARN" || l.Level == "ERROR" {
				msg := name + ": " + l.Level + " " + l.Msg
				if l.Err != "" {
					msg += ": " + soakShorten(l.Err)
				}
				s.note(msg)
			}
			if i == soakMembers || (l.Msg != "connection" && l.Msg != "connection ended") {
				continue
			}
			key := strconv.Itoa(i) + " " + l.Remote
			s.mu.Lock()
			if q := s.pending[key]; len(q) > 0 {
				q[0].apply(l)
				if len(q) == 1 {
					delete(s.pending, key)
				} else {
					s.pending[key] = q[1:]
				}
			} else if l.Msg == "connection" {
				s.orphans[key] = append(s.orphans[key], l)
			}
			s.mu.Unlock()
		}
	}
}

func (s *soak) note(w string) {
	s.mu.Lock()
	s.warnings[w]++
	s.mu.Unlock()
}

// soakShorten is a log line with its numbers masked, at most 160
// characters: lines that differ only in numbers count as one.
func soakShorten(s string) string {
	var b strings.Builder
	digit := false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			if !digit {
				b.WriteByte('#')
			}
			digit = true
			continue
		}
		digit = false
		b.WriteRune(r)
	}
	out := b.String()
	if len(out) > 160 {
		out = out[:160] + "…"
	}
	return out
}

// sample reads every member's and the authority's resident memory and
// goroutines.
func (s *soak) sample() {
	for i := range soakMembers + 1 {
		var v map[string]float64
		var err error
		p := s.dns
		if i < soakMembers {
			p = s.members[i]
		}
		if !p.isUp() {
			continue
		}
		if i < soakMembers {
			v, err = scrapeMetrics(s.metricAddr[i], "process_resident_memory_bytes", "go_goroutines")
		} else {
			v, err = procRSS(p.pid())
		}
		if err != nil {
			continue
		}
		s.mu.Lock()
		s.samples[i] = append(s.samples[i], soakSample{sim: clock.Now(), life: p.lives, rss: v["process_resident_memory_bytes"], goroutines: v["go_goroutines"]})
		s.mu.Unlock()
	}
}

// progress prints one line: where the clock is and the counts so far.
func (s *soak) progress() {
	now := clock.Now()
	t := s.tally(false)
	period := "warm-up"
	if !now.Before(s.e0) {
		period = fmt.Sprintf("period %d/%d", int(now.Sub(s.e0)/zdata.EpochLength)+1, s.cfg.periods)
	}
	var mem []string
	s.mu.Lock()
	for i := range soakMembers {
		if n := len(s.samples[i]); n > 0 {
			x := s.samples[i][n-1]
			mem = append(mem, fmt.Sprintf("m%d %.0f MB/%.0f g", i, x.rss/1e6, x.goroutines))
		}
	}
	s.mu.Unlock()
	s.t.Logf("soak: %s, clock %s (+%v real): %d connections, early data accepted %d (%.1f%%; BFE %d), fallbacks %d, errors %d; replays %d (accepted %d, no verdict %d), flights accepted twice %d; %s",
		period, now.UTC().Format("15:04:05"), time.Since(s.started).Round(time.Second), t.conns, t.accepted, pct(t.accepted, t.conns), t.bfeAccepted,
		t.fallbacks, t.errors, t.replays, t.replaysAccepted, t.replaysNoVerdict, t.twice, strings.Join(mem, ", "))
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

// finish stops the load, reads the last log lines and metrics, stops every
// process (members with SIGTERM: a clean stop) and reports.
func (s *soak) finish() {
	t := s.t
	time.Sleep(1500 * time.Millisecond) // the members' last log lines
	s.readLogs()
	s.sample()
	s.proxy.close()
	var stops []string
	for i, m := range s.members {
		clean := m.stop(40 * time.Second)
		stops = append(stops, fmt.Sprintf("member %d (%d lives): %s", i, m.lives, map[bool]string{true: "stopped on SIGTERM", false: "killed"}[clean]))
	}
	stops = append(stops, "dns serve: "+map[bool]string{true: "stopped on SIGTERM", false: "killed"}[s.dns.stop(10*time.Second)])
	stops = append(stops, fmt.Sprintf("redis-server (%d lives): %s", s.redis.lives, map[bool]string{true: "stopped on SIGTERM", false: "killed"}[s.redis.stop(10*time.Second)]))
	var left []string
	for _, p := range append(s.members[:], s.dns, s.redis) {
		if p.running() {
			left = append(left, p.name)
		}
	}
	s.readLogs()
	if err := s.writeClients(); err != nil {
		t.Error(err)
	}
	r := s.report(stops, left)
	t.Log("soak report:\n" + r)
	if s.cfg.report != "" {
		if err := os.WriteFile(s.cfg.report, []byte(r), 0o644); err != nil {
			t.Error(err)
		}
	}
	tl := s.tally(true)
	if tl.twice > 0 {
		t.Errorf("soak: %d first flights had their early data accepted twice or more (a replay reached a server's application)", tl.twice)
	}
	if len(left) > 0 {
		t.Errorf("soak: processes still running after the stop: %v", left)
	}
	if tl.replaysTested == 0 {
		t.Error("soak: no replay reached a member within its freshness window: the soak tested nothing")
	}
}
