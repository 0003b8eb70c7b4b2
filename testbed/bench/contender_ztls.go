package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ztls-project/ztls/dial"
	dnsresolver "github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/testbed/child"
	"github.com/ztls-project/ztls/testbed/hosts"
	"github.com/ztls-project/ztls/testbed/netem"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// The contenders of this project's own engine:
//
//   - tls: plain TLS 1.3 with package tls13, connected by package dial in
//     mode "tls" (DNS + TCP + TLS + request: 3 RTT after the lookup);
//   - ztls: dial in mode "ztls" against a server whose Z-data is published
//     in the scenario's authority; the request rides with the ClientHello
//     and is answered in the server's first flight (2 RTT after the lookup);
//   - tls-0rtt: TLS 1.3 resumption of a ticket from an unmeasured previous
//     visit, the request as 0-RTT early data (2 RTT after the lookup);
//   - ztls-bfe: ztls against a server whose Z-data keys carry Bloom filter
//     encryption keys (docs/ztls-spec.md, Section 7): the client
//     encapsulates, the server decapsulates and punctures before it
//     answers (2 RTT after the lookup, plus that CPU);
//   - ztls-https: ztls against a server that also publishes its Z-data in
//     the HTTPS record (docs/ztls-spec.md, Section 8), dialled with
//     dial.ZDataHTTPSFirst: the client asks A, AAAA, HTTPS, TLSA and CERT
//     but no TXT (one question fewer), all at once as before;
//   - ztls-https-held: ztls-https with the leaf held from an unmeasured
//     previous visit (dial.Memory, docs/ztls-spec.md, Section 8.3): the
//     client asks A, AAAA and HTTPS only, what a browser asks anyway.
//
// Every other contender dials with dial.ZDataTXT: Z-data from the TXT
// record, the HTTPS record asked beside it for TurboTLS, one batch of
// questions, as before the HTTPS path existed (with dial's default,
// HTTPS first, a server publishing TXT only would cost a second round
// trip).
//
// dial opens its own sockets (the parallel DNS lookups, then TCP), and a
// socket belongs to the network namespace of the thread that made it, so
// the clients run in a worker process started inside the client's
// namespace (this binary re-executed through `ip netns exec`). The worker
// measures with dial's own report: from the start of the lookup to the
// first response byte, the same span the other contenders measure.

func init() {
	Register("tls", func() Contender { return &engineContender{name: "tls", mode: "tls"} })
	Register("ztls", func() Contender { return &engineContender{name: "ztls", mode: "ztls"} })
	Register("tls-0rtt", func() Contender { return &engineContender{name: "tls-0rtt", mode: "tls", resume: true} })
	// With prefetch before the click (contender_prefetch.go).
	Register("tls-prefetch", func() Contender { return &engineContender{name: "tls-prefetch", mode: "tls", prefetch: true} })
	Register("ztls-prefetch", func() Contender { return &engineContender{name: "ztls-prefetch", mode: "ztls", prefetch: true} })
	Register("ztls-bfe", func() Contender { return &engineContender{name: "ztls-bfe", mode: "ztls", bfe: true} })
	Register("ztls-https", func() Contender { return &engineContender{name: "ztls-https", mode: "ztls", https: true} })
	Register("ztls-https-held", func() Contender {
		return &engineContender{name: "ztls-https-held", mode: "ztls", https: true, heldLeaf: true}
	})
	Register("ztls-bfe-prefetch", func() Contender {
		return &engineContender{name: "ztls-bfe-prefetch", mode: "ztls", bfe: true, prefetch: true}
	})
}

// bfeConnections sizes the ztls-bfe server's BFE keys: more early-data
// connections than a run makes (runs x scenarios x RTTs), so that no
// filter fills. Decapsulation's work does not depend on it (k = 5 at the
// default rate, as at n = 2^14); key generation, three keys at the
// server's start, takes about 5 s of one core each.
const bfeConnections = 1024

// ClientWorkerRole is the engine contenders' client worker: this
// executable run again inside the client's namespace, serving visits as
// JSON lines on stdin and stdout. The program that runs the testbed must
// dispatch it (cmd/ztls-bench does; tests call child.Dispatch(Roles()...)).
var ClientWorkerRole = child.Role{
	Name:  "bench-client-worker",
	Short: "the testbed's client worker for tls, ztls and tls-0rtt (started by bench, not by hand)",
	Main:  func(args []string) int { return serveJobs(args, os.Stdin, os.Stdout, serveClientJob) },
}

