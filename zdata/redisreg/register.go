package redisreg

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	goredis "github.com/redis/go-redis/v9"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// Defaults for Options.
const (
	DefaultPrefix              = "ztls:strike:"
	DefaultTimeout             = time.Second
	DefaultMaxClockSkew        = time.Second
	DefaultPolicyCheckInterval = 10 * time.Second
)

// shards is how many hash tags the keys are spread over. Each tag has its
// own memory marker, so a script touches one Cluster slot, and the load
// spreads over a Cluster's primaries.
const shards = 16

// ErrEvictionPolicy is wrapped by the error of every CheckAndInsert while
// Redis runs with a maxmemory-policy other than noeviction: any other
// policy may drop strike entries (the volatile-* ones pick exactly the
// keys with an expiry, which all strike entries have), and a dropped entry
// lets its ClientHello be replayed. The error names the policy found.
var ErrEvictionPolicy = errors.New("redisreg: Redis may evict strike entries; set maxmemory-policy noeviction (redis.conf and CONFIG SET); early data refused")

// ErrScriptDenied is wrapped by the error of every call while the Redis
// user may not run the register's scripts (an ACL without EVAL and
// EVALSHA, or without the keys under Prefix).
var ErrScriptDenied = errors.New("redisreg: the Redis user may not run the register's Lua scripts: allow EVAL, EVALSHA and INFO on the keys under Prefix; early data refused")

// Mode is how the register finds Redis.
type Mode int

// Modes.
const (
	ModeSingle   Mode = iota // one primary at Addr
	ModeSentinel             // the primary Sentinels at Addrs name MasterName
	ModeCluster              // a Redis Cluster reached through any of Addrs
)

func (m Mode) String() string {
	switch m {
	case ModeSentinel:
		return "sentinel"
	case ModeCluster:
		return "cluster"
	}
	return "single"
}

// Options configure a Register. Addr (ModeSingle) or Addrs is required.
type Options struct {
	Mode  Mode
	Addr  string   // ModeSingle: Redis's address, host:port
	Addrs []string // ModeSentinel: the Sentinels; ModeCluster: some Cluster nodes (host:port)

	// MasterName is the primary's name in the Sentinels' configuration
	// (ModeSentinel).
	MasterName string

	Username string // ACL user; "" logs in as "default" (with Password) or not at all
	Password string // never logged or put in an error
	DB       int    // SELECT'ed when non-zero; not with ModeCluster

	// SentinelUsername and SentinelPassword log in to the Sentinels
	// (ModeSentinel); empty means the Sentinels ask for none.
	SentinelUsername, SentinelPassword string

	// TLS, when non-nil, is the TLS configuration for every connection
	// (to the Sentinels too); nil means plaintext RESP. Give it RootCAs
	// (the CA that issued Redis's certificate) and, for mutual TLS,
	// Certificates.
	TLS *tls.Config

	Prefix  string        // key prefix, without '{' or '}'; "" means DefaultPrefix
	Timeout time.Duration // dial and per-call timeout; 0 means DefaultTimeout

	// MaxClockSkew bounds how far apart the clocks (tls13.Config.Time) of
	// any two servers sharing the register may be; the operator keeps them
	// within it (NTP). It is added to every entry's lifetime, so an entry
	// made by a server whose clock runs ahead outlives the ClientHello on
	// every other server, and to the time since which the register's
	// memory is complete, which the server that noticed a loss of data
	// read on its own clock. 0 means DefaultMaxClockSkew; negative is an
	// error.
	MaxClockSkew time.Duration

	// PolicyCheckInterval is how often (on Now's clock) the register
	// re-reads Redis's maxmemory-policy; in between it trusts the last
	// reading, so a runtime change to an evicting policy goes unnoticed
	// for up to this long. 0 means DefaultPolicyCheckInterval.
	PolicyCheckInterval time.Duration

	// Now is the clock the register reads for the time of a data loss and
	// for policy re-checks. It must be the clock whose readings
	// CheckAndInsert receives (tls13.Config.Time). nil means the ztls clock (internal/clock: the system clock, unless ZTLS_CLOCK_OFFSET shifts it).
	Now func() time.Time
}

