package authority

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsstream"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

// Memory per idle kept-open connection. The clients run in child
// processes (this test binary again, TestIdleClientProcess), so what the
// server process gains is the server's cost alone; kernel socket buffers
// are not in it (they are not resident memory of the process).

// maxIdleConnBytes is the bound per idle connection, TCP or DoT, on the
// server: resident memory and Go heap plus stacks. Before connections
// held no read buffer while idle it was some 75 KB (a 64 KB frame buffer
// and a 4 KB bufio.Reader each).
const maxIdleConnBytes = 30 << 10

// memUse is what the process holds: resident memory (VmRSS; 0 where
// /proc is missing) and the Go heap's live objects plus goroutine stacks.
type memUse struct{ rss, goBytes uint64 }

// settledMem collects garbage until stacks have shrunk (each cycle
// halves an oversized stack at most once), returns freed memory to the
// OS and reads the process's memory use.
func settledMem() memUse {
	for range 4 {
		runtime.GC()
	}
	debug.FreeOSMemory()
	samples := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/stacks:bytes"},
	}
	metrics.Read(samples)
	m := memUse{goBytes: samples[0].Value.Uint64() + samples[1].Value.Uint64()}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
				m.rss = kb << 10
			}
		}
	}
	return m
}

// perConn is the growth from before to after, per connection; negative
// growth (the runtime gave back more than n connections took) is 0.
func perConn(before, after uint64, n int) uint64 {
	if after <= before {
		return 0
	}
	return (after - before) / uint64(n)
}

// children are child processes of the test, told to end by closing
// their stdin.
type children struct {
	cmds   []*exec.Cmd
	stdins []io.WriteCloser
}

// stop closes the children's stdin and waits for them; one that does not
// end within 10 s is killed.
func (c *children) stop() {
	for _, in := range c.stdins {
		in.Close()
	}
	for _, cmd := range c.cmds {
		testproc.WaitOrKill(cmd, 10*time.Second)
	}
	c.cmds, c.stdins = nil, nil
}

// start runs this test binary's test named run as a child with env added
// to the environment; it returns the child's stdout.
func (c *children) start(t testing.TB, run string, env ...string) io.Reader {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+run+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.cmds, c.stdins = append(c.cmds, cmd), append(c.stdins, in)
	return out
}

// idleClients are child processes holding idle connections (closing
// their stdin tells them to close the connections and exit).
type idleClients struct{ children }

// holdIdleConns starts procs child processes that together open n
// connections (tcp or tls) to addr, send one query on each, read its
// answer and keep them open, idle, until stop. It returns once all are
// open.
func holdIdleConns(t testing.TB, network, addr string, n, procs int) *idleClients {
	t.Helper()
	ic := &idleClients{}
	t.Cleanup(ic.stop)
	var wg sync.WaitGroup
	errs := make(chan error, procs)
	for i := range procs {
		share := n / procs
		if i < n%procs {
			share++
		}
		// One source address per 20 000 connections: a loopback address
		// has some 28 000 ephemeral ports.
		out := ic.start(t, "TestIdleClientProcess", "ZTLS_IDLE_CLIENT="+network, "ZTLS_IDLE_ADDR="+addr,
			"ZTLS_IDLE_N="+strconv.Itoa(share), "ZTLS_IDLE_SRCS="+strconv.Itoa(1+n/20000))
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if line := sc.Text(); strings.HasPrefix(line, "idle-client ") {
					if line != "idle-client ready" {
						errs <- errors.New(line)
					}
					go io.Copy(io.Discard, out)
					return
				}
			}
			errs <- fmt.Errorf("client process ended before its connections were open")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return ic
}

