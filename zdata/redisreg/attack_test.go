package redisreg

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/tls13"
)

// The attacks of a security review's point 8, each tried against a real
// redis-server and refused. Clocks are simulated (Options.Now and the
// times passed to CheckAndInsert); only attackClockAheadExpiry lets
// real time pass, because Redis expires entries by its own clock.

const window = 10 * time.Second // the TLS server's freshness window W

// hello is one ClientHello as the TLS server sees it: acceptable from
// sent - W until sent + W (docs/ztls-spec.md, Section 5).
type hello struct {
	key  []byte
	sent time.Time
}

func (h hello) check(r *Register, now time.Time) (bool, error) {
	return r.CheckAndInsert(h.key, now, h.sent.Add(-window), h.sent.Add(window))
}

// mustFresh and mustRefuseTooYoung assert the two outcomes that matter.
func mustFresh(t *testing.T, what string, fresh bool, err error) {
	t.Helper()
	if !fresh || err != nil {
		t.Fatalf("%s: fresh=%v err=%v, want accepted", what, fresh, err)
	}
}

func mustRefuseTooYoung(t *testing.T, what string, fresh bool, err error) {
	t.Helper()
	if fresh || !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatalf("%s: fresh=%v err=%v, want refused with ErrRegisterTooYoung", what, fresh, err)
	}
}

// testKeys are the entry and marker keys of a ClientHello named key
// under DefaultPrefix.
func testKeys(key string) (entry, marker string) {
	return (&Register{opts: Options{Prefix: DefaultPrefix}}).entryKey([]byte(key))
}

// lossAttack: a ClientHello is accepted, Redis loses its data by lose
// (given the primary holding the ClientHello's entry), and the ClientHello
// is replayed while still fresh: refused. ClientHellos that cannot
// predate the loss are accepted again.
func lossAttack(t *testing.T, e *redisEnv, lose func(s *redisServer)) {
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := e.newReg(t, clk, nil)
	warm(t, r, clk)
	clk.Add(time.Minute)

	victim := hello{key: []byte("accepted before the loss"), sent: clk.Now()}
	fresh, err := victim.check(r, clk.Now())
	mustFresh(t, "first use", fresh, err)

	_, marker := testKeys(string(victim.key))
	lose(e.ownerOf(t, marker))
	clk.Add(time.Second) // the replay comes while the ClientHello is still fresh
	fresh, err = victim.check(r, clk.Now())
	mustRefuseTooYoung(t, "replay after the loss", fresh, err)
	lossAt := clk.Now() // the register recorded the loss at this reading
	clk.Add(time.Second)
	fresh, err = victim.check(r, clk.Now())
	mustRefuseTooYoung(t, "second replay", fresh, err)

	// A ClientHello whose notBefore is past the loss + MaxClockSkew is
	// accepted, once; one a millisecond earlier is not. (Both keys are
	// under the victim's tag, so on the node that lost its data.)
	after := hello{key: sameTag(victim.key, "made after the loss"), sent: lossAt.Add(DefaultMaxClockSkew + window)}
	early := hello{key: sameTag(victim.key, "maybe before"), sent: after.sent.Add(-time.Millisecond)}
	clk.Set(after.sent)
	fresh, err = early.check(r, clk.Now())
	mustRefuseTooYoung(t, "notBefore within the skew of the loss", fresh, err)
	fresh, err = after.check(r, clk.Now())
	mustFresh(t, "made after the loss", fresh, err)
	if fresh, err := after.check(r, clk.Now()); fresh || err != nil {
		t.Fatalf("its replay: fresh=%v err=%v, want refused as a replay", fresh, err)
	}
}

// sameTag is a key beginning with prefix under the hash tag of key (so in
// the same Cluster slot).
func sameTag(key []byte, prefix string) []byte {
	r := &Register{opts: Options{Prefix: DefaultPrefix}}
	for i := 0; ; i++ {
		k := []byte(prefix + " " + strconv.Itoa(i))
		if r.tag(k) == r.tag(key) {
			return k
		}
	}
}

// attackFlushAll: FLUSHALL on the primary holding the entry (on a
// Cluster, the node serving its slot: the other primaries keep theirs).
func attackFlushAll(t *testing.T, e *redisEnv) {
	lossAttack(t, e, func(s *redisServer) {
		if rep := s.raw(t, "FLUSHALL"); rep.str != "OK" {
			t.Fatalf("FLUSHALL: %+v", rep)
		}
	})
}

