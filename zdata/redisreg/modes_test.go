package redisreg

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// The register on each way of reaching Redis (issue 28): TLS, ACL users,
// Sentinel and Cluster, each against real servers on loopback that the
// test starts and stops. Sentinel and Cluster take a few seconds each
// (a failover is waited for); -short skips them.

// tlsRedis is a redis-server with a plaintext port (s.addr, for the
// test's own inspection) and a TLS port that verifies clients' certificates
// against ca when authClients.
type tlsRedis struct {
	s       *redisServer
	tlsAddr string
	ca      *testpki.CA
	client  tls.Certificate // issued by ca
}

func startTLSRedis(t testing.TB, authClients bool) *tlsRedis {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	cert, key := ca.Issue(t, testpki.LeafOpts{Client: true}).WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	cl := ca.Issue(t, testpki.LeafOpts{Client: true})
	auth := "no"
	if authClients {
		auth = "yes"
	}
	tp := freePort(t)
	s := startRedis(t, 0, "--tls-port", strconv.Itoa(tp), "--tls-cert-file", cert, "--tls-key-file", key,
		"--tls-ca-cert-file", caFile, "--tls-auth-clients", auth)
	return &tlsRedis{s: s, tlsAddr: "127.0.0.1:" + strconv.Itoa(tp), ca: ca,
		client: tls.Certificate{Certificate: cl.Chain, PrivateKey: cl.Key}}
}

// basicSuite: two fleet members sharing the register accept a ClientHello
// once and refuse its replay, on every hash tag; BFE punctures race
// between them, exactly one wins.
func basicSuite(t *testing.T, opts Options) {
	t.Helper()
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	opts.Now, opts.Timeout = clk.Now, 3*time.Second
	a, b := mustNew(t, opts), mustNew(t, opts)
	warm(t, a, clk)
	clk.Add(time.Minute)
	now := clk.Now()
	for i := range 48 { // every tag, most of them twice
		k := []byte("key " + strconv.Itoa(i))
		fresh, err := a.CheckAndInsert(k, now, now, now.Add(window))
		mustFresh(t, string(k), fresh, err)
		if fresh, err := b.CheckAndInsert(k, now, now, now.Add(window)); fresh || err != nil {
			t.Fatalf("%s replayed to the other member: fresh=%v err=%v, want a replay", k, fresh, err)
		}
	}
	epoch := uint64(clk.Now().Add(time.Second).Unix())
	la, lb := a.PunctureLog("server.test", 443, time.Hour), b.PunctureLog("server.test", 443, time.Hour)
	clk.Add(time.Minute)
	pos := []uint32{3, 77, 1024}
	var wg sync.WaitGroup
	var wins sync.Map
	for i, l := range []*PunctureLog{la, lb, la, lb} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			was, err := l.TestAndSet(context.Background(), epoch, pos)
			if err != nil {
				t.Error(err)
				return
			}
			if !was[0] && !was[1] && !was[2] {
				wins.Store(i, true)
			}
		}()
	}
	wg.Wait()
	n := 0
	wins.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d members saw the ciphertext's positions unset, want exactly 1", n)
	}
}

func mustNew(t *testing.T, opts Options) *Register {
	t.Helper()
	r, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func TestRegisterTLS(t *testing.T) {
	srv := startTLSRedis(t, true)
	good := Options{Addr: srv.tlsAddr, TLS: &tls.Config{RootCAs: srv.ca.Pool(), Certificates: []tls.Certificate{srv.client}}}
	t.Run("mutual TLS", func(t *testing.T) { basicSuite(t, good) })

	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	now := clk.Now()
	other := testpki.NewCA(t, "ecdsa-p256")
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		// Someone on the path (or a wrong server) with a certificate
		// from another CA: refused before anything is sent.
		{"wrong CA", Options{Addr: srv.tlsAddr, TLS: &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{srv.client}}}, "certificate signed by unknown authority"},
		{"no client certificate", Options{Addr: srv.tlsAddr, TLS: &tls.Config{RootCAs: srv.ca.Pool()}}, ""},
		{"plaintext to the TLS port", Options{Addr: srv.tlsAddr}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Now, tc.opts.Timeout = clk.Now, time.Second
			r := mustNew(t, tc.opts)
			fresh, err := r.CheckAndInsert([]byte("k"), now, now, now.Add(window))
			if fresh || err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("fresh=%v err=%v, want an error with %q", fresh, err, tc.want)
			}
		})
	}
}

