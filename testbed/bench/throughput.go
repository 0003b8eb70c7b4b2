package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ztls-project/ztls/internal/turbohook"
	"github.com/ztls-project/ztls/testbed/hosts"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// Server handshake throughput (issue 6): TLS 1.3 over TCP against
// TurboTLS, on the testbed, with a server whose handshakes are run by a
// fixed pool of blocking workers, as the TurboTLS paper measured.
//
// Two hosts, client and server, are joined by an emulated link of the
// given RTT, so the kernel's TCP handshake (SYN, SYN-ACK, ACK) and the
// UDP datagrams pay the delay. The server is one turbo.TLSServer on one
// port (TCP and UDP): a TCP connection opening with a link record
// continues the handshake its UDP flight began, any other is plain TLS
// 1.3. A worker holds a TCP connection from the moment it takes it off the
// queue (which it joins when its first bytes are in) to the end of its
// handshake (the client's Finished verified); TurboTLS's UDP flights are computed by the same workers
// (internal/turbohook's Exec), queued in arrival order with the connections. When
// its handshake is done the worker sends one byte and closes: the client's
// handshake counts when that byte arrives, so a handshake is complete on
// both sides.
//
// The clients run in this process with their sockets in the client
// namespace (hosts.Host.DialContext for TCP; TurboTLS's UDP socket is made
// inside hosts.Host.Do): Concurrency of them, each opening one handshake
// after the other, new connection, no resumption, until the mode's count
// is reached. The modes alternate round by round (tls, turbo, then turbo,
// tls, ...). With Realtime the process runs just below the relay's
// real-time priority, like Run.

// ThroughputConfig describes one throughput measurement. Zero fields take
// the documented defaults.
type ThroughputConfig struct {
	// RTT is the client–server round trip; 0 means 40 ms.
	RTT time.Duration
	// Workers is the server's fixed pool; 0 means 4.
	Workers int
	// Concurrency is the number of clients with a handshake in progress;
	// 0 means 64.
	Concurrency int
	// Handshakes is how many handshakes each mode completes; 0 means 400.
	Handshakes int
	// Rounds splits each mode's handshakes into this many alternating
	// rounds; 0 means 2.
	Rounds int
	// TurboWait is how long a TurboTLS client waits for the UDP flight
	// after TCP connected before falling back to TLS over TCP; 0 means
	// the client's default (half the TCP connect time, at least 2 ms).
	TurboWait time.Duration
	// Progress receives a line per round and one per second; nil: silent.
	Progress io.Writer
	// UDPReadBuffer is the receive buffer of the server's UDP socket in
	// bytes; 0 means 4 MiB, -1 the kernel's default (about 208 KiB here).
	// 64 clients starting together send 256 request datagrams at once,
	// more than the default holds: the losses make flights miss the
	// clients' wait (see docs/testbed.md).
	UDPReadBuffer int
	// TCPCongestion is the hosts' TCP congestion control (Config.TCPCongestion).
	TCPCongestion string
	// Realtime runs this process (server and clients) at SCHED_FIFO
	// priority 40, just below the relay, as Run does: other load on the
	// machine then delays neither the server's workers nor the clients.
	Realtime bool
}

// Throughput modes.
const (
	ModeTLS   = "tls"
	ModeTurbo = "turbo"
)

