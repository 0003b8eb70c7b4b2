package redisreg

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/tls13"
)

// redisServer is a redis-server process on a loopback port.
type redisServer struct {
	addr  string
	cmd   *exec.Cmd
	done  chan struct{}
	dir   string   // its working directory (dump.rdb, a Cluster node's nodes.conf)
	extra []string // the caller's arguments, for a restart
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startRedis starts redis-server without persistence on port (0: a free
// one) and stops it when the test ends. It makes sure the server that
// answers is the one it started: other test processes pick free ports too,
// and one may take ours between freePort and redis-server's bind (then a
// free port is tried again; a fixed one fails the test).
func startRedis(t testing.TB, port int, extra ...string) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make deps)")
	}
	for try := 0; ; try++ {
		p := port
		if p == 0 {
			p = freePort(t)
		}
		s, out, err := launchRedis(t, p, extra...)
		if err == nil {
			return s
		}
		if port != 0 || try == 4 {
			t.Fatalf("redis-server on port %d: %v: %s", p, err, out)
		}
		t.Logf("redis-server on port %d: %v; trying another port", p, err)
	}
}

func launchRedis(t testing.TB, port int, extra ...string) (*redisServer, string, error) {
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--loglevel", "warning"}, extra...)
	s, out, err := launch(t, port, args, extra)
	if s != nil {
		s.extra = extra
		for i, a := range args {
			if a == "--dir" && i+1 < len(args) {
				s.dir = args[i+1] // the last one counts
			}
		}
	}
	return s, out, err
}