// TestRegisterACL: a Redis user allowed exactly what the register needs
// works; one without EVAL is refused with an error that says so.
func TestRegisterACL(t *testing.T) {
	s := startRedis(t, 0)
	// What docs/security.md tells operators to grant (the scripts' own
	// commands are checked against the user too).
	if rep := s.raw(t, "ACL", "SETUSER", "ztls", "on", ">ztls-pw", "~"+DefaultPrefix+"*", "resetchannels",
		"-@all", "+evalsha", "+eval", "+get", "+set", "+setbit", "+pexpire", "+info", "+config|get", "+ping"); rep.str != "OK" {
		t.Fatalf("ACL SETUSER: %+v", rep)
	}
	if rep := s.raw(t, "ACL", "SETUSER", "noeval", "on", ">noeval-pw", "~"+DefaultPrefix+"*", "-@all",
		"+get", "+set", "+info", "+config|get", "+ping"); rep.str != "OK" {
		t.Fatalf("ACL SETUSER: %+v", rep)
	}
	t.Run("least privilege", func(t *testing.T) {
		basicSuite(t, Options{Addr: s.addr, Username: "ztls", Password: "ztls-pw"})
	})
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := mustNew(t, Options{Addr: s.addr, Username: "noeval", Password: "noeval-pw", Now: clk.Now})
	now := clk.Now()
	fresh, err := r.CheckAndInsert([]byte("k"), now, now, now.Add(window))
	if fresh || !errors.Is(err, ErrScriptDenied) || !strings.Contains(err.Error(), "EVAL") {
		t.Fatalf("user without EVAL: fresh=%v err=%v, want ErrScriptDenied", fresh, err)
	}
	wrong := mustNew(t, Options{Addr: s.addr, Username: "ztls", Password: "not-it", Now: clk.Now})
	fresh, err = wrong.CheckAndInsert([]byte("k"), now, now, now.Add(window))
	if fresh || err == nil || !strings.Contains(err.Error(), "AUTH refused") || strings.Contains(err.Error(), "not-it") {
		t.Fatalf("wrong password: fresh=%v err=%v, want AUTH refused, without the password", fresh, err)
	}
}

// sentinelSetup is a primary, its replica and one Sentinel watching them
// as "ztls" (quorum 1).
type sentinelSetup struct {
	primary, replica, sentinel *redisServer
}