func attackFlushDB(t *testing.T, e *redisEnv) {
	lossAttack(t, e, func(s *redisServer) {
		if rep := s.raw(t, "FLUSHDB"); rep.str != "OK" {
			t.Fatalf("FLUSHDB: %+v", rep)
		}
	})
}

// attackRestart: the primary holding the entry restarted without
// persistence on the same port; the pooled connection is dead and
// replaced. Behind a Sentinel or in a Cluster the replica resyncs from
// the empty primary, so the data is gone from both; a Cluster node comes
// back with its nodes.conf (its identity and slots), as a restarted
// Cluster node does. (A whole Cluster restarted empty is this, once per
// primary.)
func attackRestart(t *testing.T, e *redisEnv) {
	lossAttack(t, e, func(s *redisServer) { e.restart(t, s, false) })
}

// attackRestartFromOldSnapshot: the primary restarts from an RDB snapshot
// taken before the victim was accepted. The snapshot has the marker, so
// only the changed run_id tells that entries are missing.
func attackRestartFromOldSnapshot(t *testing.T, e *redisEnv) {
	lossAttack(t, e, func(s *redisServer) {
		// Put the victim's entry aside (under its hash tag: a Cluster
		// renames within a slot only), snapshot, put it back: the
		// snapshot is now older than the entry.
		k, marker := testKeys("accepted before the loss")
		if rep := s.raw(t, "RENAME", k, k+":aside"); rep.str != "OK" {
			t.Fatalf("RENAME: %+v", rep)
		}
		if rep := s.raw(t, "SAVE"); rep.str != "OK" {
			t.Fatalf("SAVE: %+v", rep)
		}
		s.raw(t, "RENAME", k+":aside", k)
		s = e.restart(t, s, true)
		if rep := s.raw(t, "EXISTS", marker, k); rep.num != 1 {
			t.Fatalf("after the restart, EXISTS marker entry = %+v, want the marker only", rep)
		}
	})
}

// attackRestartFindsLoss: after a restart of the primary the client's
// connections are dead; the first call finds the loss on a new one,
// instead of failing once per dead connection.
func attackRestartFindsLoss(t *testing.T, e *redisEnv) {
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := e.newReg(t, clk, nil)
	warm(t, r, clk)
	_, marker := testKeys("k")
	e.restart(t, e.ownerOf(t, marker), false)
	fresh, err := hello{key: []byte("k"), sent: clk.Now()}.check(r, clk.Now())
	mustRefuseTooYoung(t, "first call after the restart", fresh, err)
}

// evictionAttack: while Redis may evict, every call fails closed with an
// error naming the policy, read with CONFIG GET or, when CONFIG is renamed
// (config names it), from INFO memory; after noeviction is back and the
// policy was read again, calls succeed. The policy changes on the primary
// holding the keys (a Cluster register reads every node's).
func evictionAttack(t *testing.T, e *redisEnv, config string) {
	for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
		t.Run(policy, func(t *testing.T) {
			e.reset(t)
			clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
			r := e.newReg(t, clk, nil)
			warm(t, r, clk)
			clk.Add(time.Minute)
			h := func(k string) hello { return hello{key: sameTag([]byte("before"), k), sent: clk.Now()} }
			fresh, err := h("before").check(r, clk.Now())
			mustFresh(t, "noeviction", fresh, err)

			_, marker := testKeys(string(h("before").key))
			s := e.ownerOf(t, marker)
			s.raw(t, config, "SET", "maxmemory-policy", policy)
			clk.Add(DefaultPolicyCheckInterval)
			for i := 0; i < 2; i++ {
				fresh, err = h("while evicting").check(r, clk.Now())
				if fresh || !errors.Is(err, ErrEvictionPolicy) || !strings.Contains(err.Error(), policy) ||
					!strings.Contains(err.Error(), "set maxmemory-policy noeviction") {
					t.Fatalf("%s: fresh=%v err=%v, want ErrEvictionPolicy naming the policy", policy, fresh, err)
				}
			}
			// A replay of what was accepted before is not fresh either.
			if fresh, _ := h("before").check(r, clk.Now()); fresh {
				t.Fatal("replay accepted while evicting")
			}

			s.raw(t, config, "SET", "maxmemory-policy", "noeviction")
			clk.Add(DefaultPolicyCheckInterval - time.Millisecond)
			if fresh, err := h("not yet re-read").check(r, clk.Now()); fresh || !errors.Is(err, ErrEvictionPolicy) {
				t.Fatalf("before the re-check: fresh=%v err=%v", fresh, err)
			}
			clk.Add(time.Millisecond)
			fresh, err = h("after the re-check").check(r, clk.Now())
			mustFresh(t, "after the re-check", fresh, err)
		})
	}
	// A register that starts against an evicting Redis refuses from its
	// first call.
	e.reset(t)
	_, marker := testKeys("k")
	e.ownerOf(t, marker).raw(t, config, "SET", "maxmemory-policy", "volatile-lfu")
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := e.newReg(t, clk, nil)
	if fresh, err := r.CheckAndInsert([]byte("k"), clk.Now(), clk.Now(), clk.Now()); fresh || !errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("first call: fresh=%v err=%v", fresh, err)
	}
}