// serveClientJob runs one engine contender's visit.
func serveClientJob(st *workerState, line []byte) (uint64, *workerResult) {
	j, err := parseJob(line)
	if err != nil {
		return j.ID, &workerResult{Err: err.Error()}
	}
	return j.ID, st.visit(j)
}

// Roles are every helper process the testbed starts from its own
// executable: the link relay and the client workers.
func Roles() []child.Role {
	return []child.Role{netem.RelayRole, ClientWorkerRole, TurboWorkerRole}
}

// realtimeArg asks a worker to run at real-time priority like the
// measuring process.
const realtimeArg = "--realtime"

// engineContender is one of tls, ztls and tls-0rtt.
type engineContender struct {
	name   string
	mode   string // dial mode: "tls" or "ztls"
	resume bool   // tls-0rtt: Prime fetches a ticket, runs resume with 0-RTT
	// prefetch: Prime prefetches into the worker's prevalidate.Cache, runs use it.
	prefetch bool
	ocsp     bool // the client asks the leaf's OCSP responder, hard-fail
	bfe      bool // ztls-bfe: the Z-data keys carry BFE keys
	// https: the server publishes its Z-data in the HTTPS record too,
	// and the client takes it from there (dial.ZDataHTTPSFirst).
	https bool
	// heldLeaf: Prime makes a visit whose dial.Memory (with the leaf its
	// handshake verified) the worker keeps; runs use it.
	heldLeaf bool
	// variant: post-quantum Z-data, DoT, ECH (contender_pq.go,
	// contender_ech.go).
	variant

	slot workerSlot
}

func (e *engineContender) Name() string { return e.name }

// engineServer is a tls13 server answering one request per connection,
// from early data when it was accepted (0.5-RTT, in the first flight).
type engineServer struct {
	tcp      *server.Server
	stop     chan struct{}
	wg       sync.WaitGroup
	e        *engineContender
	closeBFE func() // ztls-bfe: closes the BFE key states
}

// republishEvery runs publish every minute until stop closes: Z-data
// records live an hour (ECH keys a period), and a long benchmark rotates
// and republishes them.
func republishEvery(wg *sync.WaitGroup, stop chan struct{}, publish func(now time.Time) error) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C: // the tick's time is the system's: the records follow the ztls clock
				publish(clock.Now())
			}
		}
	}()
}

func (s *engineServer) Close() error {
	close(s.stop)
	s.wg.Wait()
	err := s.tcp.Close()
	s.e.slot.stop()
	if s.closeBFE != nil {
		s.closeBFE()
	}
	return err
}

// startBFE generates svc's BFE keys (this period's and the next two's)
// under dir and opens them for serving, before the first measurement.
func startBFE(ctx context.Context, svc *zdata.Service, dir string) error {
	svc.BFEDir, svc.BFEServe = filepath.Join(dir, "bfe"), true
	if _, err := svc.GenerateBFE(ctx, clock.Now()); err != nil {
		return fmt.Errorf("bench: ztls-bfe: %w", err)
	}
	return nil
}

// serverCert turns the harness's crypto/tls certificate into the engine's.
func serverCert(cfg ServerConfig) (tls13.Certificate, error) {
	if len(cfg.Cert.Certificate) == 0 {
		return tls13.Certificate{}, errors.New("bench: server has no certificate")
	}
	signer, ok := cfg.Cert.PrivateKey.(crypto.Signer)
	if !ok {
		return tls13.Certificate{}, errors.New("bench: server key cannot sign")
	}
	leaf, err := x509.ParseCertificate(cfg.Cert.Certificate[0])
	if err != nil {
		return tls13.Certificate{}, fmt.Errorf("bench: server certificate: %w", err)
	}
	return tls13.Certificate{Chain: cfg.Cert.Certificate, PrivateKey: signer, Leaf: leaf}, nil
}

// engineServerConfig is the server side shared by the three contenders:
// X25519 only (as every contender), tickets with 0-RTT allowed, and the
// Z-data keys when svc is set.
func engineServerConfig(cert tls13.Certificate, svc *zdata.Service) *tls13.Config {
	cfg := &tls13.Config{
		Certificates: []tls13.Certificate{cert},
		Groups:       []tls13.CurveID{tls13.X25519},
		MaxEarlyData: 16384,
		// The run's Z-data and ticket keys are made for this server at
		// its start; no earlier process held them, so its register may
		// vouch for everything (a real server's memory starts at its start).
		StrikeRegister: tls13.NewMemoryStrikeRegister(1<<20, time.Time{}),
	}
	if svc != nil {
		cfg.ZData = svc.Keyring
	}
	return cfg
}