// downAfter is how long the Sentinel waits before it takes the primary
// for down (a forced SENTINEL FAILOVER does not wait).
func startSentinel(t *testing.T, downAfter time.Duration) *sentinelSetup {
	t.Helper()
	if testing.Short() {
		t.Skip("Sentinel failover: not with -short")
	}
	if _, err := exec.LookPath("redis-sentinel"); err != nil {
		t.Skip("redis-sentinel not installed (make deps)")
	}
	// A full resync starts at once (Redis 7 waits 5 s for more replicas).
	p := startRedis(t, 0, "--repl-diskless-sync-delay", "0")
	_, pport, _ := strings.Cut(p.addr, ":")
	r := startRedis(t, 0, "--repl-diskless-sync-delay", "0", "--replicaof", "127.0.0.1", pport)
	waitFor(t, "the replica's link", func() bool { return r.info(t, "replication", "master_link_status") == "up" })
	var sn *redisServer
	for try := 0; ; try++ {
		port := freePort(t)
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor ztls 127.0.0.1 %s 1\n"+
			"sentinel down-after-milliseconds ztls %d\nsentinel failover-timeout ztls 10000\n", port, dir, pport, downAfter.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		s, out, err := launch(t, port, []string{conf, "--sentinel"}, nil)
		if err == nil {
			sn = s
			break
		}
		if try == 4 {
			t.Fatalf("redis-sentinel: %v: %s", err, out)
		}
	}
	waitFor(t, "the Sentinel to find the replica", func() bool {
		rep := sn.raw(t, "SENTINEL", "REPLICAS", "ztls")
		return rep.kind == '*' && len(rep.array) == 1 && strings.Contains(fmt.Sprint(rep.array[0]), "slave")
	})
	return &sentinelSetup{primary: p, replica: r, sentinel: sn}
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := ztlsclock.Now().Add(time.Minute)
	for !cond() {
		if ztlsclock.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// failoverWorld is a fleet of two members (v1 strike register and v2
// puncture log each) on a register reached through opts, with flights
// accepted before each failover that the test then makes happen.
type failoverWorld struct {
	t                     *testing.T
	clk                   *ztlsclock.Manual
	regs                  []*Register
	keys                  [][]byte   // v1 flights accepted before a failover, every round's
	punct                 []puncture // v2 flights, every round's
	round                 int        // keys[roundKeys:] and punct[roundPunct:] are this round's
	roundKeys, roundPunct int
}

// puncture is a v2 flight: its positions in an epoch's bitmap of a service.
type puncture struct {
	epoch   uint64
	service int
	pos     []uint32
}

func newFailoverWorld(t *testing.T, opts Options, base time.Time) *failoverWorld {
	clk := ztlsclock.NewManual(base)
	opts.Now, opts.Timeout = clk.Now, 2*time.Second
	w := &failoverWorld{t: t, clk: clk}
	for range 2 {
		w.regs = append(w.regs, mustNew(t, opts))
	}
	// The first call finds a new Redis (its memory begins now), or one
	// whose memory began before base (an earlier test).
	now := clk.Now()
	if _, err := w.regs[0].CheckAndInsert([]byte("warm-up"), now, now.Add(-window), now.Add(window)); err != nil && !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatal(err)
	}
	w.capture()
	return w
}

// capture has the fleet accept a round of flights, on either member: v1
// entries on every tag, v2 punctures under several services (tags) in an
// epoch that begins now. Their entries must outlive the real time a
// failover takes (Redis expires them by its own clock, while the test's
// stands still): the flights are fresh for longLife.
func (w *failoverWorld) capture() {
	t := w.t
	w.round++
	w.roundKeys, w.roundPunct = len(w.keys), len(w.punct)
	epoch := uint64(w.clk.Now().Add(time.Second).Unix())
	w.clk.Add(time.Minute)
	now := w.clk.Now()
	for i := range 48 {
		k := []byte("captured " + strconv.Itoa(w.round) + " " + strconv.Itoa(i))
		fresh, err := w.regs[i%2].CheckAndInsert(k, now, now.Add(-window), now.Add(longLife))
		mustFresh(t, string(k), fresh, err)
		w.keys = append(w.keys, k)
	}
	for i := range 8 {
		p := puncture{epoch: epoch, service: i, pos: []uint32{uint32(i), uint32(100 + i)}}
		was, err := w.log(i%2, i).TestAndSet(context.Background(), p.epoch, p.pos)
		if err != nil || was[0] || was[1] {
			t.Fatalf("puncture %d before the failover: %v %v", i, was, err)
		}
		w.punct = append(w.punct, p)
	}
}

// keepBusy has every member make a call every 300 ms (a new ClientHello,
// accepted or refused) until the returned function is called, so that
// each member's pooled connection has been idle for under a second when a
// failover comes (it is reused without reading the process id again).
func (w *failoverWorld) keepBusy() (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for m, r := range w.regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(300 * time.Millisecond):
				}
				now := w.clk.Now()
				r.CheckAndInsert([]byte(fmt.Sprintf("busy %d %d", m, i)), now, now, now.Add(window))
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}

// unreplicate makes the failover lose what the fleet accepted before
// it, as an asynchronous replica does when its primary dies before
// sending the last writes: each captured entry and bitmap is deleted on
// the replicas (a replicated DEL) and written back on its primary alone
// (redis.set_repl(redis.REPL_NONE)). The replicas keep the memory marker,
// so only the marker's naming of the Redis process tells the promoted
// replica's memory from the old primary's.
func (w *failoverWorld) unreplicate() {
	t := w.t
	cl, err := w.regs[0].client()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, k := range w.keys[w.roundKeys:] {
		e, _ := testKeys(string(k))
		keys = append(keys, e)
	}
	for _, p := range w.punct[w.roundPunct:] {
		l := w.log(0, p.service)
		name := l.service + ":" + strconv.FormatUint(p.epoch, 10)
		keys = append(keys, DefaultPrefix+w.regs[0].tag([]byte(name))+"bfe:"+name)
	}
	const script = `
local v = redis.call('GET', KEYS[1])
local ttl = redis.call('PTTL', KEYS[1])
if not v or ttl < 1 then return 0 end
redis.call('DEL', KEYS[1])
redis.set_repl(redis.REPL_NONE)
redis.call('SET', KEYS[1], v, 'PX', ttl)
return 1
`
	for _, k := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, err := cl.Eval(ctx, script, []string{k}).Int()
		cancel()
		if err != nil || n != 1 {
			t.Fatalf("unreplicating %s: %v %v", k, n, err)
		}
	}
}

