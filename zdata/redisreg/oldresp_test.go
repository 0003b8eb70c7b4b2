package redisreg

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// The register's own RESP2 client until issue 28 (resp.go and the conn of
// register.go), kept for two uses only: the baseline of BenchmarkRegister
// (the old hot path, one EVALSHA of oldInsertScript per accepted flight on
// a pooled connection that read its run_id when dialled), and the tests'
// inspection of a redis-server (redisServer.raw), which must not depend on
// the client under test.

// oldInsertScript is the strike script as it was: the run_id is an
// argument (ARGV[5]), read by the connection when dialled.
const oldInsertScript = `
if redis.replicate_commands then redis.replicate_commands() end
local run = ARGV[5]
local m = redis.call('GET', KEYS[2])
if m then
  local since, mrun = string.match(m, '^since (%-?%d+) (%x+)$')
  if since and mrun == run then
    if tonumber(since) > tonumber(ARGV[1]) then return {2, since} end
    if redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then return {1} end
    return {0}
  end
  if string.match(m, '^pending %x+ (%x+)$') == run then return {3} end
end
redis.call('SET', KEYS[2], 'pending ' .. ARGV[3] .. ' ' .. run, 'PX', ARGV[4])
return {4}
`

var oldInsertSHA = func() string { s := sha1.Sum([]byte(oldInsertScript)); return hex.EncodeToString(s[:]) }()

// Limits on replies: this client only ever needs short ones, and a
// misbehaving peer must not make it allocate without bound.
const (
	maxLine  = 4096
	maxBulk  = 64 << 10
	maxArray = 1024
	maxDepth = 4
)

// reply is one RESP2 reply (Redis protocol specification: simple string
// '+', error '-', integer ':', bulk string '$', array '*').
type reply struct {
	kind  byte
	str   string // simple string, error text or bulk string
	num   int64
	null  bool // null bulk string or null array
	array []reply
}

// errProtocol marks replies that break RESP.
var errProtocol = errors.New("redisreg: protocol error")

func protoErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errProtocol}, args...)...)
}

// appendCommand encodes a command as a RESP array of bulk strings.
func appendCommand(b []byte, args ...[]byte) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// readLine reads one CRLF-terminated line without the CRLF.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxLine {
			return nil, protoErr("line longer than %d bytes", maxLine)
		}
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		break
	}
	if len(line) < 2 || line[len(line)-2] != '\r' {
		return nil, protoErr("line not ended by CRLF")
	}
	return line[:len(line)-2], nil
}

// parseInt parses a RESP integer: optional '-', decimal digits.
func parseInt(b []byte) (int64, error) {
	if len(b) == 0 || len(b) > 20 {
		return 0, protoErr("bad integer %q", b)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || (b[0] == '+') {
		return 0, protoErr("bad integer %q", b)
	}
	return n, nil
}

// readReply reads one reply.
func readReply(r *bufio.Reader) (reply, error) { return readDepth(r, 0) }

func readDepth(r *bufio.Reader, depth int) (reply, error) {
	line, err := readLine(r)
	if err != nil {
		return reply{}, err
	}
	if len(line) == 0 {
		return reply{}, protoErr("empty line")
	}
	kind, body := line[0], line[1:]
	switch kind {
	case '+', '-':
		return reply{kind: kind, str: string(body)}, nil
	case ':':
		n, err := parseInt(body)
		return reply{kind: kind, num: n}, err
	case '$':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		if n == -1 {
			return reply{kind: kind, null: true}, nil
		}
		if n < 0 || n > maxBulk {
			return reply{}, protoErr("bulk length %d", n)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return reply{}, err
		}
		if buf[n] != '\r' || buf[n+1] != '\n' {
			return reply{}, protoErr("bulk string not ended by CRLF")
		}
		return reply{kind: kind, str: string(buf[:n])}, nil
	case '*':
		n, err := parseInt(body)
		if err != nil {
			return reply{}, err
		}
		if n == -1 {
			return reply{kind: kind, null: true}, nil
		}
		if n < 0 || n > maxArray {
			return reply{}, protoErr("array length %d", n)
		}
		if depth >= maxDepth {
			return reply{}, protoErr("arrays nested deeper than %d", maxDepth)
		}
		arr := make([]reply, 0, n)
		for i := int64(0); i < n; i++ {
			e, err := readDepth(r, depth+1)
			if err != nil {
				return reply{}, err
			}
			arr = append(arr, e)
		}
		return reply{kind: kind, array: arr}, nil
	}
	return reply{}, protoErr("unknown reply type %q", kind)
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
	if v := oldInfoField(rep, "run_id"); v != "" && strings.Trim(v, "0123456789abcdefABCDEF") == "" {
		c.run = []byte(v)
		return nil
	}
	if rep.kind == '-' {
		return fmt.Errorf("redisreg: INFO server refused: %s", rep.str)
	}
	return protoErr("no run_id in INFO server")
}

// infoField is the value of field name in an INFO reply, "" if none.
func oldInfoField(rep reply, name string) string {
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

// quietRedis drops go-redis's own log lines in the tests' output.
type quietRedis struct{}

func (quietRedis) Printf(context.Context, string, ...any) {}

func init() { goredis.SetLogger(quietRedis{}) }
