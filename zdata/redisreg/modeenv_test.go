package redisreg

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
)

// The attack and fleet tests run on each way of reaching Redis (issue 28):
// a plaintext primary, a primary over mutual TLS, a Sentinel-managed
// primary with a replica, and a Cluster of three primaries with a replica
// each. TestModes starts each mode's servers once, on loopback, and runs
// every attack of modeTests against them, resetting them in between
// (FLUSHALL on every primary, noeviction everywhere, stopped nodes
// started again); the servers stop when the mode's subtest ends.

// envModes are the modes, in the order TestModes runs them.
var envModes = []string{"plaintext", "TLS", "Sentinel", "Cluster"}

// redisEnv is one mode's servers. The tests inspect and attack Redis over
// each node's plaintext port (s.raw), whatever way the register uses.
type redisEnv struct {
	mode     string
	owner    *testing.T // the servers live as long as this test
	opts     Options    // how the register reaches Redis (without Now)
	nodes    []*redisServer
	sentinel *redisServer // ModeSentinel's Sentinel
}

func startEnv(t *testing.T, mode string) *redisEnv {
	t.Helper()
	e := &redisEnv{mode: mode, owner: t}
	switch mode {
	case "plaintext":
		s := startRedis(t, 0)
		e.nodes, e.opts = []*redisServer{s}, Options{Addr: s.addr}
	case "TLS":
		srv := startTLSRedis(t, true)
		e.nodes = []*redisServer{srv.s}
		e.opts = Options{Addr: srv.tlsAddr, TLS: &tls.Config{RootCAs: srv.ca.Pool(), Certificates: []tls.Certificate{srv.client}}}
	case "Sentinel":
		// The Sentinel takes the primary for down after 5 s, so a restart
		// of the primary (an attack) is not also a failover; the failover
		// tests force theirs.
		st := startSentinel(t, 5*time.Second)
		e.nodes, e.sentinel = []*redisServer{st.primary, st.replica}, st.sentinel
		e.opts = Options{Mode: ModeSentinel, Addrs: []string{st.sentinel.addr}, MasterName: "ztls"}
	case "Cluster":
		// As for the Sentinel: a primary restarted within 5 s keeps its
		// slots (it comes back with its nodes.conf), its replica is not
		// promoted.
		c := startCluster(t, 5*time.Second)
		e.nodes = c.nodes
		e.opts = Options{Mode: ModeCluster, Addrs: c.addrs()}
	default:
		t.Fatalf("unknown mode %q", mode)
	}
	return e
}

// newReg is a register on the mode with a 3 s timeout and the clock of
// clk, changed by set when not nil.
func (e *redisEnv) newReg(t *testing.T, clk *ztlsclock.Manual, set func(*Options)) *Register {
	t.Helper()
	o := e.opts
	o.Timeout = 3 * time.Second
	if clk != nil {
		o.Now = clk.Now
	}
	if set != nil {
		set(&o)
	}
	return mustNew(t, o)
}

// live are the nodes that run.
func (e *redisEnv) live() []*redisServer {
	var l []*redisServer
	for _, s := range e.nodes {
		if !s.exited() {
			l = append(l, s)
		}
	}
	return l
}

// primaries are the live nodes that are primaries.
func (e *redisEnv) primaries(t testing.TB) []*redisServer {
	t.Helper()
	var p []*redisServer
	for _, s := range e.live() {
		if s.info(t, "replication", "role") == "master" {
			p = append(p, s)
		}
	}
	return p
}

// ownerOf is the primary that holds key: the one node, the primary the
// Sentinel names, or the Cluster primary serving key's slot.
func (e *redisEnv) ownerOf(t testing.TB, key string) *redisServer {
	t.Helper()
	switch {
	case e.sentinel != nil:
		rep := e.sentinel.raw(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "ztls")
		if rep.kind == '*' && len(rep.array) == 2 {
			if s := e.node(rep.array[0].str + ":" + rep.array[1].str); s != nil {
				return s
			}
		}
		t.Fatalf("the Sentinel names no primary of ours: %+v", rep)
	case e.opts.Mode == ModeCluster:
		live := e.live()
		slot := int(live[0].raw(t, "CLUSTER", "KEYSLOT", key).num)
		for _, s := range live {
			if servesSlot(s.raw(t, "CLUSTER", "NODES").str, slot) {
				return s
			}
		}
		t.Fatalf("no live Cluster primary serves slot %d", slot)
	}
	return e.nodes[0]
}

// servesSlot says whether the "myself" line of CLUSTER NODES is a
// primary's that serves slot (migrations, "[...]", aside).
func servesSlot(nodes string, slot int) bool {
	for _, line := range strings.Split(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "myself") || !strings.Contains(f[2], "master") {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, found := strings.Cut(r, "-")
			a, _ := strconv.Atoi(lo)
			b := a
			if found {
				b, _ = strconv.Atoi(hi)
			}
			if slot >= a && slot <= b {
				return true
			}
		}
	}
	return false
}

func (e *redisEnv) node(addr string) *redisServer {
	for _, s := range e.nodes {
		if s.addr == addr && !s.exited() {
			return s
		}
	}
	return nil
}

// flushAll empties every primary (each Cluster primary: every slot).
func (e *redisEnv) flushAll(t testing.TB) {
	t.Helper()
	for _, s := range e.primaries(t) {
		if rep := s.raw(t, "FLUSHALL"); rep.str != "OK" {
			t.Fatalf("FLUSHALL on %s: %+v", s.addr, rep)
		}
	}
}