// longLife is how long the failover tests' captured flights stay fresh.
const longLife = 10 * time.Minute

func (w *failoverWorld) log(member, service int) *PunctureLog {
	return w.regs[member].PunctureLog("svc"+strconv.Itoa(service)+".test", 443, time.Hour)
}

// afterFailover replays every captured flight to every member until the
// register answers again: never accepted. It returns how long (real time)
// the register failed before it answered, then checks that early data
// comes back: a ClientHello made W + MaxClockSkew after the loss was
// recorded is accepted, once.
func (w *failoverWorld) afterFailover(start time.Time) time.Duration {
	t := w.t
	w.clk.Add(time.Second)
	now := w.clk.Now()
	var outage time.Duration
	var lastLog time.Time
	waitFor(t, "the register to answer after the failover", func() bool {
		for _, k := range w.keys {
			fresh, err := w.regs[0].CheckAndInsert(k, now, now.Add(-window), now.Add(longLife))
			if fresh {
				t.Fatalf("%s accepted again during the failover", k)
			}
			if err != nil && !errors.Is(err, tls13.ErrRegisterTooYoung) {
				if ztlsclock.Since(lastLog) > 5*time.Second {
					t.Logf("%v after the failover began: %v", ztlsclock.Since(start).Round(time.Millisecond), err)
					lastLog = ztlsclock.Now()
				}
				return false
			}
		}
		outage = ztlsclock.Since(start)
		return true
	})
	for _, r := range w.regs {
		for _, k := range w.keys {
			fresh, err := r.CheckAndInsert(k, now, now.Add(-window), now.Add(longLife))
			if fresh {
				t.Fatalf("%s accepted again after the failover (err %v)", k, err)
			}
		}
		for i, p := range w.punct {
			for m := range w.regs {
				was, err := w.log(m, p.service).TestAndSet(context.Background(), p.epoch, p.pos)
				if err == nil && !was[0] && !was[1] {
					t.Fatalf("puncture %d accepted again after the failover, on member %d", i, m)
				}
			}
		}
	}
	// Early data comes back by itself: made after the loss (+ skew).
	w.clk.Add(window + DefaultMaxClockSkew + time.Second)
	now = w.clk.Now()
	for i, r := range w.regs {
		k := []byte("after " + strconv.Itoa(i))
		fresh, err := r.CheckAndInsert(k, now, now.Add(-window), now.Add(window))
		mustFresh(t, "a ClientHello made after the failover", fresh, err)
	}
	// So do BFE epochs that begin after it.
	later := uint64(now.Unix())
	w.clk.Add(time.Second)
	if was, err := w.log(1, 0).TestAndSet(context.Background(), later, []uint32{1, 2}); err != nil || was[0] || was[1] {
		t.Fatalf("an epoch begun after the failover: %v %v", was, err)
	}
	return outage
}

// TestSentinelFailover: a Sentinel failover, then a failover back to the
// first primary, while every member makes a call every 300 ms (its pooled
// connection idle for under a second). A flight accepted before either
// failover, v1 or v2, is never accepted after it on any member; early
// data comes back by itself after each. Logged: how long after SENTINEL
// FAILOVER each member's register reached the promoted replica (before,
// it errs: early data refused). With a window W and skew S, early data is
// refused for that long plus W + S.
func TestSentinelFailover(t *testing.T) {
	st := startSentinel(t, time.Second)
	opts := Options{Mode: ModeSentinel, Addrs: []string{st.sentinel.addr}, MasterName: "ztls"}
	t.Run("basic", func(t *testing.T) { basicSuite(t, opts) })
	// ZTLS_REDIS_FAILOVERS=N fails over N times, back and forth (a soak).
	rounds := 2
	if v, err := strconv.Atoi(os.Getenv("ZTLS_REDIS_FAILOVERS")); err == nil && v > 2 {
		rounds = v
	}
	primary, replica := st.primary, st.replica
	w := newFailoverWorld(t, opts, time.Unix(1_800_000_000, 0))
	stop := w.keepBusy()
	defer stop()
	for i := range rounds {
		if i > 0 {
			w.capture()
		}
		w.unreplicate()
		start := ztlsclock.Now()
		waitFor(t, "SENTINEL FAILOVER to start", func() bool {
			return st.sentinel.raw(t, "SENTINEL", "FAILOVER", "ztls").str == "OK"
		})
		reached := w.reachPromoted(start)
		waitFor(t, "the Sentinel to name the replica", func() bool {
			rep := st.sentinel.raw(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "ztls")
			return rep.kind == '*' && len(rep.array) == 2 && "127.0.0.1:"+rep.array[1].str == replica.addr
		})
		// Until the Sentinel turns the old primary into a replica both
		// are primaries, and members may still reach the old one, which
		// has the entries: wait, so that the replays go to the promoted
		// replica.
		waitFor(t, "the old primary to be a replica", func() bool {
			return primary.info(t, "replication", "role") == "slave" && primary.info(t, "replication", "master_link_status") == "up"
		})
		w.afterFailover(start)
		what := "failover"
		if i%2 == 1 {
			what = "failover back to the first primary"
		}
		t.Logf("Sentinel %s (%d): members reached the promoted replica and refused the captured flights as too young %v after SENTINEL FAILOVER; early data is refused for at most that long, then for W + MaxClockSkew (%v)", what, i+1, reached, window+DefaultMaxClockSkew)
		primary, replica = replica, primary
	}
}