// Stats count the register's round trips to Redis since it was made.
type Stats struct {
	RoundTrips uint64        // commands and scripts sent
	Errors     uint64        // of those, the ones that failed (unreachable, timeout, an error reply)
	Latency    time.Duration // the round trips' summed duration
}

// Register is a strike register (tls13.StrikeRegister) kept in Redis, so
// every server of a fleet pointed at the same Redis refuses a ClientHello
// any of them has seen. Each CheckAndInsert is one Lua script that checks
// the marker recording since when Redis's memory is complete and inserts
// with SET NX PX in the same atomic step (see the package documentation).
// It fails closed: any connection, protocol or configuration problem is an
// error, which the TLS server turns into rejected early data.
//
// Safe for concurrent use; calls share a pool of connections.
type Register struct {
	opts Options
	id   string // names this register's pending markers
	seq  atomic.Uint64

	roundTrips, errs atomic.Uint64
	latency          atomic.Int64

	mu       sync.Mutex
	cl       goredis.UniversalClient // nil until the first call; connects lazily
	idle     map[string][]*pconn     // by node address
	closed   bool
	policy   string    // maxmemory-policy last read; "" before the first reading
	policyAt time.Time // when (Now) it was read
}

var _ tls13.StrikeRegister = (*Register)(nil)

// New returns a register for opts. It does not connect: a server may
// start while Redis is down and simply refuses early data until Redis is
// reachable.
func New(opts Options) (*Register, error) {
	switch opts.Mode {
	case ModeSingle:
		if opts.Addr == "" {
			return nil, errors.New("redisreg: no address")
		}
		if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
			return nil, fmt.Errorf("redisreg: address %q: %v", opts.Addr, err)
		}
	case ModeSentinel, ModeCluster:
		if len(opts.Addrs) == 0 {
			return nil, fmt.Errorf("redisreg: no %s addresses", opts.Mode)
		}
		for _, a := range opts.Addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				return nil, fmt.Errorf("redisreg: address %q: %v", a, err)
			}
		}
		if opts.Mode == ModeSentinel && opts.MasterName == "" {
			return nil, errors.New("redisreg: Sentinel mode without MasterName")
		}
		if opts.Mode == ModeCluster && opts.DB != 0 {
			return nil, errors.New("redisreg: a Redis Cluster has only DB 0")
		}
	default:
		return nil, fmt.Errorf("redisreg: unknown Mode %d", opts.Mode)
	}
	if opts.DB < 0 {
		return nil, errors.New("redisreg: negative DB")
	}
	if opts.MaxClockSkew < 0 {
		return nil, errors.New("redisreg: negative MaxClockSkew")
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, errors.New("redisreg: Prefix holds '{' or '}', which would change the keys' hash tags")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.MaxClockSkew == 0 {
		opts.MaxClockSkew = DefaultMaxClockSkew
	}
	if opts.PolicyCheckInterval <= 0 {
		opts.PolicyCheckInterval = DefaultPolicyCheckInterval
	}
	if opts.Now == nil {
		opts.Now = ztlsclock.Now
	}
	var id [8]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("redisreg: %v", err)
	}
	return &Register{opts: opts, id: hex.EncodeToString(id[:]), idle: map[string][]*pconn{}}, nil
}

// Keys. Every key holds a hash tag, {sN}, N in 0..shards-1, and each tag
// has its own memory marker, Prefix+"{sN}marker". A script touches one
// entry or bitmap and the marker of its tag: one Cluster slot.
//
// This layout replaced, in issue 28, one marker (Prefix+"marker") and
// untagged entries. A register finds no marker under the new layout in a
// Redis that holds the old one: a loss of data like a FLUSHALL, refused
// until the ClientHellos that could predate it are over.