func (e *engineContender) StartServer(ctx context.Context, h *hosts.Host, cfg ServerConfig) (io.Closer, error) {
	cert, err := serverCert(cfg)
	if err != nil {
		return nil, err
	}
	s := &engineServer{stop: make(chan struct{}), e: e}
	var svc *zdata.Service
	var ech *echService
	if e.ech {
		// The ECH keys live in a Z-data directory (contender_ech.go),
		// whose Service is the ztls server's.
		if ech, err = startECH(cfg, clock.Now()); err != nil {
			return nil, err
		}
	}
	var publish []func(now time.Time) error
	if e.mode == "ztls" {
		if cfg.Publish == nil {
			return nil, errors.New("bench: ztls needs the scenario's DNS to publish Z-data")
		}
		opts := e.zdataOptions()
		if e.bfe {
			opts.BFEConnections = bfeConnections
		}
		if ech != nil {
			svc = ech.dir.Service
		} else if svc, err = zdata.NewService(ServerName, int(cfg.Addr.Port()), cert, opts, nil); err != nil {
			return nil, err
		}
		if e.bfe {
			if err := startBFE(ctx, svc, cfg.Dir); err != nil {
				return nil, err
			}
			s.closeBFE = svc.CloseBFE
		}
		publish = append(publish, func(now time.Time) error { return publishZData(svc, cert, cfg, e.https, now) })
	}
	if ech != nil {
		publish = append(publish, func(now time.Time) error { return ech.publish(cfg, now) })
	}
	if len(publish) > 0 {
		all := func(now time.Time) error {
			for _, p := range publish {
				if err := p(now); err != nil {
					return err
				}
			}
			return nil
		}
		if err := all(clock.Now()); err != nil {
			return nil, err
		}
		republishEvery(&s.wg, s.stop, all)
	}
	tc := engineServerConfig(cert, svc)
	e.serverConfig(tc, ech)
	var ln net.Listener
	if h != nil {
		ln, err = h.Listen("tcp", cfg.Addr.String())
	} else {
		ln, err = net.Listen("tcp", cfg.Addr.String()) // loopback tests
	}
	if err != nil {
		close(s.stop)
		s.wg.Wait()
		return nil, err
	}
	if s.tcp, err = serveEngine(ln, tc, nil, &cfg); err != nil {
		close(s.stop)
		s.wg.Wait()
		return nil, err
	}
	return s, nil
}

// serveEngine serves ln with the engine, one request per connection,
// through tsrv when it is set (TurboTLS): a connection whose early request
// tsrv answered in its UDP flight gets only the rest of its handshake.
func serveEngine(ln net.Listener, tc *tls13.Config, tsrv *turbo.TLSServer, cfg *ServerConfig) (*server.Server, error) {
	srv, err := server.New(server.Config{
		TLS:              func() *tls13.Config { return tc },
		Turbo:            tsrv,
		HandshakeTimeout: 30 * time.Second,
		Handler: func(c *server.Conn) {
			if c.EarlyAnswered {
				if c.FinishHandshake() == nil {
					c.CloseWrite()
				}
				return
			}
			serveEngineConn(c.Conn, cfg)
		},
	})
	if err != nil {
		ln.Close()
		return nil, err
	}
	go srv.Serve(ln)
	return srv, nil
}

// publishZData rotates svc's keys and replaces the service's Z-data in the
// authority: TXT (and CERT for intermediates) at _ztls._<port>._tcp.<host>,
// TLSA at _<port>._tcp.<host>, and with https the HTTPS record carrying
// the Z-data too (docs/ztls-spec.md, Section 8: the same records and
// signatures; TXT stays, as Section 8.5 has a publisher keep it).
func publishZData(svc *zdata.Service, cert tls13.Certificate, cfg ServerConfig, https bool, now time.Time) error {
	if _, err := svc.Rotate(now); err != nil {
		return fmt.Errorf("bench: z-data: %w", err)
	}
	recs := svc.Records(now)
	rrs := zdata.ZoneRRs(recs, cert.Chain[0], cert.Chain[1:], zdata.TTLFor(recs, now, 5*time.Minute))
	if len(rrs) == 0 {
		return errors.New("bench: z-data: no records to publish")
	}
	if https {
		rr, err := zdata.ServiceHTTPSRecord(ServerName, int(cfg.Addr.Port()), svc.HTTPSRecords(now), now, 5*time.Minute, zdata.HTTPSOptions{})
		if err != nil {
			return fmt.Errorf("bench: z-data: %w", err)
		}
		rrs = append(rrs, rr)
	}
	cfg.Publish(rrs)
	return nil
}