// TestIdleClientProcess is the child of holdIdleConns; it does nothing
// in an ordinary test run.
func TestIdleClientProcess(t *testing.T) {
	network := os.Getenv("ZTLS_IDLE_CLIENT")
	if network == "" {
		t.Skip("the client process of the idle-connection tests")
	}
	n, _ := strconv.Atoi(os.Getenv("ZTLS_IDLE_N"))
	srcs, _ := strconv.Atoi(os.Getenv("ZTLS_IDLE_SRCS"))
	conns, err := openIdleConns(network, os.Getenv("ZTLS_IDLE_ADDR"), n, max(srcs, 1))
	if err != nil {
		fmt.Printf("idle-client error: %v\n", err)
		os.Exit(1)
	}
	fmt.Println("idle-client ready")
	io.Copy(io.Discard, os.Stdin) // until the parent closes it
	for _, c := range conns {
		c.Close()
	}
}

// openIdleConns opens n connections, 32 at a time, each answered once,
// from srcs loopback addresses in turn (127.0.0.1, .2, ...).
func openIdleConns(network, addr string, n, srcs int) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c, err := dialAndAskFrom(network, netip.AddrFrom4([4]byte{127, 0, 0, byte(1 + i%srcs)}), addr, uint16(i))
				mu.Lock()
				if err != nil && first == nil {
					first = fmt.Errorf("connection %d: %w", i, err)
				}
				conns[i] = c
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return conns, first
}

// dialAndAsk opens one connection and asks one question on it, as a
// resolver does before keeping the connection for later.
func dialAndAsk(network, addr string, id uint16) (net.Conn, error) {
	return dialAndAskFrom(network, netip.Addr{}, addr, id)
}

// dialAndAskFrom is dialAndAsk from the local address src (any when not
// valid).
func dialAndAskFrom(network string, src netip.Addr, addr string, id uint16) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if src.IsValid() {
		d.LocalAddr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0))
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	if network == "tls" {
		// The test server's certificate is not under test here.
		c = tls.Client(c, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS13})
	}
	if err := askOn(c, id); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// askOn sends one query on a stream connection and reads its answer.
func askOn(c net.Conn, id uint16) error {
	q := query("www.example.org.", dns.TypeA)
	q.Id = id
	raw, _ := q.Pack()
	frame, _ := dnsstream.AppendFrame(nil, raw)
	c.SetDeadline(time.Now().Add(20 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(frame); err != nil {
		return err
	}
	// The answer to one A question fits in 1 KB; a 64 KB buffer per
	// question would be most of what a reconnect costs in the benchmarks.
	var buf [1024]byte
	ans, err := dnsstream.ReadFrame(c, buf[:])
	if err != nil {
		return err
	}
	m := new(dns.Msg)
	if err := m.Unpack(ans); err != nil || m.Id != id || len(m.Answer) == 0 {
		return fmt.Errorf("bad answer %v (%v)", m, err)
	}
	return nil
}

// idleServer serves the test zone on loopback TCP and TLS with room for
// n connections from one address, none closed for idleness meanwhile.
func idleServer(t testing.TB, n int) (*Server, addrs) {
	s := testServer(t)
	s.MaxConns = n + 100
	s.MaxConnsPerAddr, s.MaxConnsPerPrefix = -1, -1
	s.IdleTimeout, s.FirstQueryTimeout = 10*time.Minute, 10*time.Minute
	s.AnswerCacheSize = 1000
	a, _ := startServer(t, s)
	return s, a
}

// TestIdleConnMemory holds 2 000 idle TCP connections, then 2 000 idle
// DoT connections served by crypto/tls, then 2 000 served by ztls's
// engine, open to an in-process server and bounds what each costs the
// server process.
func TestIdleConnMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 6 000 connections")
	}
	if raceEnabled {
		t.Skip("the race detector's shadow memory is most of the resident memory")
	}
	const n = 2000
	s, a := idleServer(t, n)
	for _, tc := range []struct{ name, network, addr string }{
		{"tcp", "tcp", a.tcp}, {"tls", "tls", a.tls}, {"tls-ztls-engine", "tls", a.ztls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Warm up: pools, the TLS session ticket keys, lazily built
			// tables.
			warm := holdIdleConns(t, tc.network, tc.addr, 20, 1)
			warm.stop()
			waitOpen(t, s, 0)
			before := settledMem()
			clients := holdIdleConns(t, tc.network, tc.addr, n, 1)
			waitOpen(t, s, n)
			after := settledMem()
			rss, goBytes := perConn(before.rss, after.rss, n), perConn(before.goBytes, after.goBytes, n)
			t.Logf("%d idle %s connections: %d bytes resident and %d bytes of Go heap and stacks each (server side)",
				n, tc.name, rss, goBytes)
			if rss > maxIdleConnBytes || goBytes > maxIdleConnBytes {
				t.Errorf("an idle %s connection costs %d bytes resident, %d bytes of heap and stacks; want at most %d",
					tc.name, rss, goBytes, maxIdleConnBytes)
			}
			clients.stop()
			waitOpen(t, s, 0)
		})
	}
}

