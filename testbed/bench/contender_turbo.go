package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/dialhook"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/testbed/child"
	"github.com/ztls-project/ztls/testbed/hosts"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// The TurboTLS contenders (package turbo, through dial with Options.Turbo):
//
//   - turbo: TLS 1.3 whose first two flights go over UDP while TCP's
//     handshake runs, then the request on TCP (2 RTT after the lookup);
//   - ztls-turbo: ZTLS over TurboTLS: ClientHello, ztls and the request
//     over UDP, the answer in the server's UDP flight (1 RTT).
//
// The server listens on TCP and UDP (same port) and publishes an HTTPS
// record with key65280 (and, for ztls-turbo, its Z-data). Variants with a
// suffix emulate UDP trouble at the client's UDP socket, which is the only
// place that touches TurboTLS's datagrams (the emulator's --loss hits TCP
// too): -udploss1 and -udploss5 drop each datagram, in either direction,
// with probability 1 % and 5 %; -udpblocked drops all of them. A sample of
// the plain variants counts only with transport turbo (and, for
// ztls-turbo, the answer in the first flight); the lossy variants count
// every completed visit, falling back or not.
//
// Like the engine contenders, the client runs in a worker process in the
// client's namespace: this executable run again as TurboWorkerRole.

// TurboWorkerRole is the turbo contenders' client worker (see
// ClientWorkerRole).
var TurboWorkerRole = child.Role{
	Name:  "bench-turbo-worker",
	Short: "the testbed's client worker for turbo and ztls-turbo (started by bench, not by hand)",
	Main:  func(args []string) int { return serveJobs(args, os.Stdin, os.Stdout, serveTurboJob) },
}

// serveTurboJob runs one turbo contender's visit.
func serveTurboJob(st *workerState, line []byte) (uint64, *workerResult) {
	j, err := parseTurboJob(line)
	if err != nil {
		return j.ID, &workerResult{Err: err.Error()}
	}
	return j.ID, st.turboVisit(j)
}

func init() {
	for _, v := range []struct {
		suffix string
		drop   float64
	}{{"", 0}, {"-udploss1", 0.01}, {"-udploss5", 0.05}, {"-udpblocked", 1}} {
		v := v
		Register("turbo"+v.suffix, func() Contender { return &turboContender{name: "turbo" + v.suffix, mode: "tls", drop: v.drop} })
		Register("ztls-turbo"+v.suffix, func() Contender {
			return &turboContender{name: "ztls-turbo" + v.suffix, mode: "ztls", drop: v.drop}
		})
	}
	// With prefetch before the click (contender_prefetch.go).
	Register("ztls-turbo-prefetch", func() Contender {
		return &turboContender{name: "ztls-turbo-prefetch", mode: "ztls", prefetch: true}
	})
}

// TurboWait is the wait for the UDP flight after TCP connects in the
// benchmark: dial's default (half the TCP connect time, at least 2 ms).
const TurboWait = 0

type turboContender struct {
	name string
	mode string  // dial mode: tls or ztls
	drop float64 // probability a datagram is dropped at the client
	// prefetch: Prime prefetches into the worker's prevalidate.Cache, runs use it.
	prefetch bool
	// variant: post-quantum Z-data, DoT (contender_pq.go); no ECH over
	// TurboTLS (dial sends an ECH service's flight over TCP).
	variant

	slot workerSlot
	runs int64 // visits made: each gets its own loss seed
}

func (e *turboContender) Name() string    { return e.name }
func (e *turboContender) serviceLookups() {}

type turboServer struct {
	tcp  *server.Server
	srv  *turbo.TLSServer
	stop chan struct{}
	wg   sync.WaitGroup
	e    *turboContender
}

func (s *turboServer) Close() error {
	close(s.stop)
	s.wg.Wait()
	err := s.tcp.Close()
	s.srv.Close()
	s.e.slot.stop()
	return err
}