// serveEngineConn answers one request: from the early data when the
// client's 0-RTT (ZTLS or resumption) was accepted, so the answer leaves
// with the server's first flight, else after the handshake.
func serveEngineConn(c *tls13.Conn, cfg *ServerConfig) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.HandshakeEarly(ctx); err != nil {
		return
	}
	if cfg.Respond(&earlyThenNormal{c: c}) != nil {
		return
	}
	if c.Handshake() == nil {
		c.CloseWrite()
	}
}

// earlyThenNormal reads the early data first, then the connection.
type earlyThenNormal struct {
	c        *tls13.Conn
	earlyEOF bool
}

func (r *earlyThenNormal) Read(p []byte) (int, error) {
	if !r.earlyEOF {
		n, err := r.c.ReadEarlyData(p)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		r.earlyEOF = true
	}
	return r.c.Read(p)
}

func (r *earlyThenNormal) Write(p []byte) (int, error) { return r.c.Write(p) }

// Prime makes the unmeasured previous visit of tls-0rtt; its ticket is kept
// in the worker for the next run.
func (e *engineContender) Prime(ctx context.Context, c *Client) error {
	if e.dot {
		// The kept-open DoT connection, opened (or kept) before the visit.
		if _, err := e.call(ctx, c, job{visit: visit{DoTOpen: true}}); err != nil {
			return err
		}
	}
	if e.prefetch {
		_, err := e.call(ctx, c, job{visit: visit{Prefetch: true}})
		return err
	}
	if e.heldLeaf {
		res, err := e.call(ctx, c, job{KeepLeaf: true})
		if err != nil {
			return err
		}
		if res.Report.Mode != "ztls" {
			return fmt.Errorf("bench: %s: the previous visit did not use ZTLS (%s)", e.name, res.Report.FallbackReason)
		}
		return nil
	}
	if !e.resume {
		return nil
	}
	res, err := e.call(ctx, c, job{Prime: true})
	if err != nil {
		return err
	}
	if !res.HaveSession {
		return errors.New("bench: tls-0rtt: the previous visit got no session ticket")
	}
	return nil
}

func (e *engineContender) RunClient(ctx context.Context, c *Client) (Sample, error) {
	var s Sample
	dw := c.dotWindow()
	res, err := e.call(ctx, c, job{visit: visit{Prefetched: e.prefetch}, Resume: e.resume, HeldLeaf: e.heldLeaf})
	if err != nil {
		return s, err
	}
	logReport(&res.Report) // refused visits too: their report says why
	if err := checkVisit(e.name, res, c.Expect); err != nil {
		return s, err
	}
	if err := e.variant.check(e.name, e.mode, res.Report, dw.end(c)); err != nil {
		return s, err
	}
	return sampleOf(res.Report), nil
}

// ReportsEnv names the environment variable that, set to a file name,
// makes every visit of the engine and TurboTLS contenders (counted or
// refused) append its connection report (dial.Report, with the timed trace of each step) to
// that file as a JSON line: where each visit's time went.
const ReportsEnv = "ZTLS_BENCH_REPORTS"

var reportLog struct {
	sync.Mutex
	once sync.Once
	f    *os.File
}

// logReport appends r to the ReportsEnv file, if one is set.
func logReport(r *dial.Report) {
	reportLog.once.Do(func() {
		if p := os.Getenv(ReportsEnv); p != "" {
			f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", ReportsEnv, err)
				return
			}
			reportLog.f = f
		}
	})
	if reportLog.f == nil {
		return
	}
	b, err := json.Marshal(r)
	if err != nil {
		return
	}
	reportLog.Lock()
	reportLog.f.Write(append(b, '\n'))
	reportLog.Unlock()
}

// sampleOf converts dial's report (milliseconds since the start of the
// lookup) into a Sample. Handshake includes TCP's, as for the others.
func sampleOf(r dial.Report) Sample {
	d := func(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }
	return Sample{
		DNS:       d(r.Timing.DNS),
		Handshake: d(r.Timing.TCPConnect + r.Timing.Handshake),
		FirstByte: d(r.Timing.FirstByte),
		Early:     r.EarlyData.Accepted,
	}
}

