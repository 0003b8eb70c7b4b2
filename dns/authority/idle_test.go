package authority

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
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

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
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

// idleClients are child processes holding idle connections.
type idleClients struct {
	cmds   []*exec.Cmd
	stdins []io.Closer
}

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
		cmd := exec.Command(os.Args[0], "-test.run=^TestIdleClientProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), "ZTLS_IDLE_CLIENT="+network, "ZTLS_IDLE_ADDR="+addr,
			"ZTLS_IDLE_N="+strconv.Itoa(share))
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
		ic.cmds = append(ic.cmds, cmd)
		ic.stdins = append(ic.stdins, in)
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

// stop ends the child processes: closing stdin tells them to close their
// connections and exit; one that does not is killed.
func (ic *idleClients) stop() {
	for _, in := range ic.stdins {
		in.Close()
	}
	for _, cmd := range ic.cmds {
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	ic.cmds, ic.stdins = nil, nil
}

// TestIdleClientProcess is the child of holdIdleConns; it does nothing
// in an ordinary test run.
func TestIdleClientProcess(t *testing.T) {
	network := os.Getenv("ZTLS_IDLE_CLIENT")
	if network == "" {
		t.Skip("the client process of the idle-connection tests")
	}
	n, _ := strconv.Atoi(os.Getenv("ZTLS_IDLE_N"))
	conns, err := openIdleConns(network, os.Getenv("ZTLS_IDLE_ADDR"), n)
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

// openIdleConns opens n connections, 32 at a time, each answered once.
func openIdleConns(network, addr string, n int) ([]net.Conn, error) {
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
				c, err := dialAndAsk(network, addr, uint16(i))
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
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
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
	ans, err := dnsstream.ReadFrame(c, make([]byte, dnsstream.MaxMessageSize))
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

// TestMeasureIdleDoTScale (ZTLS_SCALE_MEASURE=1) holds as many idle DoT
// connections as the 20 000 descriptors of one process allow, the
// clients in several child processes, and reports resident memory per
// connection and the latency of queries on other connections before and
// while they are held.
func TestMeasureIdleDoTScale(t *testing.T) {
	if os.Getenv("ZTLS_SCALE_MEASURE") == "" {
		t.Skip("set ZTLS_SCALE_MEASURE=1 (opens some 19 000 DoT connections)")
	}
	n := 19000
	if v, err := strconv.Atoi(os.Getenv("ZTLS_SCALE_CONNS")); err == nil && v > 0 {
		n = v
	}
	procs := 2
	s, a := idleServer(t, n)
	probe := func(what string) {
		lat := probeLatency(t, a.tls, 8, 3*time.Second)
		t.Logf("%s: %d DoT queries on 8 other connections: p50 %v p99 %v max %v", what, len(lat),
			lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
	}
	probe("no idle connections")
	before := settledMem()
	start := time.Now()
	clients := holdIdleConns(t, "tls", a.tls, n, procs)
	waitOpen(t, s, n)
	t.Logf("%d DoT connections opened in %v by %d client processes", n, time.Since(start).Round(time.Millisecond), procs)
	after := settledMem()
	t.Logf("server process: resident %d -> %d MB, Go heap+stacks %d -> %d MB: %d bytes resident, %d bytes heap+stacks per idle DoT connection",
		before.rss>>20, after.rss>>20, before.goBytes>>20, after.goBytes>>20,
		perConn(before.rss, after.rss, n), perConn(before.goBytes, after.goBytes, n))
	probe(fmt.Sprintf("%d idle DoT connections held", n))
	clients.stop()
}

// probeLatency asks queries one after another on conns DoT connections
// for d and returns their latencies, sorted.
func probeLatency(t testing.TB, addr string, conns int, d time.Duration) []time.Duration {
	var (
		mu  sync.Mutex
		lat []time.Duration
		wg  sync.WaitGroup
	)
	end := time.Now().Add(d)
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
			for id := uint16(1); time.Now().Before(end); id++ {
				t0 := time.Now()
				if err := askOn(c, id); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(t0))
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