func (e *turboContender) StartServer(ctx context.Context, h *hosts.Host, cfg ServerConfig) (io.Closer, error) {
	cert, err := serverCert(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Publish == nil {
		return nil, errors.New("bench: turbo needs the scenario's DNS to publish its HTTPS record")
	}
	s := &turboServer{stop: make(chan struct{}), e: e}
	var svc *zdata.Service
	if e.mode == "ztls" {
		svc, err = zdata.NewService(ServerName, int(cfg.Addr.Port()), cert, e.zdataOptions(), nil)
		if err != nil {
			return nil, err
		}
		if err := publishZData(svc, cert, cfg, false, clock.Now()); err != nil {
			return nil, err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			t := time.NewTicker(time.Minute)
			defer t.Stop()
			for {
				select {
				case <-s.stop:
					return
				case <-t.C: // the tick's time is the system's: the records follow the ztls clock
					publishZData(svc, cert, cfg, false, clock.Now())
				}
			}
		}()
	}
	cfg.Publish([]dns.RR{turbo.HTTPSRecord(ServerName, int(cfg.Addr.Port()), cfg.Addr.Port(), 300)})
	tc := engineServerConfig(cert, svc)
	e.serverConfig(tc, nil)
	var ln net.Listener
	var pc net.PacketConn
	if h != nil {
		ln, err = h.Listen("tcp", cfg.Addr.String())
		if err == nil {
			pc, err = h.ListenPacket("udp", cfg.Addr.String())
		}
	} else {
		ln, err = net.Listen("tcp", cfg.Addr.String())
		if err == nil {
			pc, err = net.ListenPacket("udp", cfg.Addr.String())
		}
	}
	if err != nil {
		if ln != nil {
			ln.Close()
		}
		close(s.stop)
		s.wg.Wait()
		return nil, err
	}
	// The early request is answered before the UDP flight leaves.
	s.srv = turbo.NewTLSServer(tc, func(early []byte, _ tls13.ConnectionState) []byte {
		path, err := readRequest(bytes.NewReader(early))
		if err != nil {
			return nil
		}
		if body, ok := cfg.Files[path]; ok {
			return body
		}
		return []byte("HTTP/1.0 404 Not Found\r\n\r\n")
	}, turbo.Config{})
	go s.srv.ServeUDP(pc)
	if s.tcp, err = serveEngine(ln, tc, s.srv, &cfg); err != nil {
		s.srv.Close()
		close(s.stop)
		s.wg.Wait()
		return nil, err
	}
	return s, nil
}

func (e *turboContender) RunClient(ctx context.Context, c *Client) (Sample, error) {
	dw := c.dotWindow()
	res, err := e.call(ctx, c, false, false)
	if err != nil {
		return Sample{}, err
	}
	logReport(&res.Report) // refused visits too: their report says why
	if err := checkTurboVisit(e.name, e.mode, e.drop, res, c.Expect); err != nil {
		return Sample{}, err
	}
	if err := e.variant.check(e.name, e.mode, res.Report, dw.end(c)); err != nil {
		return Sample{}, err
	}
	return sampleOf(res.Report), nil
}

// checkTurboVisit: the whole response; for the loss-free variants the
// protocol actually used (transport turbo; ztls-turbo: ZTLS with the
// answer in the server's first flight).
func checkTurboVisit(name, mode string, drop float64, res *workerResult, expect []byte) error {
	r := res.Report
	if !bytes.Equal(res.Response, expect) {
		return fmt.Errorf("bench: %s: response %q, want %q", name, trim(res.Response), trim(expect))
	}
	if r.Timing.FirstByte <= 0 {
		return fmt.Errorf("bench: %s: no first byte time", name)
	}
	if err := checkPrefetched(name, r); err != nil {
		return err
	}
	if drop > 0 {
		return nil
	}
	if r.Transport != "turbo" {
		return fmt.Errorf("bench: %s: transport %s (%s)", name, r.Transport, r.TurboFallback)
	}
	if mode == "ztls" && (r.Mode != "ztls" || !r.AnswerInFirstFlight) {
		return fmt.Errorf("bench: %s: mode %s, answer in first flight %v (%s)", name, r.Mode, r.AnswerInFirstFlight, r.FallbackReason)
	}
	if mode == "tls" && (r.Mode != "tls" || r.EarlyData.Offered) {
		return fmt.Errorf("bench: %s: mode %s, early data offered %v", name, r.Mode, r.EarlyData.Offered)
	}
	return nil
}

// turboJob is one visit for the turbo worker.
type turboJob struct {
	visit
	Drop   float64 `json:"drop"`
	Seed   int64   `json:"seed"`
	WaitMs int64   `json:"wait_ms"`
}

func parseTurboJob(line []byte) (turboJob, error) {
	var j turboJob
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, fmt.Errorf("bench: turbo worker job: %w", err)
	}
	if err := j.check(); err != nil {
		return j, fmt.Errorf("bench: turbo worker job: %w", err)
	}
	if j.Drop < 0 || j.Drop > 1 {
		return j, fmt.Errorf("bench: turbo worker job: drop probability %v out of range", j.Drop)
	}
	if j.WaitMs < 0 || j.WaitMs > 60_000 {
		return j, fmt.Errorf("bench: turbo worker job: wait %d ms out of range (0 to 60000)", j.WaitMs)
	}
	return j, nil
}

