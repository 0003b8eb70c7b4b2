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
// times passed to CheckAndInsert); only TestAttackClockAheadExpiry lets
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

// lossAttack: a ClientHello is accepted, Redis loses its data by lose,
// and the ClientHello is replayed while still fresh: refused. ClientHellos
// that cannot predate the loss are accepted again.
func lossAttack(t *testing.T, lose func(s *redisServer) *redisServer, extra ...string) {
	s := startRedis(t, 0, extra...)
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := newReg(t, s.addr, clk)
	warm(t, r, clk)
	clk.Add(time.Minute)

	victim := hello{key: []byte("accepted before the loss"), sent: clk.Now()}
	fresh, err := victim.check(r, clk.Now())
	mustFresh(t, "first use", fresh, err)

	lose(s)              // the server it returns (a restarted one) serves the same address
	clk.Add(time.Second) // the replay comes while the ClientHello is still fresh
	fresh, err = victim.check(r, clk.Now())
	mustRefuseTooYoung(t, "replay after the loss", fresh, err)
	lossAt := clk.Now() // the register recorded the loss at this reading
	clk.Add(time.Second)
	fresh, err = victim.check(r, clk.Now())
	mustRefuseTooYoung(t, "second replay", fresh, err)

	// A ClientHello whose notBefore is past the loss + MaxClockSkew is
	// accepted, once; one a millisecond earlier is not.
	after := hello{key: []byte("made after the loss"), sent: lossAt.Add(DefaultMaxClockSkew + window)}
	early := hello{key: []byte("maybe before"), sent: after.sent.Add(-time.Millisecond)}
	clk.Set(after.sent)
	fresh, err = early.check(r, clk.Now())
	mustRefuseTooYoung(t, "notBefore within the skew of the loss", fresh, err)
	fresh, err = after.check(r, clk.Now())
	mustFresh(t, "made after the loss", fresh, err)
	if fresh, err := after.check(r, clk.Now()); fresh || err != nil {
		t.Fatalf("its replay: fresh=%v err=%v, want refused as a replay", fresh, err)
	}
}

func TestAttackFlushAll(t *testing.T) {
	lossAttack(t, func(s *redisServer) *redisServer {
		if rep := s.raw(t, "FLUSHALL"); rep.str != "OK" {
			t.Fatalf("FLUSHALL: %+v", rep)
		}
		return s
	})
}

func TestAttackFlushDB(t *testing.T) {
	lossAttack(t, func(s *redisServer) *redisServer {
		if rep := s.raw(t, "FLUSHDB"); rep.str != "OK" {
			t.Fatalf("FLUSHDB: %+v", rep)
		}
		return s
	})
}

// TestAttackRestart: Redis restarted without persistence on the same
// port; the pooled connection is dead and replaced.
func TestAttackRestart(t *testing.T) {
	lossAttack(t, func(s *redisServer) *redisServer {
		return restartRedis(t, s)
	})
}

// TestAttackRestartFromOldSnapshot: Redis restarts from an RDB snapshot
// taken before the victim was accepted. The snapshot has the marker, so
// only the changed run_id tells that entries are missing.
func TestAttackRestartFromOldSnapshot(t *testing.T) {
	dir := t.TempDir()
	lossAttack(t, func(s *redisServer) *redisServer {
		// Put the victim's entry aside, snapshot, put it back: the
		// snapshot is now older than the entry.
		k, marker := testKeys("accepted before the loss")
		if rep := s.raw(t, "RENAME", k, "aside"); rep.str != "OK" {
			t.Fatalf("RENAME: %+v", rep)
		}
		if rep := s.raw(t, "SAVE"); rep.str != "OK" {
			t.Fatalf("SAVE: %+v", rep)
		}
		s.raw(t, "RENAME", "aside", k)
		s = restartRedis(t, s, "--dir", dir)
		if rep := s.raw(t, "EXISTS", marker, k); rep.num != 1 {
			t.Fatalf("after the restart, EXISTS marker entry = %+v, want the marker only", rep)
		}
		return s
	}, "--dir", dir)
}