// ThroughputReport is the outcome of MeasureThroughput.
type ThroughputReport struct {
	RTTms       float64 `json:"rtt_ms"`
	Realtime    bool    `json:"realtime"`
	Workers     int     `json:"workers"`
	Concurrency int     `json:"concurrency"`
	Handshakes  int     `json:"handshakes_per_mode"`
	Rounds      int     `json:"rounds"`
	// UDPReadBuffer is the server UDP socket's receive buffer as the
	// kernel reports it (0: unknown).
	UDPReadBuffer int `json:"server_udp_read_buffer"`
	// TurboWaitMs is the configured wait (0: the client's default).
	TurboWaitMs float64            `json:"turbo_wait_ms"`
	Results     []ThroughputResult `json:"results"`
	// Ratio is turbo's steady handshakes per second over tls's;
	// RatioWhole the same with whole rounds (fill and drain included).
	Ratio      float64 `json:"turbo_over_tls"`
	RatioWhole float64 `json:"turbo_over_tls_whole_rounds"`
	// The emulator's check: median TCP connect time client → server.
	ConnectMedianMs float64 `json:"tcp_connect_median_ms"`
	CompensationUs  float64 `json:"emulator_compensation_us"`
	TCPCongestion   string  `json:"tcp_congestion_control"`
	// UDP counts the TurboTLS server's UDP side over the whole run.
	UDP ThroughputUDP `json:"turbo_udp"`
	// UDPRcvbufErrors counts datagrams the kernels dropped because a UDP
	// socket's receive buffer was full, on the server and the client host
	// (-1: unknown), over the whole run.
	ServerUDPRcvbufErrors int64 `json:"server_udp_rcvbuf_errors"`
	ClientUDPRcvbufErrors int64 `json:"client_udp_rcvbuf_errors"`
	// PeakBusyWorkers is the most workers busy at once (at most Workers).
	PeakBusyWorkers int `json:"peak_busy_workers"`
	// CPUs is the number of CPUs this process could run on.
	CPUs int `json:"cpus"`
}

// ThroughputUDP is a summary of turbo.Stats.
type ThroughputUDP struct {
	Linked       int64 `json:"linked"`
	Expired      int64 `json:"expired"`
	FlightErrors int64 `json:"flight_errors"`
	Dropped      int64 `json:"dropped"`
	PeakEntries  int   `json:"peak_entries"`
}