// checkVisit decides whether a visit counts: the whole response, and the
// contender's protocol actually used (ztls mode with accepted early data;
// resumption with accepted 0-RTT; plain TLS without either).
func checkVisit(name string, res *workerResult, expect []byte) error {
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
	switch baseName(name) {
	case "ztls":
		if r.Mode != "ztls" || !r.EarlyData.Accepted {
			return fmt.Errorf("bench: ztls: mode %s, early data accepted %v (fallback: %s)", r.Mode, r.EarlyData.Accepted, r.FallbackReason)
		}
		if r.ZDataFrom != dial.ZDataFromTXT {
			return fmt.Errorf("bench: ztls: Z-data from %q, want the TXT record", r.ZDataFrom)
		}
	case "ztls-https", "ztls-https-held":
		if r.Mode != "ztls" || !r.EarlyData.Accepted || r.ZDataFrom != dial.ZDataFromHTTPS {
			return fmt.Errorf("bench: ztls-https: mode %s, early data accepted %v, Z-data from %q (fallback: %s)", r.Mode, r.EarlyData.Accepted, r.ZDataFrom, r.FallbackReason)
		}
	case "ztls-bfe":
		if r.Mode != "ztls" || !r.EarlyData.Accepted || !r.EarlyData.BFE {
			return fmt.Errorf("bench: ztls-bfe: mode %s, early data accepted %v, BFE %v (fallback: %s)", r.Mode, r.EarlyData.Accepted, r.EarlyData.BFE, r.FallbackReason)
		}
	case "tls-0rtt":
		if !r.TLS.Resumed || !r.EarlyData.Accepted {
			return fmt.Errorf("bench: tls-0rtt: resumed %v, early data accepted %v", r.TLS.Resumed, r.EarlyData.Accepted)
		}
	case "tls":
		if r.Mode != "tls" || r.EarlyData.Offered {
			return fmt.Errorf("bench: tls: mode %s, early data offered %v", r.Mode, r.EarlyData.Offered)
		}
	}
	return nil
}

// call runs one visit in the worker (workerSlot.run): c's request, with
// j's flags.
func (e *engineContender) call(ctx context.Context, c *Client, j job) (*workerResult, error) {
	return e.slot.run(ctx, c, ClientWorkerRole, func(w *worker) (*workerResult, error) {
		v := newVisit(ctx, c, e.mode)
		v.Prefetch, v.Prefetched, v.OCSP, v.DoTOpen = j.Prefetch, j.Prefetched, e.ocsp, j.DoTOpen
		e.variant.apply(&v, c)
		if e.https {
			v.ZDataFrom = string(dial.ZDataHTTPSFirst)
		}
		j.visit = v
		j.ID = w.nextJob()
		return w.roundTrip(ctx, j.ID, j)
	})
}

// workerSlot holds a contender's worker process, started on first use
// on the client's host.
type workerSlot struct {
	mu     sync.Mutex
	worker *worker
	host   *hosts.Host
}

// run runs one visit (send) in the worker, starting it on first use on
// c's host. A visit that does not answer in time kills the worker; the
// next run starts a new one (and tls-0rtt primes again anyway before
// every run).
func (s *workerSlot) run(ctx context.Context, c *Client, role child.Role, send func(*worker) (*workerResult, error)) (*workerResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker == nil || s.host != c.Host {
		if s.worker != nil {
			s.worker.close()
		}
		w, err := startWorker(c.Host, role)
		if err != nil {
			return nil, err
		}
		s.worker, s.host = w, c.Host
	}
	res, err := send(s.worker)
	if err != nil {
		s.worker.close()
		s.worker = nil
		return nil, err
	}
	if res.Err != "" {
		return nil, errors.New(res.Err)
	}
	return res, nil
}

// stop ends the worker, if one runs.
func (s *workerSlot) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker != nil {
		s.worker.close()
		s.worker = nil
	}
}