// restartRedis kills s (no shutdown save) and starts a new one on its port.
func restartRedis(t *testing.T, s *redisServer, extra ...string) *redisServer {
	t.Helper()
	_, port, _ := strings.Cut(s.addr, "127.0.0.1:")
	p, _ := strconv.Atoi(port)
	s.stop()
	return startRedis(t, p, extra...)
}

// TestAttackEvictionPolicy: while Redis may evict, every call fails
// closed with an error naming the policy, read with CONFIG GET or, when
// CONFIG is renamed, from INFO memory; after noeviction is back and the
// policy was read again, calls succeed.
func TestAttackEvictionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		extra        []string
	}{
		{"CONFIG", "CONFIG", nil},
		{"CONFIG renamed", "ztls-test-config", []string{"--rename-command", "CONFIG", "ztls-test-config"}},
	} {
		for _, policy := range []string{"allkeys-lru", "volatile-lru", "volatile-ttl", "allkeys-random"} {
			t.Run(tc.name+"/"+policy, func(t *testing.T) {
				s := startRedis(t, 0, tc.extra...)
				clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
				r := newReg(t, s.addr, clk)
				warm(t, r, clk)
				clk.Add(time.Minute)
				h := func(k string) hello { return hello{key: []byte(k), sent: clk.Now()} }
				fresh, err := h("before").check(r, clk.Now())
				mustFresh(t, "noeviction", fresh, err)

				s.raw(t, tc.config, "SET", "maxmemory-policy", policy)
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

				s.raw(t, tc.config, "SET", "maxmemory-policy", "noeviction")
				clk.Add(DefaultPolicyCheckInterval - time.Millisecond)
				if fresh, err := h("not yet re-read").check(r, clk.Now()); fresh || !errors.Is(err, ErrEvictionPolicy) {
					t.Fatalf("before the re-check: fresh=%v err=%v", fresh, err)
				}
				clk.Add(time.Millisecond)
				fresh, err = h("after the re-check").check(r, clk.Now())
				mustFresh(t, "after the re-check", fresh, err)
			})
		}
	}
	// A register that starts against an evicting Redis refuses from its
	// first call.
	s := startRedis(t, 0, "--maxmemory-policy", "volatile-lfu")
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := newReg(t, s.addr, clk)
	if fresh, err := r.CheckAndInsert([]byte("k"), clk.Now(), clk.Now(), clk.Now()); fresh || !errors.Is(err, ErrEvictionPolicy) {
		t.Fatalf("first call: fresh=%v err=%v", fresh, err)
	}
}

