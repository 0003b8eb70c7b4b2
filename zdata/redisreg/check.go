package redisreg

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Report is what Check found in the register's Redis.
type Report struct {
	Mode    Mode
	Policy  string        // maxmemory-policy (the first not noeviction, on a Cluster)
	Latency time.Duration // one round trip (PING) to the node of the first tag
	Tags    []TagMemory   // one per hash tag, in order
}

// TagMemory is the memory marker of one hash tag.
type TagMemory struct {
	Tag  string // "{s0}" ...
	Node string // the primary holding it (its address, as the client knows it)
	// State is "complete" (the marker names the Redis process that holds
	// it: Since is valid), "lost" (no marker, or one of another process:
	// the next call records a loss) or "pending" (a loss being recorded).
	State string
	Since time.Time
}

// MemorySince is the latest Since of the tags whose memory is complete,
// and whether every tag's is: early data made before it (plus the clock
// skew) is refused.
func (rep Report) MemorySince() (since time.Time, complete bool) {
	complete = len(rep.Tags) > 0
	for _, t := range rep.Tags {
		if t.State != "complete" {
			complete = false
			continue
		}
		if t.Since.After(since) {
			since = t.Since
		}
	}
	return since, complete
}

// Check reads, without changing anything, the register's maxmemory-policy,
// each hash tag's memory marker (against the identity of the Redis
// process holding it) and one round trip's latency. It is for operators
// (ztls register check); servers call CheckAndInsert.
func (r *Register) Check(ctx context.Context) (Report, error) {
	rep := Report{Mode: r.opts.Mode}
	cl, err := r.client()
	if err != nil {
		return rep, err
	}
	if rep.Policy, err = r.readPolicy(cl); err != nil {
		return rep, err
	}
	for i := range shards {
		tag := "{s" + strconv.Itoa(i) + "}"
		marker := r.markerKey(tag)
		node := goredis.Cmdable(cl)
		addr := ""
		switch c := cl.(type) {
		case *goredis.ClusterClient:
			n, err := c.MasterForKey(ctx, marker)
			if err != nil {
				return rep, r.wrapErr("finding the node of "+tag, err)
			}
			node, addr = n, n.Options().Addr
		case *goredis.Client:
			addr = c.Options().Addr
			if r.opts.Mode == ModeSentinel {
				// go-redis names a Sentinel client, not the primary.
				addr = "the Sentinels' " + r.opts.MasterName
			}
		}
		if i == 0 {
			err := r.do("PING", func(ctx context.Context) error {
				start := time.Now() // real time: the latency Check reports
				err := node.Ping(ctx).Err()
				rep.Latency = time.Since(start)
				return err
			})
			if err != nil {
				return rep, err
			}
		}
		var m, server, repl string
		err := r.do("GET marker", func(ctx context.Context) error {
			var err error
			if m, err = node.Get(ctx, marker).Result(); err == goredis.Nil {
				m, err = "", nil
			}
			if err == nil {
				server, err = node.Info(ctx, "server").Result()
			}
			if err == nil {
				repl, err = node.Info(ctx, "replication").Result()
			}
			return err
		})
		if err != nil {
			return rep, err
		}
		if addr == "" {
			addr = infoField(server, "tcp_port")
			if addr != "" {
				addr = "port " + addr
			}
		}
		run := infoField(server, "run_id") + infoField(repl, "master_replid")
		t := TagMemory{Tag: tag, Node: addr, State: "lost"}
		f := strings.Fields(m)
		switch {
		case len(f) == 3 && f[0] == "since" && f[2] == run:
			ms, err := strconv.ParseInt(f[1], 10, 64)
			if err == nil {
				t.State, t.Since = "complete", time.UnixMilli(ms)
			}
		case len(f) == 3 && f[0] == "pending" && f[2] == run:
			t.State = "pending"
		}
		rep.Tags = append(rep.Tags, t)
	}
	return rep, nil
}

// ErrAuth is Ready's error when Redis refuses the register's login (a
// wrong password or user, or none where Redis wants one). Unlike an
// unreachable Redis, it does not pass by itself.
var ErrAuth = errors.New("redisreg: Redis refused the login (wrong password or user)")

// Ready reports whether Redis would let the register take early data now:
// it is reachable, accepts the login, and will not evict entries
// (maxmemory-policy noeviction on every node the register uses; else the
// error wraps ErrEvictionPolicy). It does not read the register's memory
// (Check does) and changes nothing: one round trip per node, for a
// server's checks at start and its readiness probes.
func (r *Register) Ready() error {
	cl, err := r.client()
	if err != nil {
		return err
	}
	p, err := r.readPolicy(cl)
	if err != nil {
		if msg := err.Error(); strings.Contains(msg, "AUTH refused") || strings.Contains(msg, "WRONGPASS") || strings.Contains(msg, "NOAUTH") {
			return fmt.Errorf("%w: %v", ErrAuth, err)
		}
		return err
	}
	if p != "noeviction" {
		return fmt.Errorf("redisreg: Redis maxmemory-policy is %q: %w", p, ErrEvictionPolicy)
	}
	return nil
}

// String is the report for people, one line per fact.
func (rep Report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "mode: %s\n", rep.Mode)
	fmt.Fprintf(&b, "maxmemory-policy: %s", rep.Policy)
	if rep.Policy != "noeviction" {
		b.WriteString(" (early data refused: set noeviction)")
	}
	fmt.Fprintf(&b, "\nlatency: %v\n", rep.Latency.Round(time.Microsecond))
	since, complete := rep.MemorySince()
	switch {
	case complete:
		fmt.Fprintf(&b, "memory complete since: %s\n", since.UTC().Format(time.RFC3339Nano))
	default:
		lost := 0
		for _, t := range rep.Tags {
			if t.State != "complete" {
				lost++
			}
		}
		fmt.Fprintf(&b, "memory complete since: unknown for %d of %d tags (a loss of data, or never used: the next call records it)\n", lost, len(rep.Tags))
	}
	same := true
	for _, t := range rep.Tags {
		same = same && t.Node == rep.Tags[0].Node && t.State == rep.Tags[0].State && t.Since.Equal(rep.Tags[0].Since)
	}
	if same && len(rep.Tags) > 0 {
		fmt.Fprintf(&b, "tags: %d, all on %s, %s\n", len(rep.Tags), rep.Tags[0].Node, rep.Tags[0].State)
		return b.String()
	}
	for _, t := range rep.Tags {
		fmt.Fprintf(&b, "  %-6s %-22s %s", t.Tag, t.Node, t.State)
		if t.State == "complete" {
			fmt.Fprintf(&b, " since %s", t.Since.UTC().Format(time.RFC3339Nano))
		}
		b.WriteByte('\n')
	}
	return b.String()
}