// reachPromoted replays a captured flight of this round to every member
// until each refuses it as too young (the promoted replica's marker names
// another process: a loss), never accepting it, and returns how long after
// start each member first did.
func (w *failoverWorld) reachPromoted(start time.Time) []time.Duration {
	t := w.t
	reached := make([]time.Duration, len(w.regs))
	waitFor(t, "every member to reach the promoted replica", func() bool {
		now := w.clk.Now()
		all := true
		for m, r := range w.regs {
			if reached[m] != 0 {
				continue
			}
			fresh, err := r.CheckAndInsert(w.keys[w.roundKeys+m], now, now.Add(-window), now.Add(longLife))
			if fresh {
				t.Fatalf("a captured flight accepted again during the failover, on member %d", m)
			}
			if errors.Is(err, tls13.ErrRegisterTooYoung) {
				reached[m] = ztlsclock.Since(start).Round(time.Millisecond)
			} else {
				all = false
			}
		}
		return all
	})
	return reached
}

// clusterSetup is a Redis Cluster of three primaries and three replicas.
type clusterSetup struct {
	nodes []*redisServer
}

// nodeTimeout is how long a primary may be unreachable before its
// replica takes over.
func startCluster(t testing.TB, nodeTimeout time.Duration) *clusterSetup {
	t.Helper()
	if testing.Short() {
		t.Skip("Redis Cluster: not with -short")
	}
	c := &clusterSetup{}
	args := []string{"--cluster", "create"}
	for range 6 {
		s := startRedis(t, 0, "--repl-diskless-sync-delay", "0", "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.FormatInt(nodeTimeout.Milliseconds(), 10))
		c.nodes = append(c.nodes, s)
		args = append(args, s.addr)
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, s := range c.nodes {
		waitFor(t, "the cluster to be ok on "+s.addr, func() bool { return clusterInfo(t, s, "cluster_state") == "ok" })
	}
	for _, s := range c.nodes {
		if s.info(t, "replication", "role") == "slave" {
			waitFor(t, "the replica's link on "+s.addr, func() bool { return s.info(t, "replication", "master_link_status") == "up" })
		}
	}
	return c
}

func clusterInfo(t testing.TB, s *redisServer, field string) string {
	for _, line := range strings.Split(s.raw(t, "CLUSTER", "INFO").str, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func (c *clusterSetup) addrs() []string {
	var a []string
	for _, s := range c.nodes {
		a = append(a, s.addr)
	}
	return a
}

// TestClusterFailover: a primary of the Cluster is killed and its replica
// promoted; what was accepted before is never accepted after, on either
// member, for v1 and v2; early data comes back by itself.
func TestClusterFailover(t *testing.T) {
	c := startCluster(t, time.Second)
	opts := Options{Mode: ModeCluster, Addrs: c.addrs()}
	t.Run("basic", func(t *testing.T) { basicSuite(t, opts) })
	w := newFailoverWorld(t, opts, time.Unix(1_800_000_000, 0))
	var victim, survivor *redisServer
	for _, s := range c.nodes {
		if s.info(t, "replication", "role") == "master" && victim == nil {
			victim = s
		} else if survivor == nil {
			survivor = s
		}
	}
	replicas := 0
	for _, s := range c.nodes {
		if s != victim && s.info(t, "replication", "role") == "slave" && s.info(t, "replication", "master_port") == victim.addr[len("127.0.0.1:"):] {
			replicas++
			defer func() {
				if s.info(t, "replication", "role") != "master" {
					t.Errorf("the replica %s of the killed primary was not promoted", s.addr)
				}
			}()
		}
	}
	if replicas != 1 {
		t.Fatalf("%d replicas of %s, want 1", replicas, victim.addr)
	}
	w.unreplicate()
	start := ztlsclock.Now()
	victim.stop()
	waitFor(t, "the cluster to be ok again", func() bool {
		for _, s := range c.nodes {
			if s != victim && clusterInfo(t, s, "cluster_state") != "ok" {
				return false
			}
		}
		return true
	})
	outage := w.afterFailover(start)
	t.Logf("Cluster primary killed: the register refused for %v of real time, then early data made after the loss (+ W + MaxClockSkew) was accepted", outage.Round(time.Millisecond))
	t.Run("slot migration", func(t *testing.T) { clusterMigration(t, c, opts) })
}

// TestRegisterCheckReport: Check reads what the first call recorded (the
// loss found on one tag is recorded on all), and a FLUSHALL shows.
func TestRegisterCheckReport(t *testing.T) {
	s := startRedis(t, 0)
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := newReg(t, s.addr, clk)
	rep, err := r.Check(context.Background())
	if _, complete := rep.MemorySince(); err != nil || complete || rep.Policy != "noeviction" || len(rep.Tags) != shards {
		t.Fatalf("before any use: %v\n%v", err, rep)
	}
	warm(t, r, clk)
	rep, err = r.Check(context.Background())
	if since, complete := rep.MemorySince(); err != nil || !complete || !since.Equal(clk.Now()) {
		t.Fatalf("after the first call: %v, since %v, complete %v\n%v", err, since, complete, rep)
	}
	s.raw(t, "FLUSHALL")
	if rep, err = r.Check(context.Background()); err != nil || !strings.Contains(rep.String(), "lost") {
		t.Fatalf("after FLUSHALL: %v\n%v", err, rep)
	}
}

// clusterMigration: the slot of one tag moves to another primary (its
// keys with it, MIGRATE); during the move the register refuses (TRYAGAIN,
// ASK: clusterMigrating); after it, the register follows MOVED and takes the move as
// a possible loss (the marker names the old node's process): a flight
// accepted before is refused as too young, not accepted; one made after
// the loss is accepted.
func clusterMigration(t *testing.T, c *clusterSetup, opts Options) {
	clk := ztlsclock.NewManual(time.Unix(1_900_000_000, 0))
	opts.Now, opts.Timeout = clk.Now, 3*time.Second
	r := mustNew(t, opts) // the tags' memory began before, in the failover
	now := clk.Now()
	h := hello{key: []byte("migrated"), sent: now}
	fresh, err := h.check(r, now)
	mustFresh(t, "before the migration", fresh, err)

	entry, marker := testKeys(string(h.key))
	var live *redisServer
	for _, s := range c.nodes {
		if !s.exited() {
			live = s
		}
	}
	slot := strconv.FormatInt(live.raw(t, "CLUSTER", "KEYSLOT", marker).num, 10)
	var src, dst *redisServer
	for _, s := range c.nodes {
		if s.exited() || s.info(t, "replication", "role") != "master" {
			continue
		}
		if s.raw(t, "CLUSTER", "COUNTKEYSINSLOT", slot).num > 0 {
			src = s
		} else if dst == nil {
			dst = s
		}
	}
	if src == nil || dst == nil {
		t.Fatalf("slot %s: source %v, destination %v", slot, src, dst)
	}
	srcID, dstID := src.raw(t, "CLUSTER", "MYID").str, dst.raw(t, "CLUSTER", "MYID").str
	dst.raw(t, "CLUSTER", "SETSLOT", slot, "IMPORTING", srcID)
	src.raw(t, "CLUSTER", "SETSLOT", slot, "MIGRATING", dstID)
	host, port, _ := strings.Cut(dst.addr, ":")
	migrate := func(keys ...string) {
		t.Helper()
		args := append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)
		if rep := src.raw(t, args...); rep.str != "OK" {
			t.Fatalf("MIGRATE %v: %+v", keys, rep)
		}
	}
	clusterMigrating(t, r, clk, h, entry, migrate)
	var keys []string
	for _, k := range src.raw(t, "CLUSTER", "GETKEYSINSLOT", slot, "1000").array {
		keys = append(keys, k.str)
	}
	if len(keys) > 0 {
		migrate(keys...)
	}
	for _, s := range c.nodes {
		if !s.exited() {
			s.raw(t, "CLUSTER", "SETSLOT", slot, "NODE", dstID)
		}
	}
	if dst.raw(t, "EXISTS", entry, marker).num != 2 {
		t.Fatal("the entry and marker did not move")
	}
	clk.Add(time.Second)
	waitFor(t, "the register to follow the slot", func() bool {
		fresh, err := h.check(r, clk.Now())
		if fresh {
			t.Fatal("the flight was accepted again after its slot moved")
		}
		return errors.Is(err, tls13.ErrRegisterTooYoung)
	})
	clk.Add(window + DefaultMaxClockSkew + time.Second)
	fresh, err = hello{key: []byte("migrated"), sent: clk.Now().Add(window)}.check(r, clk.Now())
	if fresh || err != nil {
		t.Fatalf("the moved entry, still alive: fresh=%v err=%v, want a replay", fresh, err)
	}
	fresh, err = hello{key: []byte("after the move"), sent: clk.Now()}.check(r, clk.Now())
	mustFresh(t, "a flight made after the move", fresh, err)

	// What 'ztls register check' shows: the tags on the remaining
	// primaries, every one's memory complete.
	rep, err := r.Check(context.Background())
	nodes := map[string]bool{}
	for _, tm := range rep.Tags {
		nodes[tm.Node] = true
	}
	if _, complete := rep.MemorySince(); err != nil || !complete || rep.Mode != ModeCluster || len(nodes) < 2 {
		t.Fatalf("Check: %v\n%v", err, rep)
	}
}

// clusterMigrating: while the slot of h migrates (MIGRATING on its
// source, IMPORTING on its destination) the source answers a script whose
// keys it holds, TRYAGAIN when it holds some of them, and ASK when it
// holds none. The register does not follow ASK to the importing node: it
// refuses (an error, early data refused) until the migration completes.
// Never is a replay accepted: the script runs only where the entry and
// the marker are.
func clusterMigrating(t *testing.T, r *Register, clk *ztlsclock.Manual, h hello, entry string, migrate func(keys ...string)) {
	refused := func(what string, fresh bool, err error, want string) {
		t.Helper()
		if fresh || err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s during the migration: fresh=%v err=%v, want refused with %s", what, fresh, err, want)
		}
	}
	now := clk.Now()
	// Nothing moved yet: the source holds the entry and the marker.
	if fresh, err := h.check(r, now); fresh || err != nil {
		t.Fatalf("replay before any key moved: fresh=%v err=%v, want a replay", fresh, err)
	}
	// A new flight under the tag: the source holds the marker, not the
	// entry.
	fresh, err := hello{key: sameTag(h.key, "new during the migration"), sent: now}.check(r, now)
	refused("a new flight", fresh, err, "TRYAGAIN")
	// So does a BFE epoch's bitmap not yet made.
	l := r.PunctureLog("server.test", 443, time.Hour)
	epoch := uint64(now.Unix()) - 100
	for r.tag([]byte(l.service+":"+strconv.FormatUint(epoch, 10))) != r.tag(h.key) {
		epoch++
	}
	if _, err := l.TestAndSet(context.Background(), epoch, []uint32{7}); err == nil || !strings.Contains(err.Error(), "TRYAGAIN") {
		t.Fatalf("a puncture during the migration: %v, want refused with TRYAGAIN", err)
	}
	// The entry moved, the marker not yet.
	migrate(entry)
	fresh, err = h.check(r, now)
	refused("the replay, its entry moved", fresh, err, "TRYAGAIN")
	// The marker moved too: the source sends the client to the importing
	// node.
	_, marker := testKeys(string(h.key))
	migrate(marker)
	fresh, err = h.check(r, now)
	refused("the replay, entry and marker moved", fresh, err, "ASK")
	fresh, err = hello{key: sameTag(h.key, "another new one"), sent: now}.check(r, now)
	refused("a new flight, entry and marker moved", fresh, err, "ASK")
}

// exited says the server's process has ended (stopped by the test).
func (s *redisServer) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}