// launch runs redis-server with args (a Sentinel when they say so) and
// waits until the server on port is the one it started; extra are the
// caller's own arguments, searched for --requirepass.
func launch(t testing.TB, port int, args, extra []string) (*redisServer, string, error) {
	cmd := exec.Command("redis-server", args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with a killed test too
	var out testproc.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(s.done) }()
	t.Cleanup(s.stop)
	pid := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	pass := ""
	for i, a := range extra {
		if a == "--requirepass" && i+1 < len(extra) {
			pass = extra[i+1]
		}
	}
	deadline := ztlsclock.Now().Add(20 * time.Second)
	for {
		select {
		case <-s.done:
			return nil, out.String(), errors.New("exited")
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
			rc := &conn{nc: c, br: bufio.NewReader(c)}
			if pass != "" {
				rc.do(time.Second, []byte("AUTH"), []byte(pass))
			}
			rep, err := rc.do(time.Second, []byte("INFO"), []byte("server"))
			c.Close()
			if err == nil && rep.kind == '$' {
				if strings.Contains(rep.str, pid) {
					return s, "", nil
				}
				// Someone else's server holds the port; ours exits.
				s.stop()
				return nil, out.String(), errors.New("port taken by another process")
			}
		}
		if ztlsclock.Now().After(deadline) {
			s.stop()
			return nil, out.String(), errors.New("did not come up")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *redisServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Kill()
	<-s.done
}

// raw runs one command on a fresh connection (test inspection).
func (s *redisServer) raw(t testing.TB, args ...string) reply {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var bs [][]byte
	for _, a := range args {
		bs = append(bs, []byte(a))
	}
	rep, err := (&conn{nc: c, br: bufio.NewReader(c)}).do(2*time.Second, bs...)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// info is one field of an INFO section.
func (s *redisServer) info(t testing.TB, section, field string) string {
	t.Helper()
	for _, line := range strings.Split(s.raw(t, "INFO", section).str, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

func newReg(t *testing.T, addr string, clk *ztlsclock.Manual) *Register {
	t.Helper()
	r, err := New(Options{Addr: addr, Now: clk.Now, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// testRegisterFleet: two members on a new Redis (TestModes: on each
// mode): refused until ClientHellos that cannot predate it, then a key
// accepted once by either; entries live W + MaxClockSkew; scripts Redis
// forgot are sent again.
func testRegisterFleet(t *testing.T, e *redisEnv) {
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	a := e.newReg(t, clk, nil)
	b := e.newReg(t, clk, nil)
	key := bytes.Repeat([]byte{0xab}, 32)

	// A new Redis has no memory: refused until ClientHellos that could not
	// be accepted before it (notBefore after now + MaxClockSkew) arrive.
	now := clk.Now()
	if fresh, err := a.CheckAndInsert(key, now, now, now.Add(10*time.Second)); fresh || !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatalf("empty Redis: %v %v", fresh, err)
	}
	if fresh, err := b.CheckAndInsert(key, now, now.Add(DefaultMaxClockSkew-time.Millisecond), now.Add(10*time.Second)); fresh || !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatalf("just inside the skew bound: %v %v", fresh, err)
	}
	clk.Add(11 * time.Second)
	now = clk.Now()
	fresh, err := a.CheckAndInsert(key, now, now, now.Add(10*time.Second))
	if err != nil || !fresh {
		t.Fatalf("first insert: %v %v", fresh, err)
	}
	// The same ClientHello replayed to the same server or another one.
	for name, r := range map[string]*Register{"same server": a, "other server": b} {
		if fresh, err := r.CheckAndInsert(key, now, now, now.Add(10*time.Second)); fresh || err != nil {
			t.Fatalf("%s replay: fresh=%v err=%v", name, fresh, err)
		}
	}
	other := bytes.Repeat([]byte{0xcd}, 32)
	if fresh, err := b.CheckAndInsert(other, now, now, now.Add(10*time.Second)); !fresh || err != nil {
		t.Fatalf("second key: %v %v", fresh, err)
	}
	// The entry expires when the window does, plus the clock skew
	// (checked in Redis, not by waiting).
	entry, _ := testKeys(string(key))
	rep := e.ownerOf(t, entry).raw(t, "PTTL", entry)
	if rep.kind != ':' || rep.num <= 10000 || rep.num > 10000+DefaultMaxClockSkew.Milliseconds() {
		t.Fatalf("PTTL = %+v, want 10001..11000 ms", rep)
	}
	// An already-expired entry still gets a positive expiry.
	k3 := []byte("k3")
	if fresh, err := a.CheckAndInsert(k3, now, now, now.Add(-time.Second)); !fresh || err != nil {
		t.Fatalf("past expiry: %v %v", fresh, err)
	}
	// Redis forgot the scripts (SCRIPT FLUSH, or a restart): sent again.
	for _, s := range e.primaries(t) {
		s.raw(t, "SCRIPT", "FLUSH")
	}
	if fresh, err := b.CheckAndInsert([]byte("k4"), now, now, now.Add(time.Second)); !fresh || err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v %v", fresh, err)
	}
}

// testRegisterConcurrent: three members race on the same keys (TestModes:
// on each mode); each key is accepted exactly once.
func testRegisterConcurrent(t *testing.T, e *redisEnv) {
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	regs := []*Register{e.newReg(t, clk, nil), e.newReg(t, clk, nil), e.newReg(t, clk, nil)}
	for _, r := range regs {
		warm(t, r, clk)
	}
	clk.Add(time.Minute)
	now := clk.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := map[int]int{}
	for g := 0; g < 12; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				fresh, err := regs[g%3].CheckAndInsert([]byte{byte(k)}, now, now, now.Add(time.Minute))
				if err != nil {
					t.Error(err)
					return
				}
				if fresh {
					mu.Lock()
					wins[k]++
					mu.Unlock()
				}
			}
		}(g)
	}
	wg.Wait()
	for k := 0; k < 50; k++ {
		if wins[k] != 1 {
			t.Fatalf("key %d accepted %d times", k, wins[k])
		}
	}
}

func TestRegisterFailsClosed(t *testing.T) {
	s := startRedis(t, 0)
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	r := newReg(t, s.addr, clk)
	warm(t, r, clk)
	clk.Add(time.Minute)
	now := clk.Now()
	if fresh, err := r.CheckAndInsert([]byte("a"), now, now, now.Add(time.Second)); !fresh || err != nil {
		t.Fatalf("up: %v %v", fresh, err)
	}
	port := s.cmd.Args[2]
	s.stop()
	// Redis down: every call is an error, never fresh.
	for i := 0; i < 3; i++ {
		if fresh, err := r.CheckAndInsert([]byte("b"), now, now, now.Add(time.Second)); fresh || err == nil {
			t.Fatalf("Redis down, call %d: fresh=%v err=%v", i, fresh, err)
		}
	}
	// Redis back without its data: what may predate the loss is refused,
	// what cannot is fresh.
	p, _ := strconv.Atoi(port)
	startRedis(t, p)
	fresh, err := r.CheckAndInsert([]byte("a"), now, now, now.Add(time.Second))
	if fresh || !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatalf("after a Redis restart: fresh=%v err=%v", fresh, err)
	}
	nb := clk.Now().Add(DefaultMaxClockSkew)
	clk.Add(11 * time.Second)
	now = clk.Now()
	if fresh, err := r.CheckAndInsert([]byte("a"), now, nb, now.Add(time.Second)); !fresh || err != nil {
		t.Fatalf("made after the loss: %v %v", fresh, err)
	}

	// Nobody listening.
	dead, err := New(Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if fresh, err := dead.CheckAndInsert([]byte("x"), now.Add(time.Hour), now.Add(time.Hour), now.Add(time.Hour)); fresh || err == nil {
		t.Fatalf("no server: %v %v", fresh, err)
	}
	r.Close()
	if fresh, err := r.CheckAndInsert([]byte("y"), now, now, now); fresh || err == nil {
		t.Fatal("closed register answered")
	}
}

// fakeServer accepts connections and answers each with handle.
func fakeServer(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); handle(c) }()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

func TestRegisterBadServers(t *testing.T) {
	silent := fakeServer(t, func(c net.Conn) {
		buf := make([]byte, 1024)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	})
	garbage := fakeServer(t, func(c net.Conn) {
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n"))
		c.Close()
	})
	errs := fakeServer(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, err := br.ReadString('\n'); err != nil {
				return
			}
			c.Write([]byte("-ERR nope\r\n"))
		}
	})
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	for name, addr := range map[string]string{"silent": silent, "garbage": garbage, "errors": errs} {
		r, err := New(Options{Addr: addr, Timeout: 200 * time.Millisecond, Now: clk.Now})
		if err != nil {
			t.Fatal(err)
		}
		now := clk.Now().Add(time.Hour)
		fresh, err := r.CheckAndInsert([]byte("k"), now, now, now.Add(time.Second))
		if fresh || err == nil {
			t.Errorf("%s: fresh=%v err=%v", name, fresh, err)
		}
		r.Close()
	}
	if _, err := New(Options{}); err == nil {
		t.Error("New without an address")
	}
	if _, err := New(Options{Addr: "nohostport"}); err == nil {
		t.Error("New with a bad address")
	}
	if _, err := New(Options{Addr: "127.0.0.1:1", MaxClockSkew: -time.Second}); err == nil {
		t.Error("New with a negative clock skew")
	}
}