func (r *Register) tag(name []byte) string {
	h := fnv.New32a()
	h.Write(name)
	return "{s" + strconv.Itoa(int(h.Sum32()%shards)) + "}"
}

func (r *Register) markerKey(tag string) string { return r.opts.Prefix + tag + "marker" }

// entryKey is the key of a ClientHello's entry, and its marker's.
func (r *Register) entryKey(key []byte) (entry, marker string) {
	tag := r.tag(key)
	k := make([]byte, 0, len(r.opts.Prefix)+len(tag)+2*len(key))
	k = append(append(k, r.opts.Prefix...), tag...)
	k = hex.AppendEncode(k, key)
	return string(k), r.markerKey(tag)
}

// The memory marker of a tag holds one of
//
//	since <ms> <id>          memory complete since <ms> (Unix ms, on the
//	                         clock of the server that recorded the loss)
//	pending <token> <id>     a loss is being recorded (expires by itself)
//
// where id names the Redis process and its replication history: its
// run_id (INFO server) followed by its master_replid (INFO replication).
// A missing marker, an unreadable one, or one naming another id means
// entries may have been lost: a FLUSHALL, a restart (maybe from an older
// snapshot: a new run_id), a failover to a replica (its own run_id, and a
// new replid), a failover and back to the old primary (which resynced
// from the other and was promoted again: a new replid).
//
// The scripts get the id as an argument: each connection reads it once,
// when dialled (INFO in every script would cost a third of a round trip).
// That is as exact as reading INFO in the script: a TCP connection never
// outlives the Redis process that accepted it, and go-redis's Conn never
// redials behind the register's back. Only the replid can change under a
// live connection (a primary demoted and promoted again), so a
// connection idle for more than maxIdleConn is not reused.

// maxIdleConn is how long a pooled connection may have been idle and still
// be used: shorter than a failover and back.
const maxIdleConn = time.Second