// TestMeasureIdleDoTScale (ZTLS_SCALE_MEASURE=1) holds ZTLS_SCALE_CONNS
// idle DoT connections (50 000 by default), the clients in several child
// processes, and reports resident memory per connection and the latency
// of queries on other connections before and while they are held. One
// process may hold 20 000 descriptors here (a hard limit), so beyond
// 18 000 connections the server runs as several processes serving one
// port (SO_REUSEPORT, the kernel spreading connections over them, as a
// multi-process DNS server does), and the clients connect from several
// loopback addresses (127.0.0.2, .3, ...), one address's ephemeral ports
// being too few for 50 000 connections to one port.
func TestMeasureIdleDoTScale(t *testing.T) {
	if os.Getenv("ZTLS_SCALE_MEASURE") == "" {
		t.Skip("set ZTLS_SCALE_MEASURE=1 (opens 50 000 DoT connections)")
	}
	n := 50000
	if v, err := strconv.Atoi(os.Getenv("ZTLS_SCALE_CONNS")); err == nil && v > 0 {
		n = v
	}
	const perProc = 18000
	clientProcs := (n + perProc - 1) / perProc
	clientProcs = max(clientProcs, 2)
	var (
		addr    string
		servers *serverProcs
		s       *Server
	)
	if n <= perProc {
		var a addrs
		s, a = idleServer(t, n)
		addr = a.tls
	} else {
		servers = startServerProcs(t, (n+perProc-1)/perProc+1, n)
		addr = servers.addr
	}
	mem := func() memUse {
		if servers != nil {
			return servers.settled(t)
		}
		return settledMem()
	}
	probe := func(what string) {
		lat := probeLatency(t, addr, 8, 3*time.Second)
		t.Logf("%s: %d DoT queries on 8 other connections: p50 %v p99 %v max %v", what, len(lat),
			lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	}
	probe("no idle connections")
	before := mem()
	start := clock.Now()
	clients := holdIdleConns(t, "tls", addr, n, clientProcs)
	if s != nil {
		waitOpen(t, s, n)
	}
	where := "one server process"
	if servers != nil {
		where = fmt.Sprintf("%d server processes (%s connections each)", len(servers.cmds), servers.spread(t))
	}
	t.Logf("%d DoT connections opened in %v by %d client processes, held by %s", n,
		clock.Since(start).Round(time.Millisecond), clientProcs, where)
	after := mem()
	t.Logf("server: resident %d -> %d MB, Go heap+stacks %d -> %d MB: %d bytes resident, %d bytes heap+stacks per idle DoT connection",
		before.rss>>20, after.rss>>20, before.goBytes>>20, after.goBytes>>20,
		perConn(before.rss, after.rss, n), perConn(before.goBytes, after.goBytes, n))
	probe(fmt.Sprintf("%d idle DoT connections held", n))
	clients.stop()
}

// serverProcs are child processes (TestIdleServerProcess) serving DoT on
// one loopback port with SO_REUSEPORT.
type serverProcs struct {
	children
	addr  string
	lines []*bufio.Scanner
}

// startServerProcs starts k server processes with room for n connections
// in all.
func startServerProcs(t *testing.T, k, n int) *serverProcs {
	t.Helper()
	// A port free now; the children bind it together.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sp := &serverProcs{addr: l.Addr().String()}
	l.Close()
	t.Cleanup(sp.stop)
	for range k {
		out := sp.start(t, "TestIdleServerProcess", "ZTLS_IDLE_SERVER="+sp.addr, "ZTLS_IDLE_SERVER_MAX="+strconv.Itoa(n))
		sc := bufio.NewScanner(out)
		sp.lines = append(sp.lines, sc)
		if line := sp.reply(t, sc); line != "idle-server ready" {
			t.Fatalf("server process: %s", line)
		}
	}
	return sp
}

// reply is the next line a server process writes for the parent.
func (sp *serverProcs) reply(t *testing.T, sc *bufio.Scanner) string {
	t.Helper()
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "idle-server ") {
			return line
		}
	}
	t.Fatal("a server process ended")
	return ""
}