// visit is what every worker's job holds: one visit, by name, through
// the scenario's resolver.
type visit struct {
	ID        uint64 `json:"id"`
	Addr      string `json:"addr"`     // host:port to dial by name
	Mode      string `json:"mode"`     // dial mode: tls or ztls
	Resolver  string `json:"resolver"` // the scenario's resolver, ip:port
	StubCache bool   `json:"stub_cache"`
	CAFile    string `json:"ca_file"`
	Request   []byte `json:"request"`
	ExpectLen int    `json:"expect_len"`
	TimeoutMs int64  `json:"timeout_ms"`
	// Prefetch only prefetches Addr into the worker's cache (unmeasured);
	// Prefetched visits with that cache.
	Prefetch   bool `json:"prefetch,omitempty"`
	Prefetched bool `json:"prefetched,omitempty"`
	// OCSP asks the leaf's OCSP responder, hard-fail.
	OCSP bool `json:"ocsp,omitempty"`
	// ZDataFrom is dial's Options.ZDataFrom; "" means dial.ZDataTXT (the
	// TXT path, as every contender but ztls-https measures it).
	ZDataFrom string `json:"zdata_from,omitempty"`
	// DoT asks the resolver over DNS over TLS at this address (ip:port,
	// certificate for ResolverName), on the connection the worker keeps
	// open from visit to visit; "" asks over UDP. DoTOpen only opens (or
	// checks) that connection, unmeasured, with one question.
	DoT     string `json:"dot,omitempty"`
	DoTOpen bool   `json:"dot_open,omitempty"`
	// PQ offers X25519MLKEM768 (first) and X25519 for the handshake, as
	// a post-quantum client does; else X25519 only.
	PQ bool `json:"pq,omitempty"`
	// ECH is dial's Options.ECH ("" is auto).
	ECH string `json:"ech,omitempty"`
}

// newVisit is the visit of c's request in mode, within ctx's deadline.
func newVisit(ctx context.Context, c *Client, mode string) visit {
	v := visit{Addr: net.JoinHostPort(c.ServerName, strconv.Itoa(int(c.Port))), Mode: mode,
		Resolver: c.dns.resolver.server.String(), StubCache: c.Scenario.StubCache, CAFile: c.CAFile,
		Request: c.Request, ExpectLen: len(c.Expect)}
	if dl, ok := ctx.Deadline(); ok {
		v.TimeoutMs = max(time.Until(dl).Milliseconds(), 1)
	}
	return v
}

// check refuses a visit no worker can make.
func (v *visit) check() error {
	host, port, err := net.SplitHostPort(v.Addr)
	if err != nil || host == "" {
		return fmt.Errorf("bad address %q", v.Addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("bad port in %q", v.Addr)
	}
	if _, err := netip.ParseAddrPort(v.Resolver); err != nil {
		return fmt.Errorf("bad resolver %q", v.Resolver)
	}
	if v.Mode != "tls" && v.Mode != "ztls" {
		return fmt.Errorf("bad mode %q", v.Mode)
	}
	if v.ExpectLen < 1 || v.ExpectLen > 1<<20 {
		return fmt.Errorf("response length %d out of range", v.ExpectLen)
	}
	if v.TimeoutMs < 0 || v.TimeoutMs > 10*60*1000 {
		return fmt.Errorf("timeout %d ms out of range", v.TimeoutMs)
	}
	if v.Prefetch && v.Prefetched {
		return errors.New("a prefetch is a visit of its own")
	}
	if v.ZDataFrom != "" {
		if _, err := dial.ParseZDataFrom(v.ZDataFrom); err != nil {
			return err
		}
	}
	return v.checkVariant()
}

// job is one visit for the engine worker, one JSON line on its stdin.
type job struct {
	visit
	// Prime keeps the visit's session ticket; Resume offers the kept
	// ticket with the request as 0-RTT data.
	Prime  bool `json:"prime"`
	Resume bool `json:"resume"`
	// KeepLeaf keeps the visit's dial.Memory, which holds the leaf its
	// handshake verified; HeldLeaf visits with the kept one.
	KeepLeaf bool `json:"keep_leaf,omitempty"`
	HeldLeaf bool `json:"held_leaf,omitempty"`
}

// workerResult is the worker's answer, one JSON line on its stdout.
type workerResult struct {
	ID          uint64      `json:"id"`
	Report      dial.Report `json:"report"`
	Response    []byte      `json:"response"`
	HaveSession bool        `json:"have_session"`
	Err         string      `json:"error,omitempty"`
}

// parseJob decodes and checks one job line.
func parseJob(line []byte) (job, error) {
	var j job
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return j, fmt.Errorf("bench: worker job: %w", err)
	}
	if err := j.check(); err != nil {
		return j, fmt.Errorf("bench: worker job: %w", err)
	}
	if j.Prime && j.Resume {
		return j, errors.New("bench: worker job: prime and resume at once")
	}
	if j.Prefetch && (j.Prime || j.Resume) {
		return j, errors.New("bench: worker job: a prefetch is a visit of its own")
	}
	if j.KeepLeaf && j.HeldLeaf {
		return j, errors.New("bench: worker job: keep a leaf and use the kept one at once")
	}
	return j, nil
}

