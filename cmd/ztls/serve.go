package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/metrics"
	"github.com/ztls-project/ztls/server"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
	"github.com/ztls-project/ztls/zdata/redisreg"
	"github.com/ztls-project/ztls/ztlshttp"
)

type serveFlags struct {
	tls        tlsFlags
	listen     string
	echo       bool
	respond    string
	maxEarly   uint32
	clientAuth string
	timeout    time.Duration
	verbose    bool
	backend    string
	zdataDir   string
	strike     string
	strikeFile string
	strikeTLS  strikeTLSFlags // --strike-register-ca, -cert, -key, -password-file
	window     time.Duration
	turbo      bool
	hsTimeout  time.Duration
	drain      time.Duration
	maxConns   int
	maxPerIP   int
	maxPerNet  int
	keyPool    int
	skew       time.Duration
	metrics    string
	log        *slog.Logger // made by runServe from --log-format and --log-level
	rotate     bool
	publish    publishTarget
}

func init() {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR (--cert FILE --key FILE | --zdata DIR) [--echo | --respond TEXT | --backend URL]",
		Short: "Run a TLS 1.3 server",
		Long: `Run a TLS 1.3 server on ADDR.

Each connection either echoes what it receives (--echo) or gets TEXT once
after its first request (--respond; the default answers "hello from ztls").
With --early-data N the server issues tickets that allow N bytes of 0-RTT
data; a request sent early is answered in the server's first flight
(0.5-RTT), before the client's Finished arrives. Replayed 0-RTT
ClientHellos are refused (RFC 8446, Section 8); after a restart, early
data that may predate it is refused for up to two --early-window.
Early data is unauthenticated: with --client-auth request or require it
is never acted on, and the client sends its request after the handshake.
Servers sharing Z-data keys must share --strike-register (docs/security.md).

With --zdata DIR the server also takes ZTLS first flights; without --cert and
--key it serves the certificate and key DIR was made with. It keeps DIR's keys
current itself (--rotate) and can push the records to DNS (--publish).

Signals: SIGHUP reloads the certificate, client CAs, CRLs and the Z-data for the
handshakes that start from then on; SIGTERM or SIGINT stops accepting, lets the
connections in flight finish within --drain-timeout, saves the anti-replay
memory and exits (a second signal stops at once).`,
		Example: `  # a test certificate, then a server answering every request
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj /CN=localhost -addext subjectAltName=DNS:localhost \
      -keyout key.pem -out cert.pem
  ztls serve --listen 127.0.0.1:8443 --cert cert.pem --key key.pem --respond 'hi'

  # echo server that accepts 16 KiB of 0-RTT data and requires client certificates
  ztls serve --listen 127.0.0.1:8443 --cert cert.pem --key key.pem --echo \
      --early-data 16384 --client-auth require --client-ca ca.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runServe(&f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8443", "address to listen on")
	fs.BoolVar(&f.echo, "echo", false, "echo every message back")
	fs.StringVar(&f.respond, "respond", "", "answer each connection's first request with TEXT, then close")
	fs.Uint32Var(&f.maxEarly, "early-data", 0, "accept up to N bytes of 0-RTT early data on resumed connections (0: off)")
	fs.StringVar(&f.clientAuth, "client-auth", "none", "client certificates: none, request, require (verified against --client-ca)")
	fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "idle timeout per connection")
	fs.DurationVar(&f.hsTimeout, "handshake-timeout", 10*time.Second, "time a connection has to complete its handshake (a client that sends nothing is closed after it)")
	fs.DurationVar(&f.drain, "drain-timeout", 30*time.Second, "on SIGTERM or SIGINT: how long connections in flight may take to finish before they are cut (keep it below the unit's TimeoutStopSec; a second signal stops at once)")
	fs.IntVar(&f.maxConns, "max-conns", 4096, "most connections held at once; more wait in the kernel's backlog (0: no limit; the process may hold at most its open-files limit)")
	fs.IntVar(&f.maxPerIP, "max-conns-per-ip", 256, "most connections held at once from one IP address; more are closed at once (0: no limit)")
	fs.IntVar(&f.maxPerNet, "max-conns-per-net", 1024, "most connections held at once from one client network, a /24 for IPv4 and a /56 for IPv6 (a host with many addresses would otherwise take --max-conns-per-ip on each); more are closed at once (0: no limit)")
	fs.IntVar(&f.keyPool, "keyshare-pool", 0, "keep up to N x25519 keys made ahead of need, refilled in the background, so a handshake only computes its shared secret (0: off; each key serves one handshake)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print one line per connection")
	fs.StringVar(&f.backend, "backend", "", "reverse-proxy HTTP/1.1 to URL (early requests get Early-Data: 1; a 425 answer is retried after the handshake)")
	fs.StringVar(&f.strike, "strike-register", "", "share 0-RTT and ZTLS anti-replay state with a fleet: redis://[USER[:PASSWORD]@]HOST:PORT[/DB], rediss://... (TLS), redis-sentinel://[USER@]HOST:PORT[,HOST:PORT...]/MASTER or redis-cluster://[USER@]HOST:PORT[,HOST:PORT...] (a password in the URL shows in ps: prefer --strike-register-password-file, --strike-register-file or $"+envRedisPassword+"); required when servers share Z-data keys (a --seed-file fleet, or one Z-data directory). Redis must run with maxmemory-policy noeviction; it fails closed: early data is refused while Redis is unreachable, and after it lost data (docs/security.md)")
	fs.StringVar(&f.strikeFile, "strike-register-file", "", "read the --strike-register URL (with its password) from FILE instead, so it does not show in ps; FILE must not be readable by group or others (chmod 600)")
	f.strikeTLS.register(fs)
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9180): handshakes by mode, ZTLS accepted/rejected by reason, ECH accepted/rejected, early bytes, strike-register errors, TurboTLS datagrams, Z-data key expiry, connections open and closed by --max-conns-per-ip and --max-conns-per-net, the certificate's expiry, build info; /healthz (alive) and /readyz (503 until serving, and while no Z-data key is live or the --strike-register Redis cannot be used)")
	fs.BoolVar(&f.rotate, "rotate", true, "with --zdata: add each period's Z-data key before it is due and drop expired ones (what 'ztls zdata rotate' does from cron); one process per directory rotates, the others reload")
	fs.StringVar(&f.publish.server, "publish", "", "with --zdata: push the Z-data records to this RFC 2136 primary (HOST[:PORT]) at start and whenever they change (see 'ztls zdata publish')")
	fs.StringVar(&f.publish.zone, "publish-zone", "", "with --publish: the zone holding the service's names")
	fs.StringVar(&f.publish.keyName, "tsig-name", "", "with --publish: TSIG key name")
	fs.StringVar(&f.publish.keySecret, "tsig-secret", "", "with --publish: TSIG secret, base64")
	fs.StringVar(&f.publish.keyAlg, "tsig-algorithm", "hmac-sha256", "with --publish: TSIG algorithm")
	fs.DurationVar(&f.publish.ttl, "publish-ttl", 5*time.Minute, "with --publish: largest TTL (the records' TTL also ends before they expire)")
	f.publish.https.register(fs, "with --publish: also publish")
	fs.DurationVar(&f.skew, "max-clock-skew", time.Second, "with --strike-register: the most the clocks of the fleet's servers may differ (keep them within it with NTP); added to every anti-replay entry's life")
	fs.DurationVar(&f.window, "early-window", 10*time.Second, "freshness window for 0-RTT and ZTLS early data (RFC 8446, Section 8)")
	fs.StringVar(&f.zdataDir, "zdata", "", "serve ZTLS with the Z-data keys in DIR (made by 'ztls zdata new'); rotation is picked up without restart")
	fs.BoolVar(&f.turbo, "turbo", false, "also serve TurboTLS on UDP (same port number): first flights over UDP while TCP connects; publish the port with 'ztls zdata publish --turbo-port', 'ztls dns serve --zdata DIR --turbo' or the line 'ztls zdata new --turbo-port' prints")
	f.tls.register(fs, true)
	rootCmd.AddCommand(cmd)
}

// serving is one run of 'ztls serve': what runServe assembles, and what
// it undoes when it stops (in reverse order).
type serving struct {
	f     *serveFlags
	log   *slog.Logger
	zdir  *zdata.Dir
	ech   echKeeper // the Z-data directory's ECH keys
	proxy *ztlshttp.Proxy
	cur   atomic.Pointer[tls13.Config] // swapped on SIGHUP
	tsrv  *turbo.TLSServer
	mt    *metrics.Registry
	srv   *server.Server
	reg   *redisreg.Register // the fleet's Redis (--strike-register), nil without
	undo  []func()
}

// runServe: check the flags, build the TLS configuration and its
// anti-replay register, listen, start what runs beside the server
// (Z-data keeper, TurboTLS, metrics, SIGHUP reload), serve until a
// signal, then drain.
func runServe(f *serveFlags) (err error) {
	s := &serving{f: f}
	defer s.cleanup()
	if s.log, err = newLogger(os.Stderr); err != nil {
		return err
	}
	f.log = s.log
	if err := s.checkFlags(); err != nil {
		return err
	}
	if err := s.loadZData(); err != nil {
		return err
	}
	cfg, err := s.tlsConfig()
	if err != nil {
		return err
	}
	s.checkCertificate(cfg, "")
	if err := s.antiReplay(cfg); err != nil {
		return err
	}
	s.cur.Store(cfg)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	s.undo = append(s.undo, func() { ln.Close() })
	s.log.Info("serving TLS 1.3 on", "addr", ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// TurboTLS's UDP socket is bound before "ZTLS on" says the server is
	// ready: a flight sent then would otherwise meet a closed port.
	if err := s.startTurbo(ln.Addr().String()); err != nil {
		return err
	}
	if err := s.keepZData(ctx, ln.Addr().(*net.TCPAddr).Port); err != nil {
		return err
	}
	if err := s.newServer(); err != nil {
		return err
	}
	if err := s.serveMetrics(ctx); err != nil {
		return err
	}
	defer onHUP(ctx, s.reload)()
	return s.serveUntilSignal(ctx, stop, ln)
}

// cleanup undoes what runServe set up, last first.
func (s *serving) cleanup() {
	for i := len(s.undo) - 1; i >= 0; i-- {
		s.undo[i]()
	}
}

// checkFlags refuses what no server could run with, before anything starts.
func (s *serving) checkFlags() error {
	f := s.f
	if (f.echo && f.respond != "") || (f.backend != "" && (f.echo || f.respond != "")) {
		return errors.New("choose one of --echo, --respond and --backend")
	}
	for _, l := range []struct {
		flag string
		n    int
	}{{"--max-conns", f.maxConns}, {"--max-conns-per-ip", f.maxPerIP}, {"--max-conns-per-net", f.maxPerNet}} {
		if l.n < 0 {
			return fmt.Errorf("%s %d: want 0 (no limit) or more", l.flag, l.n)
		}
	}
	if f.keyPool < 0 {
		return fmt.Errorf("--keyshare-pool %d: want 0 (off) or more", f.keyPool)
	}
	if f.hsTimeout <= 0 {
		return fmt.Errorf("--handshake-timeout %v: want more than 0", f.hsTimeout)
	}
	if f.drain < 0 {
		return fmt.Errorf("--drain-timeout %v: want 0 (cut connections at once) or more", f.drain)
	}
	if f.backend != "" {
		u, err := url.Parse(f.backend)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--backend: want http://HOST:PORT[/PATH], got %q", f.backend)
		}
		s.proxy = &ztlshttp.Proxy{Backend: u, Timeout: f.timeout}
		if f.verbose {
			s.proxy.Logf = func(format string, args ...any) { s.log.Info(fmt.Sprintf(format, args...)) }
		}
	}
	if err := f.publish.check(); err != nil {
		return err
	}
	if err := f.publish.https.check(); err != nil {
		return err
	}
	if f.publish.set() && f.zdataDir == "" {
		return errors.New("--publish pushes the Z-data records of --zdata DIR: give --zdata")
	}
	switch f.clientAuth {
	case "none", "", "request", "require":
	default:
		return fmt.Errorf("--client-auth: want none, request or require, got %q", f.clientAuth)
	}
	return nil
}

// checkCertificate says, at start and at each SIGHUP (when is "SIGHUP:
// "), when the certificate is outside its validity. Like nginx, the server
// starts all the same, with an error logged and the expiry exported
// (ztls_certificate_expiry_timestamp_seconds): refusing would turn a
// restart into an outage for the clients that pin or do not check the
// date, and a renewed certificate is then taken with SIGHUP, no restart.
// It expires soon in the last tenth of its lifetime (9 days of 90, 14
// hours of 6 days): automated renewal, due at a third, has failed for a
// while.
func (s *serving) checkCertificate(cfg *tls13.Config, when string) {
	if len(cfg.Certificates) == 0 || cfg.Certificates[0].Leaf == nil {
		return
	}
	leaf, file, now := cfg.Certificates[0].Leaf, s.f.tls.cert, clock.Now()
	notBefore, notAfter := leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339)
	switch {
	case now.After(leaf.NotAfter):
		s.log.Error(when+"the certificate has expired: clients that check it refuse every handshake (ZTLS and TLS 1.3); renew it, then send SIGHUP",
			"file", file, "not_after", notAfter, "expired_for", now.Sub(leaf.NotAfter).Round(time.Second).String())
	case now.Before(leaf.NotBefore):
		s.log.Error(when+"the certificate is not valid yet: clients that check it refuse every handshake until its not_before (is this host's clock right?)",
			"file", file, "not_before", notBefore, "valid_in", leaf.NotBefore.Sub(now).Round(time.Second).String())
	case leaf.NotAfter.Sub(now) < leaf.NotAfter.Sub(leaf.NotBefore)/10:
		s.log.Warn(when+"the certificate expires soon: renew it, then send SIGHUP", "file", file, "not_after", notAfter)
	}
}

// loadZData reads --zdata DIR; without --cert and --key the server
// presents the certificate the Z-data is signed with.
func (s *serving) loadZData() error {
	f := s.f
	if f.zdataDir == "" {
		return nil
	}
	d, err := zdata.LoadDir(f.zdataDir)
	if err != nil {
		return err
	}
	s.zdir = d
	if f.tls.cert == "" && f.tls.key == "" {
		f.tls.cert, f.tls.key = d.Config.Cert, d.Config.Key
		if !filepath.IsAbs(f.tls.cert) {
			f.tls.cert, f.tls.key = filepath.Join(d.Path, f.tls.cert), filepath.Join(d.Path, f.tls.key)
		}
	}
	// A NAT or load balancer may forward the Z-data's port here, so a
	// different port is said loudly, not refused.
	if err := checkServePort(d.Config.Port, f.listen); err != nil {
		s.log.Warn(err.Error())
	}
	if err := checkServeALPN(d.Config.ALPN, f.tls.alpn, d.Path); err != nil {
		s.log.Warn(err.Error())
	}
	return nil
}

// checkServeALPN says why ZTLS offers will be rejected for ALPN: the
// server takes a ZTLS offer only when the ALPN protocol it negotiates is
// the Z-data's alpn= ("" for none), and it negotiates none without --alpn.
func checkServeALPN(zdataALPN string, serverALPN []string, dir string) error {
	switch {
	case zdataALPN != "" && !slices.Contains(serverALPN, zdataALPN):
		have := "no --alpn"
		if len(serverALPN) > 0 {
			have = "--alpn " + strings.Join(serverALPN, ",")
		}
		return fmt.Errorf("the Z-data of %s is for ALPN %q, which this server (%s) never negotiates: every ZTLS offer will be rejected (negotiated ALPN is not the Z-data's) and clients fall back to TLS 1.3; add --alpn %s, or make Z-data for the server's protocol ('ztls zdata new --alpn ...')",
			dir, zdataALPN, have, strings.Join(append([]string{zdataALPN}, slices.DeleteFunc(slices.Clone(serverALPN), func(p string) bool { return p == zdataALPN })...), ","))
	case zdataALPN == "" && len(serverALPN) > 0:
		return fmt.Errorf("the Z-data of %s names no ALPN protocol, but this server negotiates %s: a ZTLS offer from a client that offers one of them is rejected (negotiated ALPN is not the Z-data's \"\"); make Z-data for the protocol ('ztls zdata new --alpn %s'), or serve without --alpn",
			dir, strings.Join(serverALPN, ","), serverALPN[0])
	}
	return nil
}

// tlsConfig is the server's configuration from the flags, without its
// anti-replay register.
func (s *serving) tlsConfig() (*tls13.Config, error) {
	f := s.f
	cfg, err := f.tls.config(true)
	if err != nil {
		return nil, err
	}
	if s.zdir != nil {
		cfg.ZData = s.zdir.Keyring
		cfg.ECHKeySet = &s.ech.set // filled by the Z-data keeper (zdata_ech.go)
	}
	cfg.MaxEarlyData = f.maxEarly
	cfg.EarlyDataWindow = f.window
	if f.keyPool > 0 {
		// One pool for the process: a SIGHUP reload clones the Config
		// and keeps it.
		cfg.KeySharePool = tls13.NewKeySharePool(f.keyPool)
	}
	// One set of rotating ticket keys for the process, so that tickets
	// outlive a SIGHUP reload (a Config makes its own random key
	// otherwise), and a key stolen from memory opens only recent ones.
	cfg.TicketKeys = tls13.NewTicketKeys(time.Hour, nil)
	switch f.clientAuth {
	case "request":
		cfg.ClientAuth = tls13.VerifyClientCertIfGiven
	case "require":
		cfg.ClientAuth = tls13.RequireAndVerifyClientCert
	}
	if cfg.ClientAuth != tls13.NoClientCert && cfg.ClientCAs == nil {
		return nil, errors.New("--client-auth needs --client-ca FILE to verify client certificates against")
	}
	return cfg, nil
}

// antiReplay gives cfg its strike register: shared in Redis
// (--strike-register), this directory's own (--zdata alone), or one in
// memory for 0-RTT.
func (s *serving) antiReplay(cfg *tls13.Config) error {
	switch f := s.f; {
	case f.strike != "" || f.strikeFile != "":
		return s.sharedRegister(cfg)
	case s.zdir != nil:
		return s.ownRegister(cfg)
	case f.maxEarly > 0:
		// Tickets are sealed with a key made at start: no ticket, and so
		// no 0-RTT flight, predates this register.
		cfg.StrikeRegister = tls13.NewMemoryStrikeRegister(1<<20, clock.Now())
	}
	return nil
}

// ownRegister is the register of a server alone on its Z-data directory,
// continued from the state saved at the last clean stop.
func (s *serving) ownRegister(cfg *tls13.Config) error {
	zdir, window := s.zdir, s.f.window
	// Two servers holding the same Z-data keys with registers of their
	// own both accept one captured flight (docs/ztls-spec.md, Section 5).
	if zdir.Fleet() {
		return fmt.Errorf("%s holds a fleet seed: every server of the fleet derives the same Z-data keys, so they must share one anti-replay register; add --strike-register redis://HOST:PORT (the same for every member)", zdir.Path)
	}
	sv, err := zdir.ServeAlone(1<<20, clock.Now())
	if err != nil {
		return fmt.Errorf("%v: two servers with the same Z-data keys and separate anti-replay registers would both accept a replayed early request; share one register (--strike-register redis://HOST:PORT on every server) or give each server its own Z-data directory", err)
	}
	// Saved when the server stops cleanly (after its connections), so
	// the next start continues this memory.
	s.undo = append(s.undo, func() {
		if err := sv.Close(clock.Now()); err != nil {
			s.log.Error("saving the anti-replay register failed: the next start refuses early data that may predate it", "err", err, "for_up_to", 2*window)
		}
	})
	cfg.StrikeRegister = sv.Register
	switch since := sv.Register.Since(); {
	case since.IsZero():
		s.log.Info("anti-replay memory is complete (no server took early data under these keys without it): early data is taken at once", "dir", zdir.Path)
	case clock.Since(since) > 2*window:
		s.log.Info("anti-replay memory continues from the last clean stop", "since", since.UTC().Format(time.RFC3339))
	default:
		s.log.Warn("the last server on this directory did not stop cleanly: early data that may predate this start is refused", "dir", zdir.Path, "for_up_to", 2*window)
	}
	return nil
}

// sharedRegister is the fleet's register in Redis.
func (s *serving) sharedRegister(cfg *tls13.Config) error {
	r, err := s.f.redisTarget()
	if err != nil {
		return err
	}
	r.opts.MaxClockSkew = s.f.skew
	reg, err := redisreg.New(r.opts)
	if err != nil {
		return err
	}
	s.log.Info("anti-replay register shared in Redis", "url", r.shown, "mode", r.opts.Mode.String(), "tls", r.tlsShown, "auth", r.auth)
	s.undo = append(s.undo, func() { reg.Close() })
	cfg.StrikeRegister, s.reg = reg, reg
	if err := s.checkRegister(reg, r.shown); err != nil {
		return err
	}
	if s.zdir == nil {
		return nil
	}
	// Held shared while this server runs: a server with a private
	// register on the directory is refused meanwhile, and one already
	// running refuses this one. What this server accepts is in Redis, so
	// a server that later serves the directory alone does not trust an
	// older saved state.
	release, err := s.zdir.ShareServing()
	if errors.Is(err, zdata.ErrDirServed) {
		return fmt.Errorf("%v: it keeps its own anti-replay register, so it would accept an early request this fleet's register has seen, and this server one that only it has seen; restart it with the same --strike-register, or give this server its own Z-data directory", err)
	}
	if err != nil {
		return err
	}
	s.undo = append(s.undo, release)
	return nil
}

// checkRegister tries the register's Redis at start, so that what would
// refuse every early flight is said now rather than found at the first
// one. None stops the server: a register that cannot vouch costs early
// data, never the service (a password rotated in Redis must not take a
// restarting fleet down). A refused login is an error (it does not pass
// by itself: the server must restart with the right password); an
// unreachable Redis or an evicting maxmemory-policy is a warning (early
// data is taken once Redis is fixed, without a restart). A Redis without the register's memory (new,
// restarted, flushed) starts the warm-up now, and the log says when it
// ends.
func (s *serving) checkRegister(reg *redisreg.Register, shown string) error {
	err := reg.Ready()
	switch {
	case errors.Is(err, redisreg.ErrAuth):
		s.log.Error("the strike register's Redis refused the login: early data is refused until the server restarts with the password Redis expects (in the URL, --strike-register-password-file or $"+envRedisPassword+") and the user it has, if any; connections are served, as TLS 1.3",
			"url", shown, "err", err)
		return nil
	case errors.Is(err, redisreg.ErrEvictionPolicy):
		// Check names the policy.
	case err != nil:
		s.log.Warn("the strike register's Redis cannot be used: early data is refused until it can (connections are served, as TLS 1.3)", "url", shown, "err", err)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := reg.Check(ctx)
	if err != nil {
		s.log.Warn("the strike register's Redis cannot be used: early data is refused until it can (connections are served, as TLS 1.3)", "url", shown, "err", err)
		return nil
	}
	if rep.Policy != "noeviction" {
		s.log.Warn("the strike register's Redis may evict its entries, so early data is refused until it may not: run CONFIG SET maxmemory-policy noeviction on it (and set maxmemory-policy noeviction in redis.conf)",
			"url", shown, "maxmemory-policy", rep.Policy)
		return nil
	}
	if _, complete := rep.MemorySince(); !complete {
		// What the first flight would do: record that Redis's memory
		// starts now. The key is random, so it is new.
		var key [32]byte
		rand.Read(key[:])
		now := clock.Now()
		reg.CheckAndInsert(key[:], now, now, now.Add(time.Second))
		if rep, err = reg.Check(ctx); err != nil {
			s.log.Warn("the strike register's Redis cannot be used: early data is refused until it can (connections are served, as TLS 1.3)", "url", shown, "err", err)
			return nil
		}
	}
	since, complete := rep.MemorySince()
	if !complete {
		s.log.Warn("the strike register's Redis lost its memory again while it was being recorded: early data is refused until a flight records it", "url", shown)
		return nil
	}
	// A flight made at t may have been taken first at t - W; the register
	// vouches for it once that is after since plus the fleet's skew.
	end := since.Add(s.f.window + s.f.skew)
	if wait := end.Sub(clock.Now()); wait > 0 {
		s.log.Warn("the strike register's Redis has remembered flights only since "+since.UTC().Format(time.RFC3339)+" (new, restarted or flushed): early data is refused during its warm-up",
			"url", shown, "until", end.UTC().Format(time.RFC3339), "for", wait.Round(time.Second).String())
		return nil
	}
	s.log.Info("the strike register's Redis is ready: early data is taken", "url", shown, "memory_since", since.UTC().Format(time.RFC3339))
	return nil
}

// keepZData rotates (when this process holds the claim), reloads and
// publishes the Z-data while the server runs; port is the TCP port, at
// whose number TurboTLS is advertised.
func (s *serving) keepZData(ctx context.Context, port int) error {
	zdir := s.zdir
	if zdir == nil {
		return nil
	}
	keeper := &zdataKeeper{dir: zdir, pub: s.f.publish, log: s.log, ech: &s.ech}
	keeper.pub.https.turboAtServicePort = s.f.turbo
	if s.f.rotate && !zdir.Fleet() { // a fleet derives its keys: nothing to write
		keeper.claim = zdata.NewRotationClaim(zdir)
		s.undo = append(s.undo, keeper.claim.Release)
		took, err := keeper.claim.Try(clock.Now())
		if err != nil {
			return err
		}
		if keeper.rotate = took; !took {
			s.log.Info("another process rotates the Z-data: this server reloads what it writes, and takes the rotation over if that process stops", "dir", zdir.Path)
		}
	}
	s.serveBFE(ctx, keeper)
	keeper.tick(ctx, clock.Now()) // before serving: a key due now exists
	s.log.Info("ZTLS on", "host", zdir.Config.Host, "port", zdir.Config.Port, "dir", zdir.Path, "live_keys", len(zdir.Keyring.Live(clock.Now())))
	go every(ctx, 10*time.Second, func() { keeper.tick(ctx, clock.Now()) })
	return nil
}

// startTurbo serves TurboTLS on the UDP port of addr's number (--turbo);
// without --backend an early request is answered inside the UDP flight.
func (s *serving) startTurbo(addr string) error {
	if !s.f.turbo {
		return nil
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("--turbo: %w", err)
	}
	var answer turbo.AnswerFunc
	if s.proxy == nil {
		echo, respond := s.f.echo, s.respondText()
		answer = func(early []byte, _ tls13.ConnectionState) []byte {
			if echo {
				return early
			}
			return []byte(respond)
		}
	}
	s.tsrv = turbo.NewTLSServer(s.cur.Load(), answer, turbo.Config{})
	s.tsrv.LinkTimeout = s.f.hsTimeout
	s.undo = append(s.undo, func() { s.tsrv.Close() })
	go s.tsrv.ServeUDP(pc)
	s.log.Info("TurboTLS on UDP", "addr", pc.LocalAddr().String())
	return nil
}

// respondText is what --respond answers (its default without --echo).
func (s *serving) respondText() string {
	if !s.f.echo && s.f.respond == "" {
		return "hello from ztls\n"
	}
	return s.f.respond
}

// newServer makes the server that accepts the connections.
func (s *serving) newServer() error {
	f := s.f
	if f.metrics != "" {
		s.mt = metrics.New().TLSServer()
		if s.reg != nil {
			strikeMetrics(s.mt, s.reg)
		}
	}
	cfg := server.Config{
		TLS:              s.cur.Load,
		HandshakeTimeout: f.hsTimeout,
		Limits:           server.Limits{Max: f.maxConns, PerSource: f.maxPerIP, PerNetwork: f.maxPerNet},
		Log:              s.log,
		LogConns:         f.verbose,
	}
	if s.tsrv != nil {
		cfg.Turbo = s.tsrv
	}
	if s.mt != nil {
		cfg.Metrics = s.mt
	}
	if s.proxy != nil {
		cfg.Handler = proxyConn(s.proxy, f.verbose, s.log, s.mt)
	} else {
		cfg.Handler = answerConn(f.echo, s.respondText(), f.timeout, s.mt)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	s.srv = srv
	return nil
}

// serveMetrics serves --metrics: the handshake counters, the
// connections held and refused, TurboTLS and Z-data.
func (s *serving) serveMetrics(ctx context.Context) error {
	mt, srv, zdir := s.mt, s.srv, s.zdir
	if mt == nil {
		return nil
	}
	mt.GaugeFunc("ztls_conns_open", "TCP connections held now.", func() float64 { return float64(srv.Stats().Open) })
	mt.CounterFunc("ztls_conns_refused_per_ip_total", "TCP connections closed at accept: their address held --max-conns-per-ip.",
		func() float64 { return float64(srv.Stats().RefusedSource) })
	mt.CounterFunc("ztls_conns_refused_per_net_total", "TCP connections closed at accept: their network (/24, /56) held --max-conns-per-net.",
		func() float64 { return float64(srv.Stats().RefusedNetwork) })
	mt.GaugeFunc("ztls_certificate_expiry_timestamp_seconds", "When the served certificate expires (its notAfter), in seconds since the Unix epoch; a SIGHUP reload moves it.",
		func() float64 {
			if c := s.cur.Load().Certificates; len(c) > 0 && c[0].Leaf != nil {
				return float64(c[0].Leaf.NotAfter.Unix())
			}
			return 0
		})
	if zdir != nil {
		// Labelled by service (host:port) as dns serve's, which serves
		// the Z-data of several.
		service := net.JoinHostPort(zdir.Config.Host, fmt.Sprint(zdir.Config.Port))
		mt.GaugeFunc("ztls_zdata_live_keys", "Z-data keys live now (0: ZTLS clients fall back to TLS 1.3).",
			func() float64 { return float64(len(zdir.Keyring.Live(clock.Now()))) }, "service", service)
		mt.GaugeFunc("ztls_zdata_expiry_seconds", "Seconds until the last live Z-data key expires (0: none live).",
			func() float64 { return zdataExpiry(zdir, clock.Now()).Seconds() }, "service", service)
	}
	if s.tsrv != nil {
		turboMetrics(mt, s.tsrv.Server)
	}
	a, err := mt.Serve(ctx, s.f.metrics)
	if err != nil {
		return fmt.Errorf("--metrics: %w", err)
	}
	s.log.Info("metrics on", "url", "http://"+a.String()+"/metrics")
	return nil
}

// reload is SIGHUP: the certificate (and CAs and CRLs) for the handshakes
// that start from then on, and the Z-data keys now.
func (s *serving) reload() {
	n, err := reloadServerConfig(s.f, s.cur.Load())
	if err != nil {
		s.log.Error("SIGHUP: keeping the current certificate", "err", err)
	} else {
		s.cur.Store(n)
		if s.tsrv != nil {
			s.tsrv.SetConfig(n)
		}
		leaf := n.Certificates[0].Leaf
		s.log.Info("SIGHUP: reloaded the certificate", "subject", leaf.Subject.CommonName, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		s.checkCertificate(n, "SIGHUP: ")
	}
	if s.zdir == nil {
		return
	}
	if _, err := s.zdir.Reload(); err != nil {
		s.log.Error("SIGHUP: Z-data", "err", err)
	} else {
		s.log.Info("SIGHUP: reloaded Z-data", "dir", s.zdir.Path, "live_keys", len(s.zdir.Keyring.Live(clock.Now())))
	}
}

// ready is /readyz's check once the listeners are up: the server takes
// connections, and takes ZTLS early data only with live Z-data keys and,
// with --strike-register, a Redis that is reachable, accepts the login and
// does not evict (else every early flight is refused: a load balancer
// should prefer another server).
func (s *serving) ready() error {
	if s.zdir != nil && len(s.zdir.Keyring.Live(clock.Now())) == 0 {
		return fmt.Errorf("no live Z-data keys in %s", s.zdir.Path)
	}
	if s.reg != nil {
		if err := s.reg.Ready(); err != nil {
			return fmt.Errorf("strike register: %w", err)
		}
	}
	return nil
}

// serveUntilSignal serves ln until SIGTERM or SIGINT, then stops
// accepting and lets the connections in flight finish for at most
// --drain-timeout (idle keep-alive connections are closed at once); a
// second signal cuts them at once. The anti-replay register is saved
// after (cleanup).
func (s *serving) serveUntilSignal(ctx context.Context, stopSignals func(), ln net.Listener) error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()
	s.mt.SetReady(s.ready)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stopSignals()
	drain, cancel := context.WithTimeout(context.Background(), s.f.drain)
	defer cancel()
	again, stopAgain := signal.NotifyContext(drain, os.Interrupt, syscall.SIGTERM)
	defer stopAgain()
	s.log.Info("stopping: draining connections", "open_conns", s.srv.Open(), "drain_timeout", s.f.drain.String())
	s.srv.Shutdown(again) // logs the connections it cut
	<-served
	return nil
}

// proxyConn serves one connection of --backend: what is left of the
// handshake time bounds the rest of the handshake in the proxy (the
// client's Finished), not its idle --timeout; a connection waiting for
// its next request is idle, closed at once when the server stops; mt
// (may be nil) counts the early bytes the proxy reads.
func proxyConn(proxy *ztlshttp.Proxy, verbose bool, log *slog.Logger, mt *metrics.Registry) server.Handler {
	return func(c *server.Conn) {
		p := *proxy
		if mt != nil {
			p.OnEarlyData = mt.EarlyBytes
		}
		p.HandshakeTimeout = time.Until(c.HandshakeDeadline)
		p.OnIdle = func(_ *tls13.Conn, idle bool) { c.SetIdle(idle) }
		if p.HandshakeTimeout <= 0 {
			return
		}
		if err := p.ServeConnContext(c.Context(), c.Conn); err != nil && verbose {
			log.Info("connection ended", "remote", c.RemoteAddr().String(), "err", err)
		}
	}
}

// answerConn serves one connection of --echo or --respond: a request that
// came as 0-RTT data is answered at once, in the server's first flight
// (0.5-RTT); mt (may be nil) counts the early bytes.
func answerConn(echo bool, respond string, idle time.Duration, mt *metrics.Registry) server.Handler {
	return func(c *server.Conn) {
		answered := c.EarlyAnswered
		// Small: an idle connection waits holding it (the echo reads
		// and writes in pieces this size).
		buf := make([]byte, 2<<10)
		for {
			n, err := c.ReadEarlyData(buf)
			mt.EarlyBytes(n)
			if n > 0 {
				if echo {
					c.Write(buf[:n])
				} else if !answered {
					c.Write([]byte(respond))
					answered = true
				}
			}
			if err != nil {
				break
			}
		}
		if c.FinishHandshake() != nil {
			return
		}
		c.SetDeadline(time.Now().Add(idle))
		if echo {
			io.CopyBuffer(struct{ io.Writer }{c}, struct{ io.Reader }{c}, buf)
			return
		}
		if !answered {
			if n, err := c.Read(buf); n == 0 && err != nil {
				return
			}
			c.Write([]byte(respond))
		}
		c.CloseWrite()
	}
}

// reloadServerConfig reads the certificate, key, client CAs and CRLs
// again and returns a copy of cur with them; everything else (Z-data
// keys, strike register, ticket key, limits) is cur's.
func reloadServerConfig(f *serveFlags, cur *tls13.Config) (*tls13.Config, error) {
	fresh, err := f.tls.config(true)
	if err != nil {
		return nil, err
	}
	if len(fresh.Certificates) == 0 || fresh.Certificates[0].Leaf == nil {
		return nil, errors.New("no certificate loaded")
	}
	n := cur.Clone()
	n.Certificates, n.ClientCAs, n.Revocation = fresh.Certificates, fresh.ClientCAs, fresh.Revocation
	return n, nil
}
