package redisreg

import (
	"bufio"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/tls13"
)

// Defaults for Options.
const (
	DefaultPrefix              = "ztls:strike:"
	DefaultTimeout             = time.Second
	DefaultMaxClockSkew        = time.Second
	DefaultPolicyCheckInterval = 10 * time.Second
	maxIdle                    = 4
)

// ErrEvictionPolicy is wrapped by the error of every CheckAndInsert while
// Redis runs with a maxmemory-policy other than noeviction: any other
// policy may drop strike entries (the volatile-* ones pick exactly the
// keys with an expiry, which all strike entries have), and a dropped entry
// lets its ClientHello be replayed. The error names the policy found.
var ErrEvictionPolicy = errors.New("redisreg: Redis may evict strike entries; set maxmemory-policy noeviction (redis.conf and CONFIG SET); early data refused")

// Options configure a Register. Only Addr is required.
type Options struct {
	Addr     string        // Redis address, host:port
	Password string        // sent with AUTH when non-empty; never logged
	DB       int           // SELECT'ed when non-zero
	Prefix   string        // key prefix; "" means DefaultPrefix
	Timeout  time.Duration // dial and per-command timeout; 0 means DefaultTimeout

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

// Register is a strike register (tls13.StrikeRegister) kept in Redis, so
// every server of a fleet pointed at the same Redis refuses a ClientHello
// any of them has seen. Each CheckAndInsert is one Lua script that checks
// the marker recording since when Redis's memory is complete and inserts
// with SET NX PX in the same atomic step (see the package documentation).
// It fails closed: any connection, protocol or configuration problem is an
// error, which the TLS server turns into rejected early data.
//
// Safe for concurrent use; it keeps up to four idle connections.
type Register struct {
	opts   Options
	marker []byte // the key of the memory marker
	id     string // names this register's pending markers
	seq    atomic.Uint64

	mu       sync.Mutex
	idle     []*conn
	closed   bool
	policy   string    // maxmemory-policy last read; "" before the first reading
	policyAt time.Time // when (Now) it was read
}

var _ tls13.StrikeRegister = (*Register)(nil)

// New returns a register for opts. It does not connect: a server may
// start while Redis is down and simply refuses early data until Redis is
// reachable.
func New(opts Options) (*Register, error) {
	if opts.Addr == "" {
		return nil, errors.New("redisreg: no address")
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("redisreg: address %q: %v", opts.Addr, err)
	}
	if opts.DB < 0 {
		return nil, errors.New("redisreg: negative DB")
	}
	if opts.MaxClockSkew < 0 {
		return nil, errors.New("redisreg: negative MaxClockSkew")
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
	return &Register{opts: opts, marker: []byte(opts.Prefix + "marker"), id: hex.EncodeToString(id[:])}, nil
}

// The memory marker (key Prefix+"marker", no expiry) holds one of
//
//	since <ms> <run_id>          memory complete since <ms> (Unix ms, on the
//	                             clock of the server that recorded the loss)
//	pending <token> <run_id>     a loss is being recorded (expires by itself)
//
// where run_id is the Redis process's (INFO server). A missing marker, an
// unreadable one, or one naming another run_id (a restart, maybe from an
// older snapshot, or a failover) means entries may have been lost.
//
// The scripts get the run_id as an argument: each connection reads it
// once, when dialled. That is as atomic as reading INFO in the script, at
// a fraction of the cost per call: a TCP connection never outlives the
// Redis process that accepted it, so every script sent on it runs in the
// process whose run_id it read.

// insertScript checks the marker and, when Redis's memory covers the
// ClientHello, inserts the entry.
//
// KEYS[1] entry, KEYS[2] marker; ARGV[1] the latest acceptable "since"
// (notBefore - MaxClockSkew, Unix ms), ARGV[2] the entry's PX, ARGV[3] a
// pending token, ARGV[4] the pending marker's PX, ARGV[5] the run_id.
// Reply: {0} replayed, {1} inserted, {2, since} memory too young, {3} a
// loss is being recorded by another server, {4} a loss found: the marker
// is now pending with ARGV[3].
var insertScript = markedScript(`
    if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then return {1} end
    return {0}
`)

// markedScript is a script that does action only while the register's
// memory marker (KEYS[2]) says "since T RUN" for this Redis process
// (ARGV[5], run_id) with T no later than ARGV[1]: it answers {2, since}
// when the memory is too young, {3} when another server is recording a
// loss, and otherwise (a loss: no marker, or one of another run) marks the
// loss pending with token ARGV[3] for ARGV[4] ms and answers {4}. action
// is Lua returning the script's {0}/{1}... reply.
func markedScript(action string) string {
	return `
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
`
}

// sinceScript completes the recording of a loss: if the marker still is
// the pending one this server wrote, under the same Redis process, it
// becomes "since ARGV[2]". KEYS[1] marker; ARGV[1] token; ARGV[3] the
// run_id; reply 1 or 0.
const sinceScript = `
if redis.replicate_commands then redis.replicate_commands() end
local run = ARGV[3]
if redis.call('GET', KEYS[1]) ~= 'pending ' .. ARGV[1] .. ' ' .. run then return 0 end
redis.call('SET', KEYS[1], 'since ' .. ARGV[2] .. ' ' .. run)
return 1
`

var (
	insertSHA = scriptSHA(insertScript)
	sinceSHA  = scriptSHA(sinceScript)
)

func scriptSHA(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Results of insertScript.
const (
	resReplayed = iota
	resInserted
	resTooYoung
	resPending
	resLost
)

// CheckAndInsert implements tls13.StrikeRegister. In one atomic script it
// checks that Redis's memory is complete since notBefore - MaxClockSkew
// and sets the key if absent, to live until expires + MaxClockSkew by the
// clock that read now. It returns (true, nil) for a new key, (false, nil)
// for a replay, and (false, err) otherwise: err wraps
// tls13.ErrRegisterTooYoung when Redis lost data after notBefore (or is
// recording such a loss), ErrEvictionPolicy when Redis may evict entries,
// and says what failed when Redis cannot be reached or answers oddly.
func (r *Register) CheckAndInsert(key []byte, now, notBefore, expires time.Time) (bool, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := r.get()
		if err != nil {
			return false, err
		}
		fresh, err := r.checkAndInsert(c, key, now, notBefore, expires)
		r.put(c)
		// A pooled connection may have died with its Redis (a restart),
		// and then so did the other idle ones: drop them and try once
		// more on a new connection. Not after a timeout, which would
		// double the wait (a retry could only refuse anyway).
		if err != nil && c.broken && reused && attempt == 0 && !isTimeout(err) {
			r.dropIdle()
			continue
		}
		return fresh, err
	}
}

func (r *Register) checkAndInsert(c *conn, key []byte, now, notBefore, expires time.Time) (bool, error) {
	if err := r.checkPolicy(c); err != nil {
		return false, err
	}
	k := make([]byte, 0, len(r.opts.Prefix)+2*len(key))
	k = append(k, r.opts.Prefix...)
	k = hex.AppendEncode(k, key)
	skew := ceilMS(r.opts.MaxClockSkew)
	latestSince := notBefore.UnixMilli() - skew
	ttl := ceilMS(expires.Sub(now)) + skew
	if ttl < 1 {
		ttl = 1
	}
	for recorded := false; ; recorded = true {
		token := r.id + strconv.FormatUint(r.seq.Add(1), 16)
		rep, err := c.eval(r.opts.Timeout, insertScript, insertSHA, [][]byte{k, r.marker},
			strconv.AppendInt(nil, latestSince, 10), strconv.AppendInt(nil, ttl, 10),
			[]byte(token), strconv.AppendInt(nil, 2*ceilMS(r.opts.Timeout), 10), c.run)
		if err != nil {
			return false, err
		}
		code, since, err := insertResult(rep)
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
		if err := r.recordLoss(c, token); err != nil {
			return false, err
		}
		// Now the rule decides for this very ClientHello too.
	}
}

// recordLoss turns the pending marker named by token into "since now".
func (r *Register) recordLoss(c *conn, token string) error {
	now := r.opts.Now()
	since := now.UnixMilli() // rounded down; the skew check wants it up
	if now.After(time.UnixMilli(since)) {
		since++
	}
	rep, err := c.eval(r.opts.Timeout, sinceScript, sinceSHA, [][]byte{r.marker}, []byte(token), strconv.AppendInt(nil, since, 10), c.run)
	if err != nil {
		return err
	}
	switch {
	case rep.kind == ':' && rep.num == 1:
		return nil
	case rep.kind == ':' && rep.num == 0:
		return fmt.Errorf("redisreg: Redis lost data, and its recording was overtaken: %w", tls13.ErrRegisterTooYoung)
	case rep.kind == '-':
		return fmt.Errorf("redisreg: recording a loss: %s", rep.str)
	}
	return protoErr("unexpected reply %q to the marker script", rep.kind)
}

// insertResult decodes insertScript's reply.
func insertResult(rep reply) (code int, since int64, err error) {
	if rep.kind == '-' {
		return 0, 0, fmt.Errorf("redisreg: strike script: %s", rep.str)
	}
	if rep.kind != '*' || len(rep.array) == 0 || rep.array[0].kind != ':' {
		return 0, 0, protoErr("unexpected reply %q to the strike script", rep.kind)
	}
	code = int(rep.array[0].num)
	switch {
	case code == resTooYoung && len(rep.array) == 2 && rep.array[1].kind == '$':
		since, err = strconv.ParseInt(rep.array[1].str, 10, 64)
		if err != nil {
			return 0, 0, protoErr("bad marker time %q", rep.array[1].str)
		}
		return code, since, nil
	case code >= resReplayed && code <= resLost && code != resTooYoung && len(rep.array) == 1:
		return code, 0, nil
	}
	return 0, 0, protoErr("unexpected strike script result")
}

// checkPolicy refuses while Redis's maxmemory-policy lets it evict
// entries, reading the policy again once per PolicyCheckInterval.
func (r *Register) checkPolicy(c *conn) error {
	now := r.opts.Now()
	r.mu.Lock()
	policy, at := r.policy, r.policyAt
	r.mu.Unlock()
	if policy == "" || now.Before(at) || !now.Before(at.Add(r.opts.PolicyCheckInterval)) {
		p, err := c.readPolicy(r.opts.Timeout)
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

// Close closes the idle connections; later calls fail.
func (r *Register) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.dropIdle()
	return nil
}

func (r *Register) dropIdle() {
	r.mu.Lock()
	idle := r.idle
	r.idle = nil
	r.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// put returns c to the pool, or closes it if it broke.
func (r *Register) put(c *conn) {
	r.mu.Lock()
	if !c.broken && !r.closed && len(r.idle) < maxIdle {
		r.idle = append(r.idle, c)
		c = nil
	}
	r.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// get returns an idle connection (reused) or dials a new one.
func (r *Register) get() (c *conn, reused bool, err error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, false, errors.New("redisreg: register closed")
	}
	if n := len(r.idle); n > 0 {
		c := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return c, true, nil
	}
	r.mu.Unlock()
	c, err = r.dial()
	return c, false, err
}

func (r *Register) dial() (*conn, error) {
	nc, err := net.DialTimeout("tcp", r.opts.Addr, r.opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("redisreg: %w", err)
	}
	c := &conn{nc: nc, br: bufio.NewReader(nc)}
	if r.opts.Password != "" {
		if err := c.expectOK(r.opts.Timeout, "AUTH", []byte("AUTH"), []byte(r.opts.Password)); err != nil {
			c.close()
			return nil, err
		}
	}
	if r.opts.DB != 0 {
		if err := c.expectOK(r.opts.Timeout, "SELECT", []byte("SELECT"), []byte(strconv.Itoa(r.opts.DB))); err != nil {
			c.close()
			return nil, err
		}
	}
	if err := c.readRunID(r.opts.Timeout); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
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

// conn is one connection speaking RESP2. broken is set once a command
// failed below the level of Redis replies; such a connection is closed.
type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	buf    []byte
	broken bool
	run    []byte // the run_id of the Redis process at the other end
}

func (c *conn) close() { c.nc.Close() }

// do sends one command and reads its reply within timeout.
func (c *conn) do(timeout time.Duration, args ...[]byte) (reply, error) {
	rep, err := c.roundTrip(timeout, args)
	if err != nil {
		c.broken = true
	}
	return rep, err
}

func (c *conn) roundTrip(timeout time.Duration, args [][]byte) (reply, error) {
	if err := c.nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return reply{}, fmt.Errorf("redisreg: %w", err)
	}
	c.buf = appendCommand(c.buf[:0], args...)
	if _, err := c.nc.Write(c.buf); err != nil {
		return reply{}, fmt.Errorf("redisreg: write: %w", err)
	}
	rep, err := readReply(c.br)
	if err != nil {
		if errors.Is(err, errProtocol) {
			return reply{}, err
		}
		return reply{}, fmt.Errorf("redisreg: read: %w", err)
	}
	return rep, nil
}

// eval runs a script by its SHA1, sending its text only when Redis does
// not have it cached (the first time, and after a restart or SCRIPT FLUSH).
func (c *conn) eval(timeout time.Duration, script, sha string, keys [][]byte, args ...[]byte) (reply, error) {
	cmd := make([][]byte, 0, 3+len(keys)+len(args))
	cmd = append(cmd, []byte("EVALSHA"), []byte(sha), strconv.AppendInt(nil, int64(len(keys)), 10))
	cmd = append(append(cmd, keys...), args...)
	rep, err := c.do(timeout, cmd...)
	if err == nil && rep.kind == '-' && strings.HasPrefix(rep.str, "NOSCRIPT") {
		cmd[0], cmd[1] = []byte("EVAL"), []byte(script)
		rep, err = c.do(timeout, cmd...)
	}
	return rep, err
}

// readRunID reads the run_id of the Redis process c is connected to.
func (c *conn) readRunID(timeout time.Duration) error {
	rep, err := c.do(timeout, []byte("INFO"), []byte("server"))
	if err != nil {
		return err
	}
	// Hex only, as the scripts' patterns for the marker expect.
	if v := infoField(rep, "run_id"); v != "" && strings.Trim(v, "0123456789abcdefABCDEF") == "" {
		c.run = []byte(v)
		return nil
	}
	if rep.kind == '-' {
		return fmt.Errorf("redisreg: INFO server refused: %s", rep.str)
	}
	return protoErr("no run_id in INFO server")
}

// readPolicy reads maxmemory-policy with CONFIG GET or, where CONFIG is
// renamed away or not permitted, from INFO memory.
func (c *conn) readPolicy(timeout time.Duration) (string, error) {
	rep, err := c.do(timeout, []byte("CONFIG"), []byte("GET"), []byte("maxmemory-policy"))
	if err != nil {
		return "", err
	}
	if rep.kind == '*' && len(rep.array) == 2 && rep.array[1].kind == '$' && rep.array[1].str != "" {
		return rep.array[1].str, nil
	}
	configErr := "unexpected reply"
	if rep.kind == '-' {
		configErr = rep.str
	}
	rep, err = c.do(timeout, []byte("INFO"), []byte("memory"))
	if err != nil {
		return "", err
	}
	if v := infoField(rep, "maxmemory_policy"); v != "" {
		return v, nil
	}
	infoErr := "no maxmemory_policy"
	if rep.kind == '-' {
		infoErr = rep.str
	}
	return "", fmt.Errorf("redisreg: cannot read Redis's maxmemory-policy (CONFIG GET: %s; INFO memory: %s): allow one of them to this user; early data refused", configErr, infoErr)
}

// infoField is the value of field name in an INFO reply, "" if none.
func infoField(rep reply, name string) string {
	if rep.kind != '$' {
		return ""
	}
	for _, line := range strings.Split(rep.str, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// expectOK runs a command whose only good reply is +OK. The error names
// the command, never its arguments (AUTH carries the password).
func (c *conn) expectOK(timeout time.Duration, name string, args ...[]byte) error {
	rep, err := c.do(timeout, args...)
	if err != nil {
		return err
	}
	if rep.kind != '+' || rep.str != "OK" {
		if rep.kind == '-' {
			return fmt.Errorf("redisreg: %s refused: %s", name, rep.str)
		}
		return fmt.Errorf("redisreg: %s: unexpected reply", name)
	}
	return nil
}