// worker is the parent's handle on a client worker process.
type worker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	nextID uint64
	done   chan struct{}
}

// startWorker starts role in h's namespace (nil: here, for loopback tests).
func startWorker(h *hosts.Host, role child.Role) (*worker, error) {
	var wrap func(string, ...string) *exec.Cmd
	if h != nil {
		wrap = func(name string, arg ...string) *exec.Cmd { return h.Command(context.Background(), name, arg...) }
	}
	var args []string
	if rt, _ := currentlyRealtime(); rt {
		args = append(args, realtimeArg)
	}
	cmd, err := child.Command(role, args, wrap)
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", role.Name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: %s: %w", role.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: starting %s: %w", role.Name, err)
	}
	w := &worker{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), done: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// nextJob is the ID of the next job sent.
func (w *worker) nextJob() uint64 {
	w.nextID++
	return w.nextID
}

// roundTrip writes one JSON job line and reads result lines until the one
// answering id arrives (or ctx ends). Every worker process speaks it.
func (w *worker) roundTrip(ctx context.Context, id uint64, j any) (*workerResult, error) {
	line, err := json.Marshal(j)
	if err != nil {
		return nil, fmt.Errorf("bench: worker: %w", err)
	}
	if _, err := w.in.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("bench: worker: %w", err)
	}
	type answer struct {
		r   *workerResult
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		for {
			l, err := w.out.ReadBytes('\n')
			if err != nil {
				ch <- answer{err: fmt.Errorf("bench: client worker ended: %w", err)}
				return
			}
			var r workerResult
			if err := json.Unmarshal(l, &r); err != nil {
				ch <- answer{err: fmt.Errorf("bench: client worker: %w", err)}
				return
			}
			if r.ID == id {
				ch <- answer{r: &r}
				return
			}
		}
	}()
	select {
	case a := <-ch:
		return a.r, a.err
	case <-ctx.Done():
		return nil, fmt.Errorf("bench: client worker: %w", ctx.Err())
	}
}

// close ends the worker: stdin closed, then killed if it lingers.
func (w *worker) close() {
	w.in.Close()
	select {
	case <-w.done:
	case <-time.After(2 * time.Second):
		w.cmd.Process.Kill()
		<-w.done
	}
}

// serveJobs serves a worker's job lines until stdin closes: serve reads
// one job and returns its id and result.
func serveJobs(args []string, in io.Reader, out io.Writer, serve func(st *workerState, line []byte) (uint64, *workerResult)) int {
	if slices.Contains(args, realtimeArg) {
		hosts.SetProcessRealtime(40)
	}
	st := &workerState{}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		id, res := serve(st, sc.Bytes())
		res.ID = id
		if err := enc.Encode(res); err != nil {
			return 1
		}
	}
	return 0
}

// workerState is what a worker keeps between jobs: the session ticket of
// the last primed visit and the parsed CA files. Each visit gets a fresh
// dial.Memory: every measured visit is a first contact.
type workerState struct {
	session *tls13.ClientSession
	memory  *dial.Memory // the last KeepLeaf visit's
	roots   map[string]*x509.CertPool
	cache   *prevalidate.Cache // filled by the last prefetch job
	// dot is the kept-open DoT resolver (contender_pq.go), asking dotAddr.
	dot     *dnsresolver.Resolver
	dotAddr string
}

func (st *workerState) rootsFor(file string) (*x509.CertPool, error) {
	if p, ok := st.roots[file]; ok {
		return p, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("bench: worker: %w", err)
	}
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("bench: worker: no certificate in %s", file)
	}
	if st.roots == nil {
		st.roots = map[string]*x509.CertPool{}
	}
	st.roots[file] = p
	return p, nil
}