// reset brings the mode back to a new, empty Redis: stopped nodes start
// again (without data), every node runs noeviction, every primary is
// flushed, every replica's link is up.
func (e *redisEnv) reset(t *testing.T) {
	t.Helper()
	for _, s := range e.nodes {
		if s.exited() {
			e.restart(t, s, false)
		}
	}
	for _, s := range e.live() {
		s.raw(t, "CONFIG", "SET", "maxmemory-policy", "noeviction")
	}
	e.flushAll(t)
	e.waitHealthy(t)
}

// restart kills s and starts it again on its port with its arguments
// and directory (a Cluster node keeps its nodes.conf, so its identity),
// with its last RDB snapshot when keepData, empty otherwise. It waits
// until the mode is whole again.
func (e *redisEnv) restart(t *testing.T, s *redisServer, keepData bool) *redisServer {
	t.Helper()
	_, port, _ := strings.Cut(s.addr, "127.0.0.1:")
	p, _ := strconv.Atoi(port)
	s.stop()
	if !keepData {
		if err := os.Remove(filepath.Join(s.dir, "dump.rdb")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	// Owned by the mode's test, as the server it replaces; failures are
	// t's.
	ns := startRedis(ownedBy{t, e.owner}, p, append(slices.Clone(s.extra), "--dir", s.dir)...)
	e.nodes[slices.Index(e.nodes, s)] = ns
	e.waitHealthy(t)
	return ns
}

// waitHealthy waits until the Sentinel names a primary and every
// replica's link is up, or every Cluster node says the cluster is ok.
func (e *redisEnv) waitHealthy(t testing.TB) {
	t.Helper()
	if e.sentinel == nil && e.opts.Mode != ModeCluster {
		return
	}
	waitFor(t, e.mode+" to be whole", func() bool {
		for _, s := range e.live() {
			// A full resync's snapshot (after a primary restarted) ends
			// too: an attack's SAVE would be refused during it.
			if s.info(t, "persistence", "rdb_bgsave_in_progress") != "0" {
				return false
			}
			if e.opts.Mode == ModeCluster && clusterInfo(t, s, "cluster_state") != "ok" {
				return false
			}
			if s.info(t, "replication", "role") == "slave" && s.info(t, "replication", "master_link_status") != "up" {
				return false
			}
		}
		if e.sentinel != nil {
			rep := e.sentinel.raw(t, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "ztls")
			if rep.kind != '*' || len(rep.array) != 2 {
				return false
			}
			s := e.node(rep.array[0].str + ":" + rep.array[1].str)
			return s != nil && s.info(t, "replication", "role") == "master"
		}
		return true
	})
}

// ownedBy is a subtest whose processes and directories belong to its
// parent (they outlive it), while its failures stay its own.
type ownedBy struct {
	testing.TB
	owner *testing.T
}

func (o ownedBy) Cleanup(f func()) { o.owner.Cleanup(f) }
func (o ownedBy) TempDir() string  { return o.owner.TempDir() }

// modeTests are the attack and fleet tests every mode undergoes, each on
// a reset Redis. An attack a mode cannot undergo as such says why in its
// own code and tries the mode's equivalent.
var modeTests = []struct {
	name string
	run  func(t *testing.T, e *redisEnv)
}{
	{"FlushAll", attackFlushAll},
	{"FlushDB", attackFlushDB},
	{"Restart", attackRestart},
	{"RestartFromOldSnapshot", attackRestartFromOldSnapshot},
	{"RestartFindsLoss", attackRestartFindsLoss},
	{"EvictionPolicy", func(t *testing.T, e *redisEnv) { evictionAttack(t, e, "CONFIG") }},
	{"ClockBehindRecordsLoss", attackClockBehindRecordsLoss},
	{"ClockAheadExpiry", attackClockAheadExpiry},
	{"MarkerStates", attackMarkerStates},
	{"ServerRestart", testServerRestart},
	{"RegisterFleet", testRegisterFleet},
	{"Concurrent", testRegisterConcurrent},
	{"PunctureLogRace", testPunctureLogRace},
	{"BoundaryFlushAll", func(t *testing.T, e *redisEnv) { fleetLossAttack(t, e, false) }},
	{"BoundaryBFEMember", func(t *testing.T, e *redisEnv) { fleetLossAttack(t, e, true) }},
	{"FleetReplay", testFleetReplay},
	{"FleetBFEReplay", testFleetBFEReplay},
}

// TestModes runs modeTests on every mode. Sentinel and Cluster are
// skipped with -short, as their failover tests are.
func TestModes(t *testing.T) {
	for _, mode := range envModes {
		t.Run(mode, func(t *testing.T) {
			e := startEnv(t, mode)
			for _, mt := range modeTests {
				t.Run(mt.name, func(t *testing.T) {
					e.reset(t)
					mt.run(t, e)
				})
			}
		})
	}
}

// downForFleet is what the fleet tests stop to see the register fail
// closed: the one node of a plaintext or TLS Redis (reset starts it
// again), nil otherwise. A Sentinel or Cluster all down is the same
// unreachable Redis to the client; a primary down is what
// TestSentinelFailover and TestClusterFailover do.
func (e *redisEnv) downForFleet() func() {
	if len(e.nodes) != 1 {
		return nil
	}
	return e.nodes[0].stop
}