// ThroughputResult is one mode's figures over all its rounds.
type ThroughputResult struct {
	Mode string `json:"mode"`
	// Handshakes completed (Turbo of them over UDP, the rest fell back),
	// and Errors (handshakes that failed; not counted as completed).
	Handshakes int `json:"handshakes"`
	Turbo      int `json:"turbo"`
	Errors     int `json:"errors"`
	// Seconds is the wall time of the mode's rounds; PerSecond is
	// Handshakes / Seconds, the pipeline's fill at the start of a round
	// and its drain at the end included. Steady is the rate between the
	// completions of the 10th and the 90th percentile of each round (fill
	// and drain left out; the headline figure).
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"handshakes_per_s"`
	Steady    float64 `json:"steady_handshakes_per_s"`
	// Latency: from the start of the client's dial to the server's byte
	// after its handshake.
	Latency Summary `json:"latency_ms"`
	// Server side: time a TCP connection waited for a worker after the
	// kernel accepted it, and how long a worker held it (to the end of
	// the handshake); for turbo, the same for the UDP flights.
	TCPQueue  Summary `json:"tcp_queue_ms"`
	TCPHold   Summary `json:"tcp_hold_ms"`
	UDPQueue  Summary `json:"udp_queue_ms"`
	UDPHold   Summary `json:"udp_hold_ms"`
	UDPFlight int     `json:"udp_flights"`
	TCPConns  int     `json:"tcp_connections"`
	// CPUms is the CPU time of this process (clients and server; the
	// relay is a process of its own) per completed handshake.
	CPUms  float64           `json:"cpu_ms_per_handshake"`
	Rounds []ThroughputRound `json:"rounds"`
	// Samples are the raw latencies.
	Samples []time.Duration `json:"-"`
}

// ThroughputRound is one round of one mode.
type ThroughputRound struct {
	Handshakes int     `json:"handshakes"`
	Seconds    float64 `json:"seconds"`
	PerSecond  float64 `json:"handshakes_per_s"`
	Steady     float64 `json:"steady_handshakes_per_s"`
}

func (cfg *ThroughputConfig) fill() error {
	if cfg.RTT == 0 {
		cfg.RTT = 40 * time.Millisecond
	}
	if cfg.Workers == 0 {
		cfg.Workers = 4
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = 64
	}
	if cfg.Handshakes == 0 {
		cfg.Handshakes = 400
	}
	if cfg.Rounds == 0 {
		cfg.Rounds = 2
	}
	if cfg.UDPReadBuffer == 0 {
		cfg.UDPReadBuffer = 4 << 20
	}
	switch {
	case cfg.RTT < 0 || cfg.RTT > 2*time.Second:
		return fmt.Errorf("bench: RTT %v out of range (0, 2s]", cfg.RTT)
	case cfg.Workers < 1 || cfg.Workers > 1024:
		return fmt.Errorf("bench: workers %d out of range 1 to 1024", cfg.Workers)
	case cfg.Concurrency < 1 || cfg.Concurrency > 1024:
		return fmt.Errorf("bench: concurrency %d out of range 1 to 1024", cfg.Concurrency)
	case cfg.Handshakes < 1 || cfg.Handshakes > 1_000_000:
		return fmt.Errorf("bench: handshakes %d out of range 1 to 1000000", cfg.Handshakes)
	case cfg.Rounds < 1 || cfg.Rounds > cfg.Handshakes:
		return fmt.Errorf("bench: rounds %d out of range 1 to the handshake count", cfg.Rounds)
	case cfg.UDPReadBuffer < -1 || cfg.UDPReadBuffer > 1<<30:
		return fmt.Errorf("bench: UDP read buffer %d out of range (-1, or up to 1 GiB)", cfg.UDPReadBuffer)
	case cfg.TurboWait < 0 || cfg.TurboWait > time.Minute:
		return fmt.Errorf("bench: TurboTLS wait %v out of range [0, 1m]", cfg.TurboWait)
	}
	return nil
}

// MeasureThroughput builds a client and a server host joined by a link of
// cfg.RTT, starts the pooled server and measures both modes, alternated.
// Everything it creates is removed before it returns. It needs what
// hosts.New needs (root, /dev/net/tun, ip).
func MeasureThroughput(ctx context.Context, cfg ThroughputConfig) (*ThroughputReport, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Realtime {
		if err := hosts.SetProcessRealtime(40); err != nil {
			fmt.Fprintf(progress, "bench: measuring at normal priority: %v\n", err)
		} else {
			defer hosts.SetProcessRealtime(0)
		}
	}
	n, err := hosts.New(hosts.Options{Hosts: []string{"client", "server"}, Calibrate: true, TCPCongestion: cfg.TCPCongestion})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	if w := n.Relay().Warning; w != "" {
		fmt.Fprintln(progress, w)
	}
	client, server := n.Host("client"), n.Host("server")
	if err := n.SetRTT(client, server, cfg.RTT, 0); err != nil {
		return nil, err
	}
	ct, err := hosts.ConnectTimes(ctx, client, server, 15)
	if err != nil {
		return nil, err
	}
	rep := &ThroughputReport{
		RTTms: ms(cfg.RTT), Realtime: cfg.Realtime, Workers: cfg.Workers, Concurrency: cfg.Concurrency, Handshakes: cfg.Handshakes,
		Rounds: cfg.Rounds, TurboWaitMs: ms(cfg.TurboWait), ConnectMedianMs: round(ms(hosts.Median(ct))),
		CompensationUs: float64(n.Compensation()) / float64(time.Microsecond), CPUs: runtime.NumCPU(),
		TCPCongestion: n.TCPCongestion(),
	}
	fmt.Fprintf(progress, "throughput: rtt %v, emulator check: TCP connect median %.3f ms; %d workers, %d concurrent clients, %d handshakes per mode in %d rounds\n",
		cfg.RTT, rep.ConnectMedianMs, cfg.Workers, cfg.Concurrency, cfg.Handshakes, cfg.Rounds)

	if err := runThroughput(ctx, cfg, progress, client, server, netip.AddrPortFrom(server.Addr, 4430), rep); err != nil {
		return nil, err
	}
	rep.ServerUDPRcvbufErrors, rep.ClientUDPRcvbufErrors = udpRcvbufErrors(server), udpRcvbufErrors(client)
	if rs, err := n.Relay().Stats(); err == nil {
		fmt.Fprintf(progress, "emulator: %d packets, mean %.1f µs late, %d over 1 ms late\n", rs.Late.Packets, float64(rs.Late.MeanNs)/1e3, rs.Late.Over1m)
	}
	return rep, nil
}

// runThroughput starts the pooled server on server (nil: this namespace)
// at addr (port 0: any) and runs the rounds from client (nil: this
// namespace), filling rep.
func runThroughput(ctx context.Context, cfg ThroughputConfig, progress io.Writer, client, server *hosts.Host, addr netip.AddrPort, rep *ThroughputReport) error {
	dir, err := os.MkdirTemp("", "ztls-throughput-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := makePKI(dir, ServerName, "")
	if err != nil {
		return err
	}
	cert, err := serverCert(ServerConfig{Cert: p.cert})
	if err != nil {
		return err
	}
	srv, err := startPooledServer(server, addr, cert, cfg.Workers, cfg.Concurrency, 10*time.Second+20*cfg.RTT, cfg.UDPReadBuffer)
	if err != nil {
		return err
	}
	rep.UDPReadBuffer = srv.udpBuf
	defer srv.Close()

	cl := &throughputClient{
		host: client, addr: srv.addr, wait: cfg.TurboWait, timeout: 30*time.Second + 20*cfg.RTT,
		tls: &tls13.Config{RootCAs: p.pool, ServerName: ServerName, Groups: []tls13.CurveID{tls13.X25519}, SessionTicketsDisabled: true},
	}
	results := map[string]*ThroughputResult{ModeTLS: {Mode: ModeTLS}, ModeTurbo: {Mode: ModeTurbo}}
	cpuTotal := map[string]time.Duration{}
	steadyN, steadySpan := map[string]int{}, map[string]time.Duration{}
	for r := 0; r < cfg.Rounds; r++ {
		// Each mode's share of this round; the first rounds take the rest.
		k := cfg.Handshakes / cfg.Rounds
		if r < cfg.Handshakes%cfg.Rounds {
			k++
		}
		order := []string{ModeTLS, ModeTurbo}
		if r%2 == 1 {
			order = []string{ModeTurbo, ModeTLS}
		}
		for _, mode := range order {
			srv.rec.reset()
			cpu0 := cpuTime()
			rr, err := cl.round(ctx, mode, k, cfg.Concurrency, progress, fmt.Sprintf("round %d/%d %-5s", r+1, cfg.Rounds, mode))
			if err != nil {
				return err
			}
			cpuTotal[mode] += cpuTime() - cpu0
			res := results[mode]
			res.Handshakes += rr.ok
			res.Turbo += rr.turbo
			res.Errors += rr.errors
			res.Seconds += rr.wall.Seconds()
			res.Samples = append(res.Samples, rr.latencies...)
			srv.rec.appendTo(res)
			mid, span := rr.steady()
			steadyN[mode] += mid
			steadySpan[mode] += span
			rnd := ThroughputRound{Handshakes: rr.ok, Seconds: round(rr.wall.Seconds()), PerSecond: round(float64(rr.ok) / rr.wall.Seconds())}
			if span > 0 {
				rnd.Steady = round(float64(mid) / span.Seconds())
			}
			res.Rounds = append(res.Rounds, rnd)
			fmt.Fprintf(progress, "round %d/%d %-5s %d handshakes (%d errors, %d over UDP) in %.2f s: %.1f handshakes/s (steady %.1f), latency median %.1f ms\n",
				r+1, cfg.Rounds, mode, rr.ok, rr.errors, rr.turbo, rr.wall.Seconds(), rnd.PerSecond, rnd.Steady, Summarize(rr.latencies).Median)
		}
	}
	for _, mode := range []string{ModeTLS, ModeTurbo} {
		res := results[mode]
		res.Seconds = round(res.Seconds)
		if res.Seconds > 0 {
			res.PerSecond = round(float64(res.Handshakes) / res.Seconds)
		}
		if steadySpan[mode] > 0 {
			res.Steady = round(float64(steadyN[mode]) / steadySpan[mode].Seconds())
		}
		if res.Handshakes > 0 {
			res.CPUms = round(ms(cpuTotal[mode]) / float64(res.Handshakes))
		}
		res.Latency = Summarize(res.Samples)
		srv.rec.summarize(res)
		rep.Results = append(rep.Results, *res)
	}
	if t := results[ModeTLS].Steady; t > 0 {
		rep.Ratio = round(results[ModeTurbo].Steady / t)
	}
	if t := results[ModeTLS].PerSecond; t > 0 {
		rep.RatioWhole = round(results[ModeTurbo].PerSecond / t)
	}
	st := srv.turbo.Stats()
	rep.PeakBusyWorkers = int(srv.peakBusy.Load())
	rep.UDP = ThroughputUDP{Linked: st.Linked, Expired: st.Expired, FlightErrors: st.FlightErrors, Dropped: st.Dropped, PeakEntries: st.PeakEntries}
	return nil
}

// roundResult is one mode's round seen by the clients.
type roundResult struct {
	ok, turbo, errors int
	wall              time.Duration
	latencies         []time.Duration
	completions       []time.Duration // since the round's start, in order
	firstErr          error
}

// steady returns how many handshakes completed after the 10th percentile
// completion up to the 90th, and the time between the two.
func (rr *roundResult) steady() (int, time.Duration) {
	n := len(rr.completions)
	lo, hi := n/10, n-1-n/10
	if hi <= lo {
		return 0, 0
	}
	return hi - lo, rr.completions[hi] - rr.completions[lo]
}

// throughputClient opens handshakes from the client host.
type throughputClient struct {
	host    *hosts.Host
	addr    netip.AddrPort
	tls     *tls13.Config
	wait    time.Duration
	timeout time.Duration
}

// dialTCP connects from the client host (nil host: this namespace).
func (c *throughputClient) dialTCP(ctx context.Context, a netip.AddrPort) (net.Conn, error) {
	if c.host == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", a.String())
	}
	return c.host.DialContext(ctx, "tcp", a.String())
}

// do runs fn with its sockets in the client host's namespace.
func (c *throughputClient) do(fn func() error) error {
	if c.host == nil {
		return fn()
	}
	return c.host.Do(fn)
}

// round runs k handshakes of mode with conc clients at a time.
func (c *throughputClient) round(ctx context.Context, mode string, k, conc int, progress io.Writer, label string) (*roundResult, error) {
	var next, done atomic.Int64
	var mu sync.Mutex
	rr := &roundResult{}
	var wg sync.WaitGroup
	stopTicker := make(chan struct{})
	tickerDone := make(chan struct{})
	go func() {
		defer close(tickerDone)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stopTicker:
				return
			case <-t.C:
				fmt.Fprintf(progress, "%s %d/%d\n", label, done.Load(), k)
			}
		}
	}()
	start := time.Now()
	for i := 0; i < min(conc, k); i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(k) && ctx.Err() == nil {
				lat, viaUDP, err := c.handshake(ctx, mode)
				done.Add(1)
				mu.Lock()
				if err != nil {
					rr.errors++
					if rr.firstErr == nil {
						rr.firstErr = err
					}
				} else {
					rr.ok++
					rr.latencies = append(rr.latencies, lat)
					rr.completions = append(rr.completions, time.Since(start))
					if viaUDP {
						rr.turbo++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rr.wall = time.Since(start)
	close(stopTicker)
	<-tickerDone
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if rr.ok == 0 {
		return nil, fmt.Errorf("bench: throughput: no %s handshake completed: %w", mode, rr.firstErr)
	}
	if rr.errors > 0 {
		fmt.Fprintf(progress, "%s: %d handshakes failed, the first: %v\n", label, rr.errors, rr.firstErr)
	}
	return rr, nil
}

// handshake opens one connection in mode and waits for the server's byte
// after its handshake. viaUDP: TurboTLS's flight came over UDP.
func (c *throughputClient) handshake(ctx context.Context, mode string) (time.Duration, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	var conn *tls13.Conn
	viaUDP := false
	switch mode {
	case ModeTLS:
		raw, err := c.dialTCP(ctx, c.addr)
		if err != nil {
			return 0, false, fmt.Errorf("bench: tls: %w", err)
		}
		conn = tls13.Client(raw, c.tls)
		if err := conn.HandshakeContext(ctx); err != nil {
			raw.Close()
			return 0, false, fmt.Errorf("bench: tls: %w", err)
		}
	case ModeTurbo:
		var res *turbo.ClientResult
		// The UDP socket is made by turbo.Dial in the calling goroutine:
		// Do puts that goroutine's thread in the client namespace. TCP
		// is dialled there too, through DialTCP.
		err := c.do(func() (err error) {
			res, err = turbo.Dial(ctx, c.addr, c.addr, &turbo.ClientConfig{TLS: c.tls, Wait: c.wait, DialTCP: c.dialTCP})
			return err
		})
		if err != nil {
			return 0, false, fmt.Errorf("bench: turbo: %w", err)
		}
		conn, viaUDP = res.Conn, res.Turbo
	default:
		return 0, false, fmt.Errorf("bench: unknown throughput mode %q", mode)
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return 0, false, fmt.Errorf("bench: %s: waiting for the server's handshake: %w", mode, err)
	}
	return time.Since(start), viaUDP, nil
}

// pooledServer is a turbo.TLSServer whose TCP connections and UDP flights
// are all served by a fixed pool of workers, first come first served.
//
// A connection joins the queue when its first bytes are in (a link record
// or a ClientHello), as an event-driven server hands a socket to a worker
// when it is readable. Queued at accept, it could set a trap for TurboTLS:
// a worker that takes a connection before that connection's UDP flight was
// computed waits for a link record that cannot come (the client sends it
// after the flight) while the flight waits for a worker; with every worker
// caught so, the clients' waits run out and they fall back to TLS over
// TCP. The client's datagrams normally reach the server half an RTT before
// the ACK that makes the connection acceptable, but on loopback both
// arrive together, and on a loaded machine the client may send its
// datagrams late: both happened in the tests.
type pooledServer struct {
	addr     netip.AddrPort // TCP and UDP
	udpBuf   int            // the UDP socket's receive buffer (0: unknown)
	ln       net.Listener
	turbo    *turbo.TLSServer
	jobs     chan poolJob
	workers  sync.WaitGroup
	acceptor sync.WaitGroup
	readers  sync.WaitGroup // connections waiting for their first bytes
	udp      sync.WaitGroup
	rec      *poolRecorder
	timeout  time.Duration
	// busy counts workers running a job; peakBusy is its maximum.
	busy, peakBusy atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]bool
}

// poolJob is a connection or a flight waiting for a worker.
type poolJob struct {
	queued time.Time
	run    func(started time.Time)
}

var errPoolClosed = errors.New("bench: the worker pool is closed")

func startPooledServer(h *hosts.Host, addr netip.AddrPort, cert tls13.Certificate, workers, clients int, timeout time.Duration, udpBuf int) (*pooledServer, error) {
	listen, listenPacket := net.Listen, net.ListenPacket
	if h != nil {
		listen, listenPacket = h.Listen, h.ListenPacket
	}
	ln, err := listen("tcp", addr.String())
	if err != nil {
		return nil, err
	}
	if addr.Port() == 0 { // tests: the UDP port follows the TCP one
		addr = netip.MustParseAddrPort(ln.Addr().String())
	}
	pc, err := listenPacket("udp", addr.String())
	if err != nil {
		ln.Close()
		return nil, err
	}
	got, err := setReadBuffer(pc, udpBuf)
	if err != nil {
		ln.Close()
		pc.Close()
		return nil, err
	}
	s := &pooledServer{addr: addr, udpBuf: got, ln: ln, jobs: make(chan poolJob, 1<<14), rec: &poolRecorder{}, timeout: timeout, conns: map[net.Conn]bool{}}
	tc := engineServerConfig(cert, nil)
	tc.SessionTicketsDisabled = true // handshakes only: no ticket after each
	// Every client shares one address: the per-source limit must not be
	// what bounds the server; the table holds every client's flight.
	tcfg := turbo.Config{SourceRate: 1e9, SourceBurst: 1 << 20, MaxEntries: 4 * clients}
	turbohook.SetExec(&tcfg, s.execFlight)
	s.turbo = turbo.NewTLSServer(tc, nil, tcfg)
	s.turbo.LinkTimeout = timeout
	for i := 0; i < workers; i++ {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			for j := range s.jobs {
				busy := s.busy.Add(1)
				for {
					peak := s.peakBusy.Load()
					if busy <= peak || s.peakBusy.CompareAndSwap(peak, busy) {
						break
					}
				}
				j.run(time.Now())
				s.busy.Add(-1)
			}
		}()
	}
	s.udp.Add(1)
	go func() { defer s.udp.Done(); s.turbo.ServeUDP(pc) }()
	s.acceptor.Add(1)
	go func() {
		defer s.acceptor.Done()
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[raw] = true
			s.mu.Unlock()
			s.readers.Add(1)
			go func() {
				defer s.readers.Done()
				first, err := firstBytes(raw, s.timeout)
				if err != nil {
					s.drop(raw)
					return
				}
				queued := time.Now()
				s.jobs <- poolJob{queued: queued, run: func(started time.Time) { s.serveConn(raw, first, queued, started) }}
			}()
		}
	}()
	return s, nil
}

// execFlight is the server's turbohook.Exec: the flight waits for a worker like a
// connection does.
func (s *pooledServer) execFlight(ctx context.Context, work func()) error {
	done := make(chan struct{})
	queued := time.Now()
	j := poolJob{queued: queued, run: func(started time.Time) {
		work()
		s.rec.add(kindUDP, started.Sub(queued), time.Since(started))
		close(done)
	}}
	select {
	case s.jobs <- j:
	case <-ctx.Done():
		return errPoolClosed
	}
	<-done
	return nil
}

// serveConn is a worker's whole share of one connection: the link record
// or ClientHello, the handshake, one byte, close.
func (s *pooledServer) serveConn(raw net.Conn, first []byte, queued, started time.Time) {
	defer s.drop(raw)
	raw.SetDeadline(time.Now().Add(s.timeout))
	sc, err := s.turbo.Accept(turbo.PrefixConn(raw, first))
	if err != nil {
		return
	}
	if err := sc.Handshake(); err != nil {
		return
	}
	kind := kindTCPPlain
	if sc.Turbo {
		kind = kindTCPTurbo
	}
	s.rec.add(kind, started.Sub(queued), time.Since(started))
	sc.Write([]byte{'k'})
}

// drop closes raw and forgets it.
func (s *pooledServer) drop(raw net.Conn) {
	raw.Close()
	s.mu.Lock()
	delete(s.conns, raw)
	s.mu.Unlock()
}

// firstBytes waits, at most timeout, for raw's first bytes and returns them.
func firstBytes(raw net.Conn, timeout time.Duration) ([]byte, error) {
	raw.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n, err := raw.Read(buf)
	raw.SetReadDeadline(time.Time{})
	if n == 0 {
		if err == nil {
			err = io.ErrNoProgress
		}
		return nil, err
	}
	return buf[:n], nil
}

// Close stops accepting, closes the connections still open, stops the
// UDP side (its flights finish on the workers first), then the workers.
func (s *pooledServer) Close() error {
	err := s.ln.Close()
	s.acceptor.Wait()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.readers.Wait() // before the queue closes: they may still queue a job
	s.turbo.Close()
	s.udp.Wait()
	close(s.jobs)
	s.workers.Wait()
	return err
}

// Kinds of pool work.
const (
	kindTCPPlain = iota // a TCP connection running TLS alone
	kindTCPTurbo        // a TCP connection continuing a UDP flight
	kindUDP             // a UDP flight
	numKinds
)

// poolRecorder keeps the queue and hold times of the pool's work.
type poolRecorder struct {
	mu    sync.Mutex
	queue [numKinds][]time.Duration
	hold  [numKinds][]time.Duration
	all   [2]struct{ queue, hold [numKinds][]time.Duration } // per mode, whole run
}

func (r *poolRecorder) add(kind int, queue, hold time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queue[kind] = append(r.queue[kind], queue)
	r.hold[kind] = append(r.hold[kind], hold)
}

func (r *poolRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.queue {
		r.queue[k], r.hold[k] = nil, nil
	}
}

func modeIndex(mode string) int {
	if mode == ModeTurbo {
		return 1
	}
	return 0
}

// appendTo files this round's times under res's mode.
func (r *poolRecorder) appendTo(res *ThroughputResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &r.all[modeIndex(res.Mode)]
	for k := range r.queue {
		a.queue[k] = append(a.queue[k], r.queue[k]...)
		a.hold[k] = append(a.hold[k], r.hold[k]...)
	}
}

// summarize fills res's server-side figures: the TCP connections of its
// mode (turbo: those that linked to a UDP flight, plus any fallback) and
// its UDP flights.
func (r *poolRecorder) summarize(res *ThroughputResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := &r.all[modeIndex(res.Mode)]
	tcpQ := append(append([]time.Duration(nil), a.queue[kindTCPPlain]...), a.queue[kindTCPTurbo]...)
	tcpH := append(append([]time.Duration(nil), a.hold[kindTCPPlain]...), a.hold[kindTCPTurbo]...)
	res.TCPQueue, res.TCPHold = Summarize(tcpQ), Summarize(tcpH)
	res.UDPQueue, res.UDPHold = Summarize(a.queue[kindUDP]), Summarize(a.hold[kindUDP])
	res.UDPFlight = len(a.hold[kindUDP])
	res.TCPConns = len(tcpH)
}

// setReadBuffer sets pc's receive buffer to n bytes (n > 0), beyond
// net.core.rmem_max where the process may (SO_RCVBUFFORCE, root), and
// returns the size the kernel reports.
func setReadBuffer(pc net.PacketConn, n int) (int, error) {
	sc, ok := pc.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	got := 0
	var serr error
	cerr := rc.Control(func(fd uintptr) {
		if n > 0 {
			if serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, n); serr != nil {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, n)
			}
		}
		got, _ = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF)
	})
	if cerr != nil {
		return 0, fmt.Errorf("bench: %w", cerr)
	}
	if serr != nil {
		return 0, fmt.Errorf("bench: UDP receive buffer of %d bytes: %w", n, serr)
	}
	return got, nil
}

// udpRcvbufErrors reads the host's Udp RcvbufErrors counter (-1 when it
// cannot).
func udpRcvbufErrors(h *hosts.Host) int64 {
	var n int64 = -1
	h.Do(func() error {
		b, err := os.ReadFile("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		n = parseUDPRcvbufErrors(b)
		return nil
	})
	return n
}

// parseUDPRcvbufErrors finds RcvbufErrors in the "Udp:" lines of
// /proc/net/snmp (a line of names, then a line of values); -1 if absent.
func parseUDPRcvbufErrors(b []byte) int64 {
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, name := range names {
			if name == "RcvbufErrors" && i < len(f) {
				if v, err := strconv.ParseInt(f[i], 10, 64); err == nil && v >= 0 {
					return v
				}
			}
		}
		return -1
	}
	return -1
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// WriteJSON writes the report as indented JSON.
func (r *ThroughputReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes a readable summary.
func (r *ThroughputReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "server handshake throughput: RTT %.1f ms (TCP connect median %.3f ms), %d workers, %d concurrent clients, %d handshakes per mode, %d rounds\n\n",
		r.RTTms, r.ConnectMedianMs, r.Workers, r.Concurrency, r.Handshakes, r.Rounds)
	fmt.Fprintf(w, "%-6s %10s %6s %7s %8s %8s %10s %10s %12s %12s %10s\n",
		"mode", "handshakes", "turbo", "errors", "steady/s", "whole/s", "median ms", "p90 ms", "tcp hold ms", "udp hold ms", "cpu ms/hs")
	for _, res := range r.Results {
		udp := "-"
		if res.UDPFlight > 0 {
			udp = fmt.Sprintf("%.2f", res.UDPHold.Median)
		}
		fmt.Fprintf(w, "%-6s %10d %6d %7d %8.1f %8.1f %10.1f %10.1f %12.2f %12s %10.2f\n",
			res.Mode, res.Handshakes, res.Turbo, res.Errors, res.Steady, res.PerSecond, res.Latency.Median, res.Latency.P90, res.TCPHold.Median, udp, res.CPUms)
	}
	fmt.Fprintf(w, "\nturbo / tls: %.2f× steady (%.2f× over whole rounds)\n", r.Ratio, r.RatioWhole)
	fmt.Fprintln(w, "(steady: between the 10th and 90th percentile completion of each round; whole: handshakes / wall time;")
	fmt.Fprintln(w, " latency: dial start to the server's byte after its handshake; hold: median time a worker spent on one TCP connection or UDP flight)")
}