func TestRegisterAuth(t *testing.T) {
	s := startRedis(t, 0, "--requirepass", "s3cret")
	clk := ztlsclock.NewManual(time.Unix(1_800_000_000, 0))
	good, _ := New(Options{Addr: s.addr, Password: "s3cret", DB: 1, Now: clk.Now})
	bad, _ := New(Options{Addr: s.addr, Password: "wrong", Now: clk.Now})
	none, _ := New(Options{Addr: s.addr, Now: clk.Now})
	t.Cleanup(func() { good.Close(); bad.Close(); none.Close() })
	warm(t, good, clk)
	clk.Add(time.Minute)
	now := clk.Now()
	if fresh, err := good.CheckAndInsert([]byte("k"), now, now, now.Add(time.Second)); !fresh || err != nil {
		t.Fatalf("with the password: %v %v", fresh, err)
	}
	for name, r := range map[string]*Register{"wrong password": bad, "no password": none} {
		fresh, err := r.CheckAndInsert([]byte("k2"), now, now, now.Add(time.Second))
		if fresh || err == nil {
			t.Fatalf("%s: %v %v", name, fresh, err)
		}
		if bytes.Contains([]byte(err.Error()), []byte("wrong")) && name == "wrong password" {
			t.Fatalf("error leaks the password: %v", err)
		}
	}
}

// warm makes the register's first call, which finds a Redis without
// memory, records since when it has some (now), and is refused.
func warm(t *testing.T, r *Register, clk *ztlsclock.Manual) {
	t.Helper()
	now := clk.Now()
	if fresh, err := r.CheckAndInsert([]byte("warm-up"), now, now.Add(-10*time.Second), now.Add(10*time.Second)); fresh || !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatalf("warm-up: fresh=%v err=%v, want ErrRegisterTooYoung", fresh, err)
	}
}

// BenchmarkCheckAndInsert is one strike-register round trip to a local
// Redis: the cost a fleet server adds to each accepted early-data handshake.
func BenchmarkCheckAndInsert(b *testing.B) {
	s := startRedis(b, 0)
	r, err := New(Options{Addr: s.addr, Now: func() time.Time { return ztlsclock.Now().Add(-time.Hour) }})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	now := ztlsclock.Now()
	r.CheckAndInsert([]byte("warm"), now, now, now.Add(time.Second))
	var key [8]byte
	i := uint64(0)
	for b.Loop() {
		i++
		for j := range key {
			key[j] = byte(i >> (8 * j))
		}
		if fresh, err := r.CheckAndInsert(key[:], now, now, now.Add(10*time.Second)); err != nil || !fresh {
			b.Fatalf("%v %v", fresh, err)
		}
	}
}
