package redisreg

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// Defaults for Options.
const (
	DefaultPrefix  = "ztls:strike:"
	DefaultTimeout = time.Second
	DefaultWindow  = 10 * time.Second
	maxIdle        = 4
)

// ErrStartupWindow is returned, with fresh=false, during the window W
// after the register was created or after Redis was found to have lost
// its data (ZTLS-SPEC.md, Section 5): ClientHellos accepted before then
// may be unknown to the register, so early data is refused.
var ErrStartupWindow = errors.New("redisreg: within the startup window after a (re)start; early data refused")

// Options configure a Register. Only Addr is required.
type Options struct {
	Addr     string        // Redis address, host:port
	Password string        // sent with AUTH when non-empty; never logged
	DB       int           // SELECT'ed when non-zero
	Prefix   string        // key prefix; "" means DefaultPrefix
	Timeout  time.Duration // dial and per-command timeout; 0 means DefaultTimeout
	// Window is the freshness window W: the register refuses everything
	// for W after it is created and after Redis lost its data. 0 means
	// DefaultWindow. It should equal the TLS server's window.
	Window time.Duration
	// Now is the clock the startup window is measured on; it must be the
	// clock whose readings CheckAndInsert receives (tls13.Config.Time).
	// nil means time.Now.
	Now func() time.Time
}

// Register is a strike register (tls13.StrikeRegister) kept in Redis with
// SET key 1 NX PX ttl, so every server of a fleet pointed at the same
// Redis refuses a ClientHello any of them has seen. It fails closed: any
// connection or protocol problem is an error, which the TLS server turns
// into rejected early data. Redis should run with a noeviction memory
// policy, or it may forget entries under memory pressure.
//
// Safe for concurrent use; it keeps up to four idle connections.
type Register struct {
	opts Options

	mu         sync.Mutex
	idle       []*conn
	quietUntil time.Time // refuse everything before this (startup window)
	instance   string    // the Redis data generation token last seen
	closed     bool
	markerKey  []byte
}

var _ tls13.StrikeRegister = (*Register)(nil)

// New returns a register for opts. It does not connect: a server may
// start while Redis is down and simply refuses early data until Redis is
// reachable and the startup window has passed.
func New(opts Options) (*Register, error) {
	if opts.Addr == "" {
		return nil, errors.New("redisreg: no address")
	}
	if _, _, err := net.SplitHostPort(opts.Addr); err != nil {
		return nil, fmt.Errorf("redisreg: address %q: %v", opts.Addr, err)
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Window <= 0 {
		opts.Window = DefaultWindow
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.DB < 0 {
		return nil, errors.New("redisreg: negative DB")
	}
	return &Register{opts: opts, quietUntil: opts.Now().Add(opts.Window), markerKey: []byte(opts.Prefix + "instance")}, nil
}

// CheckAndInsert implements tls13.StrikeRegister: it sets the key in Redis
// if absent, to expire at expires, and reports whether it was absent.
// Within the startup window it returns (false, ErrStartupWindow); when
// Redis cannot be reached or answers oddly it returns (false, err).
func (r *Register) CheckAndInsert(key []byte, now, _, expires time.Time) (bool, error) {
	c, err := r.get()
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	quiet := now.Before(r.quietUntil)
	r.mu.Unlock()
	if quiet {
		r.put(c)
		return false, ErrStartupWindow
	}
	ttl := expires.Sub(now).Milliseconds()
	if ttl < 1 {
		ttl = 1
	}
	k := make([]byte, 0, len(r.opts.Prefix)+2*len(key))
	k = append(k, r.opts.Prefix...)
	k = hex.AppendEncode(k, key)
	rep, err := c.do(r.opts.Timeout, []byte("SET"), k, []byte("1"), []byte("NX"), []byte("PX"), strconv.AppendInt(nil, ttl, 10))
	if err != nil {
		c.close()
		return false, err
	}
	r.put(c)
	switch {
	case rep.kind == '+' && rep.str == "OK":
		return true, nil
	case rep.kind == '$' && rep.null:
		return false, nil
	case rep.kind == '-':
		return false, fmt.Errorf("redisreg: SET: %s", rep.str)
	}
	return false, protoErr("unexpected SET reply %q", rep.kind)
}

// Close closes the idle connections; later calls fail.
func (r *Register) Close() error {
	r.mu.Lock()
	idle := r.idle
	r.idle, r.closed = nil, true
	r.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
	return nil
}

func (r *Register) put(c *conn) {
	r.mu.Lock()
	if !r.closed && len(r.idle) < maxIdle {
		r.idle = append(r.idle, c)
		c = nil
	}
	r.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// get returns an idle connection or dials a new one. A new connection
// checks Redis' data generation: if Redis lost its data since we last
// looked (a restart without persistence, a flush), or never had our
// marker, the register refuses everything for one window from now.
func (r *Register) get() (*conn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errors.New("redisreg: register closed")
	}
	if n := len(r.idle); n > 0 {
		c := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		return c, nil
	}
	r.mu.Unlock()
	c, err := r.dial()
	if err != nil {
		return nil, err
	}
	if err := r.checkInstance(c); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

func (r *Register) dial() (*conn, error) {
	nc, err := net.DialTimeout("tcp", r.opts.Addr, r.opts.Timeout)
	if err != nil {
		return nil, fmt.Errorf("redisreg: %v", err)
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
	return c, nil
}

// checkInstance reads (creating if absent) the marker key that names the
// Redis data generation; a new or changed marker starts a quiet window.
func (r *Register) checkInstance(c *conn) error {
	var tok [16]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return fmt.Errorf("redisreg: %v", err)
	}
	mine := hex.EncodeToString(tok[:])
	rep, err := c.do(r.opts.Timeout, []byte("SET"), r.markerKey, []byte(mine), []byte("NX"))
	if err != nil {
		return err
	}
	if rep.kind == '-' {
		return fmt.Errorf("redisreg: SET marker: %s", rep.str)
	}
	created := rep.kind == '+' && rep.str == "OK"
	rep, err = c.do(r.opts.Timeout, []byte("GET"), r.markerKey)
	if err != nil {
		return err
	}
	if rep.kind != '$' || rep.null {
		return protoErr("unexpected GET reply for the marker")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if created || (r.instance != "" && r.instance != rep.str) {
		if until := r.opts.Now().Add(r.opts.Window); until.After(r.quietUntil) {
			r.quietUntil = until
		}
	}
	r.instance = rep.str
	return nil
}

// conn is one connection speaking RESP2.
type conn struct {
	nc  net.Conn
	br  *bufio.Reader
	buf []byte
}

func (c *conn) close() { c.nc.Close() }

// do sends one command and reads its reply within timeout.
func (c *conn) do(timeout time.Duration, args ...[]byte) (reply, error) {
	if err := c.nc.SetDeadline(time.Now().Add(timeout)); err != nil {
		return reply{}, fmt.Errorf("redisreg: %v", err)
	}
	c.buf = appendCommand(c.buf[:0], args...)
	if _, err := c.nc.Write(c.buf); err != nil {
		return reply{}, fmt.Errorf("redisreg: write: %v", err)
	}
	rep, err := readReply(c.br)
	if err != nil {
		if errors.Is(err, errProtocol) {
			return reply{}, err
		}
		return reply{}, fmt.Errorf("redisreg: read: %v", err)
	}
	return rep, nil
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