// visit makes one connection with dial and reports it. The resolver is new
// for each visit: with the stub scenario its cache is filled first
// (unmeasured), else it has no cache and every lookup goes to the
// scenario's resolver.
func (st *workerState) visit(j job) *workerResult {
	if j.DoTOpen {
		return st.openDoT(j.visit)
	}
	v, err := st.startVisit(j.visit, "worker")
	if err != nil {
		return &workerResult{Err: err.Error()}
	}
	defer v.close()
	if j.Prime {
		// Read to the end so the ticket, sent after the handshake, is in.
		v.o.ReadResponse = j.ExpectLen + 1
	}
	if j.Resume {
		if st.session == nil {
			return &workerResult{Err: "bench: worker: no session to resume (prime first)"}
		}
		v.o.Session, v.o.ResumeEarly = st.session, true
	}
	if j.KeepLeaf {
		st.memory = v.o.Memory
	}
	if j.HeldLeaf {
		if st.memory == nil {
			return &workerResult{Err: "bench: worker: no kept leaf (prime first)"}
		}
		v.o.Memory = st.memory
	}
	if j.Prefetch {
		return st.prefetchVisit(v.ctx, v.o, j.Addr)
	}
	r, out := v.connect(st.cacheFor(j.Prefetched), j.Addr)
	if r != nil {
		if j.Prime {
			st.session = r.Session
		}
		out.HaveSession = r.Session != nil
	}
	return out
}

// aVisit is one visit under way: its deadline, its fresh resolver and the
// dial options a worker adjusts before connect.
type aVisit struct {
	ctx    context.Context
	cancel context.CancelFunc
	res    *dnsresolver.Resolver
	o      dial.Options
	got    bytes.Buffer
	// keptRes: res is the worker's kept-open DoT resolver, not closed
	// with the visit.
	keptRes bool
}

// startVisit makes a visit's resolver (filled first in the stub scenario:
// the answers are then in the stub's cache) and its options; who names
// the worker in errors.
func (st *workerState) startVisit(v visit, who string) (*aVisit, error) {
	timeout := time.Duration(v.TimeoutMs) * time.Millisecond
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	roots, err := st.rootsFor(v.CAFile)
	if err != nil {
		return nil, err
	}
	cacheSize := -1
	if v.StubCache {
		cacheSize = 0 // default size
	}
	res, kept, err := st.resolverFor(v, roots, cacheSize)
	if err != nil {
		return nil, err
	}
	a := &aVisit{res: res, keptRes: kept}
	a.ctx, a.cancel = context.WithTimeout(context.Background(), timeout)
	host, portStr, _ := net.SplitHostPort(v.Addr)
	port, _ := strconv.Atoi(portStr)
	if v.StubCache {
		if _, err := res.LookupService(a.ctx, host, port, nil); err != nil {
			a.close()
			return nil, fmt.Errorf("bench: %s: filling the stub cache: %w", who, err)
		}
	}
	from := dial.ZDataTXT
	if v.ZDataFrom != "" {
		from = dial.ZDataFrom(v.ZDataFrom)
	}
	a.o = dial.Options{
		Mode:         dial.Mode(v.Mode),
		ZDataFrom:    from,
		TLS:          &tls13.Config{RootCAs: roots, ServerName: host, Groups: clientGroups(v.PQ)},
		Resolver:     res,
		Request:      v.Request,
		ReplaySafe:   true,
		ReadResponse: v.ExpectLen,
		Out:          &a.got,
		Memory:       dial.NewMemory(),
		ECH:          dial.ECHMode(v.ECH),
	}
	if v.OCSP {
		// ZTLS waits for the OCSP answer before it uses the Z-data: the
		// wait is what ztls-ocsp measures (the Z-data budget bounds the
		// DNS answers, not their checks).
		a.o.OCSP = prevalidate.OCSPHardFail
	}
	return a, nil
}

func (a *aVisit) close() {
	a.cancel()
	if !a.keptRes {
		a.res.Close()
	}
}

// connect makes the measured connection with cache and reports it; r is
// nil when it failed.
func (a *aVisit) connect(cache *prevalidate.Cache, addr string) (*dial.Result, *workerResult) {
	a.o.Cache = cache
	r, err := dial.Connect(a.ctx, addr, a.o)
	if err != nil {
		return nil, &workerResult{Err: err.Error()}
	}
	r.Conn.Close()
	out := &workerResult{Report: r.Report, Response: a.got.Bytes()}
	if r.Report.Error != "" {
		out.Err = "bench: " + r.Report.Error
	}
	return r, out
}

// currentlyRealtime reports whether the calling thread runs under
// SCHED_FIFO, so the worker is asked to do the same.
func currentlyRealtime() (bool, error) {
	attr, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return false, err
	}
	return attr.Policy == unix.SCHED_FIFO, nil
}

func (e *engineContender) serviceLookups() {}