// TestAttackEvictionPolicyConfigRenamed: the eviction attack on a Redis
// whose CONFIG command is renamed, so the register reads the policy from
// INFO memory. It needs a server started with --rename-command, and how
// the policy is read does not depend on the way to Redis: plaintext only.
func TestAttackEvictionPolicyConfigRenamed(t *testing.T) {
	s := startRedis(t, 0, "--rename-command", "CONFIG", "ztls-test-config")
	evictionAttack(t, &redisEnv{mode: "plaintext", owner: t, opts: Options{Addr: s.addr}, nodes: []*redisServer{s}}, "ztls-test-config")
}

// attackClockBehindRecordsLoss: the server that notices a loss reads its
// clock for "since"; if that clock runs behind by D, "since" is early,
// and a ClientHello accepted just before the loss would look newer than
// it. The MaxClockSkew added to "since" keeps it refused.
func attackClockBehindRecordsLoss(t *testing.T, e *redisEnv) {
	right := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	const d = 800 * time.Millisecond // < DefaultMaxClockSkew
	behind := func() time.Time { return right.Now().Add(-d) }
	b := e.newReg(t, right, nil)
	a := e.newReg(t, nil, func(o *Options) { o.Now = behind })
	warm(t, b, right)
	right.Add(time.Minute)

	// The victim's client clock runs 9.9 s ahead of B's: B, whose clock
	// is right, accepts it, and so could any server since 100 ms ago.
	victim := hello{key: []byte("victim"), sent: right.Now().Add(window - 100*time.Millisecond)}
	fresh, err := victim.check(b, right.Now())
	mustFresh(t, "B accepts", fresh, err)

	_, marker := testKeys("victim")
	s := e.ownerOf(t, marker)
	s.raw(t, "FLUSHALL")
	right.Add(10 * time.Millisecond)
	other := sameTag(victim.key, "other")
	fresh, err = hello{key: other, sent: behind()}.check(a, behind())
	mustRefuseTooYoung(t, "A's call that finds the loss", fresh, err)
	rep := s.raw(t, "GET", marker)
	if want := fmt.Sprintf("since %d ", behind().UnixMilli()); !strings.HasPrefix(rep.str, want) {
		t.Fatalf("marker %q, want A's clock: %q...", rep.str, want)
	}
	// victim's notBefore is after A's "since" (by 690 ms), within the skew.
	right.Add(10 * time.Millisecond)
	fresh, err = victim.check(b, right.Now())
	mustRefuseTooYoung(t, "replay to B", fresh, err)
	fresh, err = victim.check(a, behind())
	mustRefuseTooYoung(t, "replay to A", fresh, err)
}