// ask sends cmd to every server process and returns the numbers of their
// answers ("idle-server mem RSS GOBYTES OPEN").
func (sp *serverProcs) ask(t *testing.T, cmd string) [][3]uint64 {
	t.Helper()
	var out [][3]uint64
	for i, in := range sp.stdins {
		fmt.Fprintln(in, cmd)
		var v [3]uint64
		line := sp.reply(t, sp.lines[i])
		if _, err := fmt.Sscanf(line, "idle-server mem %d %d %d", &v[0], &v[1], &v[2]); err != nil {
			t.Fatalf("server process: %q: %v", line, err)
		}
		out = append(out, v)
	}
	return out
}

// settled is the memory of all server processes, each settled.
func (sp *serverProcs) settled(t *testing.T) memUse {
	var m memUse
	for _, v := range sp.ask(t, "settle") {
		m.rss += v[0]
		m.goBytes += v[1]
	}
	return m
}

// spread is how many connections each server process holds.
func (sp *serverProcs) spread(t *testing.T) string {
	var parts []string
	for _, v := range sp.ask(t, "count") {
		parts = append(parts, strconv.FormatUint(v[2], 10))
	}
	return strings.Join(parts, ", ")
}

// TestIdleServerProcess is a child of startServerProcs; it does nothing
// in an ordinary test run. It serves DoT on ZTLS_IDLE_SERVER with
// SO_REUSEPORT and answers the parent's commands on stdin: "settle" (its
// memory, settled) and "count" (its memory as it is, and its open
// connections), until stdin closes.
func TestIdleServerProcess(t *testing.T) {
	addr := os.Getenv("ZTLS_IDLE_SERVER")
	if addr == "" {
		t.Skip("the server process of the idle-connection scale measurement")
	}
	n, _ := strconv.Atoi(os.Getenv("ZTLS_IDLE_SERVER_MAX"))
	s := testServer(t)
	s.MaxConns = n + 100
	s.MaxConnsPerAddr, s.MaxConnsPerPrefix = -1, -1
	s.IdleTimeout, s.FirstQueryTimeout = 10*time.Minute, 10*time.Minute
	s.AnswerCacheSize = 1000
	ln, err := (&net.ListenConfig{Control: setReusePort}).Listen(context.Background(), "tcp", addr)
	if err != nil {
		fmt.Printf("idle-server error: %v\n", err)
		os.Exit(1)
	}
	cert, _ := testCert(t)
	go s.ServeTLS(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	fmt.Println("idle-server ready")
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		m := memUse{}
		if sc.Text() == "settle" {
			m = settledMem()
		}
		fmt.Printf("idle-server mem %d %d %d\n", m.rss, m.goBytes, s.Stats().ConnsOpen)
	}
	s.Close()
}

// probeLatency asks queries one after another on conns DoT connections
// for d and returns their latencies, sorted.
func probeLatency(t testing.TB, addr string, conns int, d time.Duration) []time.Duration {
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	end := clock.Now().Add(d)
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialAndAsk("tls", addr, uint16(i))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for id := uint16(1); clock.Now().Before(end); id++ {
				t0 := clock.Now()
				if err := askOn(c, id); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, clock.Since(t0))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		t.Fatal("no query answered")
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return lat
}