// markedScript is a script that does action only while the memory marker
// (KEYS[2]) says "since T ID" for this Redis process (ARGV[5], its id)
// with T no later than ARGV[1]: it answers {2, since} when the memory is
// too young, {3} when another server is recording a loss, and otherwise
// (a loss: no marker, or one of another process) marks the loss pending
// with token ARGV[3] for ARGV[4] ms and answers {4}. action is Lua
// returning the script's {0}/{1}... reply.
func markedScript(action string) *goredis.Script {
	return goredis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local run = ARGV[5]
local m = redis.call('GET', KEYS[2])
if m then
  local since, mrun = string.match(m, '^since (%-?%d+) (%x+)$')
  if since and mrun == run then
    if tonumber(since) > tonumber(ARGV[1]) then return {2, since} end
` + action + `  end
  if string.match(m, '^pending %x+ (%x+)$') == run then return {3} end
end
redis.call('SET', KEYS[2], 'pending ' .. ARGV[3] .. ' ' .. run, 'PX', ARGV[4])
return {4}
`)
}

var (
	// insertScript inserts a ClientHello's entry (KEYS[1]) for ARGV[2]
	// ms: {1} inserted, {0} replayed.
	insertScript = markedScript(`
    if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then return {1} end
    return {0}
`)
	// probeScript only records a loss (KEYS[1] is the marker too).
	probeScript = markedScript(`
    return {1}
`)
)

// sinceScript completes the recording of a loss: if the marker still is
// the pending one this server wrote, in the same Redis process (ARGV[3]),
// it becomes "since ARGV[2]". KEYS[1] marker; ARGV[1] token; reply 1 or 0.
var sinceScript = goredis.NewScript(`
if redis.replicate_commands then redis.replicate_commands() end
local run = ARGV[3]
if redis.call('GET', KEYS[1]) ~= 'pending ' .. ARGV[1] .. ' ' .. run then return 0 end
redis.call('SET', KEYS[1], 'since ' .. ARGV[2] .. ' ' .. run)
return 1
`)

// Results of insertScript.
const (
	resReplayed = iota
	resInserted
	resTooYoung
	resPending
	resLost
)

// client returns the Redis client, made on first use. It connects when
// a command needs a connection (go-redis dials lazily).
func (r *Register) client() (goredis.UniversalClient, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errors.New("redisreg: register closed")
	}
	if r.cl != nil {
		return r.cl, nil
	}
	o := r.opts
	// No retries by the client: a write script is never sent twice behind
	// the register's back (a retried insert would find its own entry, a
	// replay); execRetry decides. RESP2 and no CLIENT SETINFO, for Redis 5.
	var dial func(ctx context.Context, network, addr string) (net.Conn, error)
	if o.TLS != nil {
		dial = tlsDialer(o.TLS, o.Timeout)
	}
	switch o.Mode {
	case ModeSingle:
		r.cl = goredis.NewClient(&goredis.Options{Addr: o.Addr, Username: o.Username, Password: o.Password, DB: o.DB,
			TLSConfig: o.TLS, Dialer: dial, DialTimeout: o.Timeout, ReadTimeout: o.Timeout, WriteTimeout: o.Timeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true})
	case ModeSentinel:
		r.cl = goredis.NewFailoverClient(&goredis.FailoverOptions{MasterName: o.MasterName, SentinelAddrs: o.Addrs,
			SentinelUsername: o.SentinelUsername, SentinelPassword: o.SentinelPassword,
			Username: o.Username, Password: o.Password, DB: o.DB,
			TLSConfig: o.TLS, Dialer: dial, DialTimeout: o.Timeout, ReadTimeout: o.Timeout, WriteTimeout: o.Timeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true})
	case ModeCluster:
		r.cl = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: o.Addrs, Username: o.Username, Password: o.Password,
			TLSConfig: o.TLS, Dialer: dial, DialTimeout: o.Timeout, ReadTimeout: o.Timeout, WriteTimeout: o.Timeout,
			ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1, Protocol: 2, DisableIdentity: true})
	}
	return r.cl, nil
}

// tlsDialer dials TLS connections that go-redis's pool can check.
// go-redis checks an idle connection before reusing it (a non-blocking
// peek at its socket: a closed one is dropped), but not a *tls.Conn,
// which hides its socket. After a Redis restart, every pooled TLS
// connection would then fail one call each (fail closed, but early data
// refused for longer than the loss needs). The connection this returns
// lets the pool peek at the TCP socket under TLS: a closed socket, or
// bytes nobody asked for (an alert, a close_notify), drop the
// connection; TLS 1.3 session tickets, which arrive before the first
// reply, are read with it.
func tlsDialer(cfg *tls.Config, timeout time.Duration) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		raw, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		c := cfg
		if c.ServerName == "" {
			c = cfg.Clone()
			c.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(raw, c)
		hctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			raw.Close()
			return nil, err
		}
		if sc, ok := raw.(syscall.Conn); ok {
			return checkableTLS{tc, sc}, nil
		}
		return tc, nil
	}
}

// checkableTLS is a TLS connection whose socket go-redis may peek at.
type checkableTLS struct {
	*tls.Conn
	sock syscall.Conn
}

func (c checkableTLS) SyscallConn() (syscall.RawConn, error) { return c.sock.SyscallConn() }

// wrapErr names what failed; a Redis error reply is kept as Redis wrote it
// (it never holds the password), a denied script is ErrScriptDenied.
func (r *Register) wrapErr(what string, err error) error {
	var re goredis.Error
	if errors.As(err, &re) && err != goredis.Nil {
		msg := re.Error()
		if strings.HasPrefix(msg, "NOPERM") {
			return fmt.Errorf("%w (%s: %s)", ErrScriptDenied, what, msg)
		}
		if isAuthErr(msg) {
			return fmt.Errorf("redisreg: AUTH refused: %w", err)
		}
		return fmt.Errorf("redisreg: %s: Redis answered: %w", what, err)
	}
	return fmt.Errorf("redisreg: %s: %w", what, err)
}

// do runs one call within the timeout, counting it.
func (r *Register) do(what string, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	start := time.Now() // real time: round-trip latency for Stats
	err := f(ctx)
	r.latency.Add(int64(time.Since(start)))
	r.roundTrips.Add(1)
	if err != nil {
		r.errs.Add(1)
		return r.wrapErr(what, err)
	}
	return nil
}

// pconn is a pooled connection to one Redis node and the id of the
// process at its other end.
type pconn struct {
	c    *goredis.Conn
	node string // the node's address, the pool's key
	id   string
	used time.Time // real time of its last use
}

// conn returns a connection to the node holding key: an idle one used
// within maxIdleConn, or a new one, whose process id it reads.
func (r *Register) conn(ctx context.Context, key string) (*pconn, error) {
	cl, err := r.client()
	if err != nil {
		return nil, err
	}
	var node *goredis.Client
	switch c := cl.(type) {
	case *goredis.ClusterClient:
		if node, err = c.MasterForKey(ctx, key); err != nil {
			return nil, err
		}
	case *goredis.Client:
		node = c
	}
	addr := node.Options().Addr
	r.mu.Lock()
	idle := r.idle[addr]
	var stale []*pconn
	for len(idle) > 0 {
		pc := idle[len(idle)-1]
		idle = idle[:len(idle)-1]
		if time.Since(pc.used) < maxIdleConn {
			r.idle[addr] = idle
			r.mu.Unlock()
			closeAll(stale)
			return pc, nil
		}
		stale = append(stale, pc)
	}
	r.idle[addr] = idle
	r.mu.Unlock()
	closeAll(stale)
	pc := &pconn{c: node.Conn(), node: addr}
	server, err := pc.c.Info(ctx, "server").Result()
	var repl string
	if err == nil {
		repl, err = pc.c.Info(ctx, "replication").Result()
	}
	if err != nil {
		pc.c.Close()
		return nil, err
	}
	pc.id = infoField(server, "run_id") + infoField(repl, "master_replid")
	if len(pc.id) < 2 || strings.Trim(pc.id, "0123456789abcdefABCDEF") != "" {
		pc.c.Close()
		return nil, errors.New("no run_id or master_replid in INFO")
	}
	return pc, nil
}

// put returns pc to the pool; after an error it is closed instead.
func (r *Register) put(pc *pconn, err error) {
	pc.used = time.Now() // real time: how long the connection idles
	r.mu.Lock()
	if err == nil && !r.closed && len(r.idle[pc.node]) < maxIdle {
		r.idle[pc.node] = append(r.idle[pc.node], pc)
		pc = nil
	}
	var dead []*pconn
	if err != nil && !isRedisReply(r.wrapErr("", err)) {
		// The node's connections likely died together (a restart).
		dead = r.idle[pc.node]
		delete(r.idle, pc.node)
	}
	r.mu.Unlock()
	closeAll(dead)
	if pc != nil {
		pc.c.Close()
	}
}

func closeAll(pcs []*pconn) {
	for _, pc := range pcs {
		pc.c.Close()
	}
}

// maxIdle is how many idle connections the register keeps per node.
const maxIdle = 8

// exec runs script on a connection to the node holding keys (all under
// one hash tag) with args, the connection's process id inserted as
// ARGV[idAt], and returns its reply.
func (r *Register) exec(script *goredis.Script, what string, keys []string, args []any, idAt int) (any, error) {
	var rep any
	err := r.do(what, func(ctx context.Context) error {
		pc, err := r.conn(ctx, keys[0])
		if err != nil {
			return err
		}
		a := slices.Insert(slices.Clone(args), idAt-1, any(pc.id))
		rep, err = script.Run(ctx, pc.c, keys, a...).Result()
		r.put(pc, err)
		return err
	})
	return rep, err
}

// execArray is exec of a script whose reply is an array.
func (r *Register) execArray(script *goredis.Script, what string, keys []string, args []any) ([]any, error) {
	rep, err := r.exec(script, what, keys, args, 5)
	if err != nil {
		return nil, err
	}
	arr, ok := rep.([]any)
	if !ok {
		return nil, fmt.Errorf("redisreg: %s: unexpected reply", what)
	}
	return arr, nil
}

// Stats returns the register's counters.
func (r *Register) Stats() Stats {
	return Stats{RoundTrips: r.roundTrips.Load(), Errors: r.errs.Load(), Latency: time.Duration(r.latency.Load())}
}

// CheckAndInsert implements tls13.StrikeRegister. In one atomic script it
// checks that Redis's memory is complete since notBefore - MaxClockSkew
// and sets the key if absent, to live until expires + MaxClockSkew by the
// clock that read now. It returns (true, nil) for a new key, (false, nil)
// for a replay, and (false, err) otherwise: err wraps
// tls13.ErrRegisterTooYoung when Redis lost data after notBefore (or is
// recording such a loss), ErrEvictionPolicy when Redis may evict entries,
// ErrScriptDenied when the Redis user may not run the script, and says
// what failed when Redis cannot be reached or answers oddly.
func (r *Register) CheckAndInsert(key []byte, now, notBefore, expires time.Time) (bool, error) {
	if err := r.checkPolicy(); err != nil {
		return false, err
	}
	entry, marker := r.entryKey(key)
	skew := ceilMS(r.opts.MaxClockSkew)
	latestSince := notBefore.UnixMilli() - skew
	ttl := max(ceilMS(expires.Sub(now))+skew, 1)
	for recorded := false; ; recorded = true {
		token := r.id + strconv.FormatUint(r.seq.Add(1), 16)
		arr, err := r.execRetry(insertScript, "strike script", []string{entry, marker},
			[]any{latestSince, ttl, token, 2 * ceilMS(r.opts.Timeout)})
		if err != nil {
			return false, err
		}
		code, since, err := insertResult(arr)
		if err != nil {
			return false, err
		}
		switch code {
		case resInserted:
			return true, nil
		case resReplayed:
			return false, nil
		case resTooYoung:
			return false, fmt.Errorf("redisreg: Redis's memory is complete only since %s (a loss of data), which with a clock skew of %v is after this ClientHello's notBefore %s: %w",
				time.UnixMilli(since).UTC().Format(time.RFC3339Nano), r.opts.MaxClockSkew, notBefore.UTC().Format(time.RFC3339Nano), tls13.ErrRegisterTooYoung)
		case resPending:
			return false, fmt.Errorf("redisreg: Redis lost data and another server is recording when: %w", tls13.ErrRegisterTooYoung)
		}
		// resLost: we found the loss. Redis recorded it (the marker is
		// pending, which refuses everything) before it answered, so any
		// reading of our clock from now on is a time since which its
		// memory is complete.
		if recorded {
			return false, fmt.Errorf("redisreg: Redis lost data again while recording a loss: %w", tls13.ErrRegisterTooYoung)
		}
		if err := r.recordLoss(marker, token); err != nil {
			return false, err
		}
		r.sweep(marker)
		// Now the rule decides for this very ClientHello too.
	}
}

// execRetry is exec, tried once more after a connection error that is
// not a timeout: a connection that died with its Redis (a restart, a
// failover) is replaced by the client, and the second try finds the loss
// instead of failing. A timeout is not retried (it would double the wait,
// and a retry could only refuse anyway).
func (r *Register) execRetry(script *goredis.Script, what string, keys []string, args []any) ([]any, error) {
	arr, err := r.execArray(script, what, keys, args)
	moved := err != nil && isRedirect(err)
	if err != nil && (!isRedisReply(err) || moved) {
		r.reloadTopology()
	}
	if moved || err != nil && !isRedisReply(err) && !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) && r.connected() {
		arr, err = r.execArray(script, what, keys, args)
	}
	return arr, err
}

// reloadTopology has a Cluster client read the slots' owners again (in
// the background): after a connection error a primary may have died and
// its replica taken its slots, which the client would otherwise learn
// only from a MOVED reply the dead node cannot send.
func (r *Register) reloadTopology() {
	r.mu.Lock()
	cc, ok := r.cl.(*goredis.ClusterClient)
	r.mu.Unlock()
	if ok {
		cc.ReloadState(context.Background())
	}
}

func (r *Register) connected() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cl != nil
}

// isRedirect says a Cluster node answered that another holds the slot
// (MOVED, ASK: a slot migration) or cannot serve it now.
func isRedirect(err error) bool {
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if strings.Contains(err.Error(), "Redis answered: "+p) {
			return true
		}
	}
	return false
}

// isAuthErr says a Redis error reply refuses the login.
func isAuthErr(msg string) bool {
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") || strings.Contains(msg, "AUTH")
}

// isRedisReply says err is Redis's answer (an error reply), not a failure
// to get one.
func isRedisReply(err error) bool {
	var re goredis.Error
	return errors.As(err, &re) || errors.Is(err, ErrScriptDenied)
}

// recordLoss turns the pending marker named by token into "since now".
func (r *Register) recordLoss(marker, token string) error {
	now := r.opts.Now()
	since := now.UnixMilli() // rounded down; the skew check wants it up
	if now.After(time.UnixMilli(since)) {
		since++
	}
	rep, err := r.exec(sinceScript, "recording a loss", []string{marker}, []any{token, since}, 3)
	if err != nil {
		return err
	}
	switch n, _ := rep.(int64); {
	case n == 1:
		return nil
	case n == 0:
		return fmt.Errorf("redisreg: Redis lost data, and its recording was overtaken: %w", tls13.ErrRegisterTooYoung)
	}
	return errors.New("redisreg: unexpected reply to the marker script")
}

// sweep records the loss found under one tag under every other tag that
// lost its memory too (the same Redis process, or another Cluster node
// that did), now rather than on each tag's next use: one loss, and not
// one per tag, costs early data. Errors are left to that next use.
func (r *Register) sweep(done string) {
	for i := range shards {
		m := r.markerKey("{s" + strconv.Itoa(i) + "}")
		if m == done {
			continue
		}
		token := r.id + strconv.FormatUint(r.seq.Add(1), 16)
		arr, err := r.execArray(probeScript, "marker probe", []string{m, m}, []any{int64(math.MaxInt64), 1, token, 2 * ceilMS(r.opts.Timeout)})
		if err != nil {
			continue
		}
		if code, _, err := insertResult(arr); err == nil && code == resLost {
			r.recordLoss(m, token)
		}
	}
}

// insertResult decodes insertScript's reply.
func insertResult(arr []any) (code int, since int64, err error) {
	if len(arr) == 0 {
		return 0, 0, errors.New("redisreg: empty reply to the strike script")
	}
	c, ok := arr[0].(int64)
	if !ok {
		return 0, 0, errors.New("redisreg: unexpected reply to the strike script")
	}
	code = int(c)
	switch {
	case code == resTooYoung && len(arr) == 2:
		s, ok := arr[1].(string)
		if ok {
			since, err = strconv.ParseInt(s, 10, 64)
		}
		if !ok || err != nil {
			return 0, 0, errors.New("redisreg: bad marker time in the strike script's reply")
		}
		return code, since, nil
	case code >= resReplayed && code <= resLost && code != resTooYoung && len(arr) == 1:
		return code, 0, nil
	}
	return 0, 0, errors.New("redisreg: unexpected strike script result")
}

// checkPolicy refuses while Redis's maxmemory-policy lets it evict
// entries, reading the policy again once per PolicyCheckInterval.
func (r *Register) checkPolicy() error {
	now := r.opts.Now()
	r.mu.Lock()
	policy, at := r.policy, r.policyAt
	r.mu.Unlock()
	if policy == "" || now.Before(at) || !now.Before(at.Add(r.opts.PolicyCheckInterval)) {
		cl, err := r.client()
		if err != nil {
			return err
		}
		p, err := r.readPolicy(cl)
		if err != nil && !isRedisReply(err) && !isTimeout(err) {
			p, err = r.readPolicy(cl) // once more, as execRetry
		}
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.policy, r.policyAt = p, now
		r.mu.Unlock()
		policy = p
	}
	if policy != "noeviction" {
		return fmt.Errorf("redisreg: Redis maxmemory-policy is %q: %w", policy, ErrEvictionPolicy)
	}
	return nil
}

// readPolicy is the maxmemory-policy of every node the client uses (the
// primary; each primary and replica of a Cluster): the first that is not
// noeviction, or noeviction.
func (r *Register) readPolicy(cl goredis.UniversalClient) (string, error) {
	cc, ok := cl.(*goredis.ClusterClient)
	if !ok {
		return r.nodePolicy(cl)
	}
	var mu sync.Mutex
	var found []string
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.Timeout)
	defer cancel()
	err := cc.ForEachShard(ctx, func(ctx context.Context, n *goredis.Client) error {
		p, err := r.nodePolicy(n)
		if err != nil {
			return fmt.Errorf("%w (node %s)", err, n.Options().Addr)
		}
		mu.Lock()
		found = append(found, p)
		mu.Unlock()
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(found) == 0 {
		return "", errors.New("redisreg: no Redis Cluster node known")
	}
	slices.Sort(found)
	for _, p := range found {
		if p != "noeviction" {
			return p, nil
		}
	}
	return "noeviction", nil
}

// nodePolicy reads maxmemory-policy with CONFIG GET or, where CONFIG is
// renamed away or not permitted, from INFO memory.
func (r *Register) nodePolicy(n goredis.Cmdable) (string, error) {
	var m map[string]string
	configErr := r.do("CONFIG GET", func(ctx context.Context) error {
		var err error
		m, err = n.ConfigGet(ctx, "maxmemory-policy").Result()
		return err
	})
	if configErr == nil && m["maxmemory-policy"] != "" {
		return m["maxmemory-policy"], nil
	}
	if configErr != nil && (!isRedisReply(configErr) || strings.Contains(configErr.Error(), "AUTH refused")) {
		return "", configErr
	}
	var info string
	infoErr := r.do("INFO memory", func(ctx context.Context) error {
		var err error
		info, err = n.Info(ctx, "memory").Result()
		return err
	})
	if infoErr == nil {
		if v := infoField(info, "maxmemory_policy"); v != "" {
			return v, nil
		}
		infoErr = errors.New("no maxmemory_policy")
	}
	if !isRedisReply(infoErr) {
		return "", infoErr
	}
	if configErr == nil {
		configErr = errors.New("unexpected reply")
	}
	return "", fmt.Errorf("redisreg: cannot read Redis's maxmemory-policy (%v; %v): allow CONFIG GET or INFO to this user; early data refused", configErr, infoErr)
}

// infoField is the value of field name in an INFO reply, "" if none.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// Close closes the connections; later calls fail.
func (r *Register) Close() error {
	r.mu.Lock()
	cl := r.cl
	r.closed, r.cl = true, nil
	for _, idle := range r.idle {
		closeAll(idle)
	}
	clear(r.idle)
	r.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	return nil
}

// ceilMS is d in whole milliseconds, rounded up.
func ceilMS(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