// TestAttackClockBehindRecordsLoss: the server that notices a loss reads
// its clock for "since"; if that clock runs behind by D, "since" is early,
// and a ClientHello accepted just before the loss would look newer than
// it. The MaxClockSkew added to "since" keeps it refused.
func TestAttackClockBehindRecordsLoss(t *testing.T) {
	s := startRedis(t, 0)
	right := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	const d = 800 * time.Millisecond // < DefaultMaxClockSkew
	behind := func() time.Time { return right.Now().Add(-d) }
	b := newReg(t, s.addr, right)
	a, err := New(Options{Addr: s.addr, Now: behind})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	warm(t, b, right)
	right.Add(time.Minute)

	// The victim's client clock runs 9.9 s ahead of B's: B, whose clock
	// is right, accepts it, and so could any server since 100 ms ago.
	victim := hello{key: []byte("victim"), sent: right.Now().Add(window - 100*time.Millisecond)}
	fresh, err := victim.check(b, right.Now())
	mustFresh(t, "B accepts", fresh, err)

	s.raw(t, "FLUSHALL")
	right.Add(10 * time.Millisecond)
	fresh, err = hello{key: []byte("other"), sent: behind()}.check(a, behind())
	mustRefuseTooYoung(t, "A's call that finds the loss", fresh, err)
	_, marker := testKeys("other")
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

// TestAttackClockAheadExpiry: a server whose clock runs ahead by D
// (< MaxClockSkew) accepts a ClientHello in its last 50 ms of freshness,
// by its clock. An entry living only those 50 ms would be gone when the
// replay reaches a server whose clock is right and which still has D - 50
// ms of freshness left. Redis expires by real time, so real time passes
// here: 100 ms, after which the too-short entry would surely be gone. The
// assertion cannot flake: the real entry outlives B's freshness by
// MaxClockSkew - D = 1 s, and the test stops (skips) if B's freshness was
// over by the time it read its clock.
func TestAttackClockAheadExpiry(t *testing.T) {
	s := startRedis(t, 0)
	const skew, d = 5 * time.Second, 4 * time.Second
	ahead := func() time.Time { return ztlsclock.Now().Add(d) }
	setup, err := New(Options{Addr: s.addr, MaxClockSkew: skew, Now: func() time.Time { return ztlsclock.Now().Add(-time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	a, errA := New(Options{Addr: s.addr, MaxClockSkew: skew, Now: ahead})
	b, errB := New(Options{Addr: s.addr, MaxClockSkew: skew})
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	t.Cleanup(func() { setup.Close(); a.Close(); b.Close() })
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
	rep := s.raw(t, "PTTL", entry)
	if left := ztlsclock.Until(expires); rep.kind != ':' || time.Duration(rep.num)*time.Millisecond <= left {
		t.Fatalf("PTTL %+v, want more than %v", rep, left)
	}
}

// TestRegisterMarkerStates: what each marker a Redis may hold means.
func TestRegisterMarkerStates(t *testing.T) {
	s := startRedis(t, 0)
	// The marker names the process by its run_id and its replication
	// history by its master_replid.
	runID, replid := s.info(t, "server", "run_id"), s.info(t, "replication", "master_replid")
	if runID == "" || replid == "" {
		t.Fatal("no run_id or master_replid")
	}
	run := runID + replid
	for _, tc := range []struct {
		name, value string
		lost        bool // recorded as a loss: the marker becomes "since"
	}{
		{"garbage", "instance-0123", true},
		{"since, other run", "since 1 00ff", true},
		{"pending, other run", "pending ab 00ff", true},
		{"since, this run_id, other replid (a failover and back)", "since 1 " + runID + strings.Repeat("0", len(replid)), true},
		{"pending, this run", "pending ab " + run, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
			r := newReg(t, s.addr, clk)
			_, marker := testKeys(tc.name)
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

// TestRegisterServerRestart: a fleet server that restarts while Redis
// keeps its data needs no quiet period: Redis's memory goes on.
func TestRegisterServerRestart(t *testing.T) {
	s := startRedis(t, 0)
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	first := newReg(t, s.addr, clk)
	warm(t, first, clk)
	clk.Add(time.Minute)
	h := hello{key: []byte("k"), sent: clk.Now()}
	fresh, err := h.check(first, clk.Now())
	mustFresh(t, "before the restart", fresh, err)
	first.Close()

	second := newReg(t, s.addr, clk)
	if fresh, err := h.check(second, clk.Now()); fresh || err != nil {
		t.Fatalf("replay after the server restarted: fresh=%v err=%v, want a replay", fresh, err)
	}
	fresh, err = hello{key: []byte("new"), sent: clk.Now()}.check(second, clk.Now())
	mustFresh(t, "new ClientHello right after the restart", fresh, err)
}

// TestRegisterRestartFindsLoss: after a Redis restart the client's
// connections are dead; the first call finds the loss on a new one,
// instead of failing once per dead connection.
func TestRegisterRestartFindsLoss(t *testing.T) {
	s := startRedis(t, 0)
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := newReg(t, s.addr, clk)
	warm(t, r, clk)
	restartRedis(t, s)
	fresh, err := hello{key: []byte("k"), sent: clk.Now()}.check(r, clk.Now())
	mustRefuseTooYoung(t, "first call after the restart", fresh, err)
}