// lossyUDP drops each datagram with probability p in either direction.
// Incoming ones are dropped on raw reads too (it is a syscall.Conn, as
// the socket is): turbo polls the wait's last millisecond with raw
// reads, and a wrapper without them would make it wait on the
// runtime's timer instead, which wakes late (up to a millisecond).
type lossyUDP struct {
	net.Conn
	p   float64
	mu  sync.Mutex
	rng *rand.Rand
}

func (l *lossyUDP) lose() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.p >= 1 || l.rng.Float64() < l.p
}

func (l *lossyUDP) Write(b []byte) (int, error) {
	if l.lose() {
		return len(b), nil
	}
	return l.Conn.Write(b)
}

func (l *lossyUDP) Read(b []byte) (int, error) {
	for {
		n, err := l.Conn.Read(b)
		if err != nil || !l.lose() {
			return n, err
		}
	}
}

func (l *lossyUDP) SyscallConn() (syscall.RawConn, error) {
	rc, err := rawConnOf(l.Conn)
	if err != nil {
		return nil, err
	}
	return lossyRaw{RawConn: rc, l: l}, nil
}

// lossyRaw drops each datagram waiting on the socket with lossyUDP's
// probability before a raw read sees it: a peek finds one there, a
// discarding read drops it.
type lossyRaw struct {
	syscall.RawConn
	l *lossyUDP
}

func (r lossyRaw) Read(f func(fd uintptr) bool) error {
	return r.RawConn.Read(func(fd uintptr) bool {
		var b [1]byte
		for {
			if _, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT); err != nil || !r.l.lose() {
				break // nothing waiting (or an error f will see), or kept
			}
			unix.Recvfrom(int(fd), b[:], unix.MSG_DONTWAIT)
		}
		return f(fd)
	})
}

// blockedUDP drops every datagram the client sends, so none comes back,
// as on a path that blocks UDP. Reads go to the socket, raw ones too: it
// is a syscall.Conn, as the socket is (turbo polls the wait's last
// millisecond with raw reads).
type blockedUDP struct{ net.Conn }

func (b blockedUDP) Write(p []byte) (int, error) { return len(p), nil }

func (b blockedUDP) SyscallConn() (syscall.RawConn, error) { return rawConnOf(b.Conn) }

// rawConnOf is the raw connection of the socket under c.
func rawConnOf(c net.Conn) (syscall.RawConn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, errors.New("bench: the UDP socket has no file descriptor")
	}
	return sc.SyscallConn()
}

// call runs a visit in the worker (prefetchOnly: the unmeasured prefetch
// of a prefetch contender; dotOpen: the unmeasured opening of the
// kept-open DoT connection).
func (e *turboContender) call(ctx context.Context, c *Client, prefetchOnly, dotOpen bool) (*workerResult, error) {
	return e.slot.run(ctx, c, TurboWorkerRole, func(w *worker) (*workerResult, error) {
		e.runs++
		j := turboJob{visit: newVisit(ctx, c, e.mode), Drop: e.drop, Seed: time.Now().UnixNano() + e.runs,
			WaitMs: c.TurboWait.Milliseconds()}
		j.Prefetch, j.Prefetched = prefetchOnly, e.prefetch && !prefetchOnly && !dotOpen
		j.DoTOpen = dotOpen
		e.variant.apply(&j.visit, c)
		j.ID = w.nextJob()
		return w.roundTrip(ctx, j.ID, j)
	})
}

// turboVisit is workerState.visit with TurboTLS on: a fresh resolver
// (filled first with the stub scenario), a fresh flight-size cache (first
// contact), the UDP socket wrapped for the loss variants.
func (st *workerState) turboVisit(j turboJob) *workerResult {
	if j.DoTOpen {
		return st.openDoT(j.visit)
	}
	v, err := st.startVisit(j.visit, "turbo worker")
	if err != nil {
		return &workerResult{Err: err.Error()}
	}
	defer v.close()
	v.o.Turbo = true
	v.o.TurboWait = TurboWait
	if j.WaitMs > 0 {
		v.o.TurboWait = time.Duration(j.WaitMs) * time.Millisecond
	}
	v.o.TurboSizes = &turbo.SizeCache{}
	if j.Prefetch {
		return st.prefetchVisit(v.ctx, v.o, j.Addr)
	}
	switch {
	case j.Drop >= 1:
		v.ctx = dialhook.WithWrapUDP(v.ctx, func(c net.Conn) net.Conn { return blockedUDP{c} })
	case j.Drop > 0:
		rng := rand.New(rand.NewSource(j.Seed))
		v.ctx = dialhook.WithWrapUDP(v.ctx, func(c net.Conn) net.Conn { return &lossyUDP{Conn: c, p: j.Drop, rng: rng} })
	}
	_, out := v.connect(st.cacheFor(j.Prefetched), j.Addr)
	return out
}