// attackClockAheadExpiry: a server whose clock runs ahead by D
// (< MaxClockSkew) accepts a ClientHello in its last 50 ms of freshness,
// by its clock. An entry living only those 50 ms would be gone when the
// replay reaches a server whose clock is right and which still has D - 50
// ms of freshness left. Redis expires by real time, so real time passes
// here: 100 ms, after which the too-short entry would surely be gone. The
// assertion cannot flake: the real entry outlives B's freshness by
// MaxClockSkew - D = 1 s, and the test stops (skips) if B's freshness was
// over by the time it read its clock.
func attackClockAheadExpiry(t *testing.T, e *redisEnv) {
	const skew, d = 5 * time.Second, 4 * time.Second
	ahead := func() time.Time { return ztlsclock.Now().Add(d) }
	setup := e.newReg(t, nil, func(o *Options) {
		o.MaxClockSkew, o.Now = skew, func() time.Time { return ztlsclock.Now().Add(-time.Hour) }
	})
	a := e.newReg(t, nil, func(o *Options) { o.MaxClockSkew, o.Now = skew, ahead })
	b := e.newReg(t, nil, func(o *Options) { o.MaxClockSkew = skew })
	// Redis's memory starts an hour back (as if it had run for long).
	if fresh, err := setup.CheckAndInsert([]byte("setup"), ztlsclock.Now(), ztlsclock.Now(), ztlsclock.Now()); !fresh || err != nil {
		t.Fatalf("setup: %v %v", fresh, err)
	}

	nowA := ahead()
	victim := hello{key: []byte("victim"), sent: nowA.Add(50*time.Millisecond - window)}
	expires := victim.sent.Add(window)
	fresh, err := victim.check(a, nowA)
	mustFresh(t, "A accepts", fresh, err)

	time.Sleep(100 * time.Millisecond)
	nowB := ztlsclock.Now()
	if nowB.After(expires) {
		t.Skipf("the machine stalled %v: B's freshness window is over, nothing to test", nowB.Sub(nowA.Add(-d)))
	}
	fresh, err = victim.check(b, nowB)
	if fresh || err != nil {
		t.Fatalf("replay to B, %v before its window closes: fresh=%v err=%v, want refused as a replay", expires.Sub(nowB), fresh, err)
	}
	// The entry outlives B's window: its remaining life exceeds what is
	// left of the window (read after PTTL answered, so only smaller).
	entry, _ := testKeys(string(victim.key))
	rep := e.ownerOf(t, entry).raw(t, "PTTL", entry)
	if left := ztlsclock.Until(expires); rep.kind != ':' || time.Duration(rep.num)*time.Millisecond <= left {
		t.Fatalf("PTTL %+v, want more than %v", rep, left)
	}
}

// attackMarkerStates: what each marker a Redis may hold means (one the
// attacker could leave there included).
func attackMarkerStates(t *testing.T, e *redisEnv) {
	for _, tc := range []struct {
		name, value string
		lost        bool // recorded as a loss: the marker becomes "since"
	}{
		{"garbage", "instance-0123", true},
		{"since, other run", "since 1 00ff", true},
		{"pending, other run", "pending ab 00ff", true},
		{"since, this run_id, other replid (a failover and back)", "since 1 RUNIDREPLID0", true},
		{"pending, this run", "pending ab RUN", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, marker := testKeys(tc.name)
			s := e.ownerOf(t, marker)
			// The marker names the process by its run_id and its
			// replication history by its master_replid.
			runID, replid := s.info(t, "server", "run_id"), s.info(t, "replication", "master_replid")
			if runID == "" || replid == "" {
				t.Fatal("no run_id or master_replid")
			}
			run := runID + replid
			tc.value = strings.NewReplacer("RUNID", runID, "REPLID0", strings.Repeat("0", len(replid)), "RUN", run).Replace(tc.value)
			clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
			r := e.newReg(t, clk, nil)
			s.raw(t, "SET", marker, tc.value)
			h := hello{key: []byte(tc.name), sent: clk.Now()}
			fresh, err := h.check(r, clk.Now())
			mustRefuseTooYoung(t, "first call", fresh, err)
			got := s.raw(t, "GET", marker).str
			want := tc.value
			if tc.lost {
				want = fmt.Sprintf("since %d %s", clk.Now().UnixMilli(), run)
			}
			if got != want {
				t.Fatalf("marker %q, want %q", got, want)
			}
			if tc.lost {
				// The rule, applied with the new "since", lets a
				// ClientHello from after it through.
				clk.Add(time.Hour)
				fresh, err := hello{key: []byte(tc.name + " later"), sent: clk.Now()}.check(r, clk.Now())
				mustFresh(t, "after the loss", fresh, err)
			}
		})
	}
}

// testServerRestart: a fleet server that restarts while Redis keeps its
// data needs no quiet period: Redis's memory goes on.
func testServerRestart(t *testing.T, e *redisEnv) {
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	first := e.newReg(t, clk, nil)
	warm(t, first, clk)
	clk.Add(time.Minute)
	h := hello{key: []byte("k"), sent: clk.Now()}
	fresh, err := h.check(first, clk.Now())
	mustFresh(t, "before the restart", fresh, err)
	first.Close()

	second := e.newReg(t, clk, nil)
	if fresh, err := h.check(second, clk.Now()); fresh || err != nil {
		t.Fatalf("replay after the server restarted: fresh=%v err=%v, want a replay", fresh, err)
	}
	fresh, err = hello{key: []byte("new"), sent: clk.Now()}.check(second, clk.Now())
	mustFresh(t, "new ClientHello right after the restart", fresh, err)
}
