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
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/internal/connlimit"
	"github.com/ztls-project/ztls/internal/metrics"
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
	window     time.Duration
	turbo      bool
	hsTimeout  time.Duration
	maxConns   int
	maxPerIP   int
	maxPerNet  int
	skew       time.Duration
	metrics    string
	log        *slog.Logger // made by runServe from --log-format and --log-level
	rotate     bool
	publish    publishTarget
}

func init() {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve --listen ADDR --cert FILE --key FILE [--echo | --respond TEXT]",
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
Servers sharing Z-data keys must share --strike-register (docs/security.md).`,
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
	fs.IntVar(&f.maxConns, "max-conns", 4096, "most connections held at once; more wait in the kernel's backlog (0: no limit; the process may hold at most its open-files limit)")
	fs.IntVar(&f.maxPerIP, "max-conns-per-ip", 256, "most connections held at once from one IP address; more are closed at once (0: no limit)")
	fs.IntVar(&f.maxPerNet, "max-conns-per-net", 1024, "most connections held at once from one client network, a /24 for IPv4 and a /56 for IPv6 (a host with many addresses would otherwise take --max-conns-per-ip on each); more are closed at once (0: no limit)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print one line per connection")
	fs.StringVar(&f.backend, "backend", "", "reverse-proxy HTTP/1.1 to URL (early requests get Early-Data: 1; a 425 answer is retried after the handshake)")
	fs.StringVar(&f.strike, "strike-register", "", "share 0-RTT and ZTLS anti-replay state with a fleet: redis://HOST:PORT; required when servers share Z-data keys (a --seed-file fleet, or one Z-data directory). Redis must run with maxmemory-policy noeviction; it fails closed: early data is refused while Redis is unreachable, and after it lost data (docs/security.md)")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9180): handshakes by mode, ZTLS accepted/rejected by reason, early bytes, strike-register errors, TurboTLS datagrams, Z-data key expiry, connections open and closed by --max-conns-per-ip and --max-conns-per-net")
	fs.BoolVar(&f.rotate, "rotate", true, "with --zdata: add each period's Z-data key before it is due and drop expired ones (what 'ztls zdata rotate' does from cron); one process per directory rotates, the others reload")
	fs.StringVar(&f.publish.server, "publish", "", "with --zdata: push the Z-data records to this RFC 2136 primary (HOST[:PORT]) at start and whenever they change (see 'ztls zdata publish')")
	fs.StringVar(&f.publish.zone, "publish-zone", "", "with --publish: the zone holding the service's names")
	fs.StringVar(&f.publish.keyName, "tsig-name", "", "with --publish: TSIG key name")
	fs.StringVar(&f.publish.keySecret, "tsig-secret", "", "with --publish: TSIG secret, base64")
	fs.StringVar(&f.publish.keyAlg, "tsig-algorithm", "hmac-sha256", "with --publish: TSIG algorithm")
	fs.DurationVar(&f.publish.ttl, "publish-ttl", 5*time.Minute, "with --publish: largest TTL (the records' TTL also ends before they expire)")
	fs.DurationVar(&f.skew, "max-clock-skew", time.Second, "with --strike-register: the most the clocks of the fleet's servers may differ (keep them within it with NTP); added to every anti-replay entry's life")
	fs.DurationVar(&f.window, "early-window", 10*time.Second, "freshness window for 0-RTT and ZTLS early data (RFC 8446, Section 8)")
	fs.StringVar(&f.zdataDir, "zdata", "", "serve ZTLS with the Z-data keys in DIR (made by 'ztls zdata new'); rotation is picked up without restart")
	fs.BoolVar(&f.turbo, "turbo", false, "also serve TurboTLS on UDP (same port number): first flights over UDP while TCP connects; publish the port with 'ztls zdata publish --turbo-port', 'ztls dns serve --zdata DIR --turbo' or the line 'ztls zdata new --turbo-port' prints")
	f.tls.register(fs, true)
	rootCmd.AddCommand(cmd)
}

func runServe(f *serveFlags) error {
	log, err := newLogger(os.Stderr)
	if err != nil {
		return err
	}
	f.log = log
	if (f.echo && f.respond != "") || (f.backend != "" && (f.echo || f.respond != "")) {
		return errors.New("choose one of --echo, --respond and --backend")
	}
	var proxy *ztlshttp.Proxy
	if f.backend != "" {
		u, err := url.Parse(f.backend)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("--backend: want http://HOST:PORT[/PATH], got %q", f.backend)
		}
		proxy = &ztlshttp.Proxy{Backend: u, Timeout: f.timeout}
		if f.verbose {
			proxy.Logf = func(format string, args ...any) { log.Info(fmt.Sprintf(format, args...)) }
		}
	}
	if err := f.publish.check(); err != nil {
		return err
	}
	if f.publish.set() && f.zdataDir == "" {
		return errors.New("--publish pushes the Z-data records of --zdata DIR: give --zdata")
	}
	var zdir *zdata.Dir
	if f.zdataDir != "" {
		d, err := zdata.LoadDir(f.zdataDir)
		if err != nil {
			return err
		}
		zdir = d
		if f.tls.cert == "" && f.tls.key == "" {
			// The certificate the Z-data is signed with.
			f.tls.cert, f.tls.key = d.Config.Cert, d.Config.Key
			if !filepath.IsAbs(f.tls.cert) {
				f.tls.cert, f.tls.key = filepath.Join(d.Path, f.tls.cert), filepath.Join(d.Path, f.tls.key)
			}
		}
	}
	cfg, err := f.tls.config(true)
	if err != nil {
		return err
	}
	if zdir != nil {
		cfg.ZData = zdir.Keyring
		// A NAT or load balancer may forward the Z-data's port here, so
		// a different port is said loudly, not refused.
		if err := checkServePort(zdir.Config.Port, f.listen); err != nil {
			log.Warn(err.Error())
		}
	}
	if zdir != nil && f.strike == "" {
		// Two servers holding the same Z-data keys with registers of
		// their own both accept one captured flight (ZTLS-SPEC §5).
		if zdir.Fleet() {
			return fmt.Errorf("%s holds a fleet seed: every server of the fleet derives the same Z-data keys, so they must share one anti-replay register; add --strike-register redis://HOST:PORT (the same for every member)", zdir.Path)
		}
		sv, err := zdir.ServeAlone(1<<20, time.Now())
		if err != nil {
			return fmt.Errorf("%v: two servers with the same Z-data keys and separate anti-replay registers would both accept a replayed early request; share one register (--strike-register redis://HOST:PORT on every server) or give each server its own Z-data directory", err)
		}
		// Saved when the server stops cleanly (after its connections),
		// so the next start continues this memory.
		defer func() {
			if err := sv.Close(time.Now()); err != nil {
				log.Error("saving the anti-replay register failed: the next start refuses early data that may predate it", "err", err, "for_up_to", 2*f.window)
			}
		}()
		cfg.StrikeRegister = sv.Register
		switch since := sv.Register.Since(); {
		case since.IsZero():
			log.Info("anti-replay memory is complete (no server took early data under these keys without it): early data is taken at once", "dir", zdir.Path)
		case time.Since(since) > 2*f.window:
			log.Info("anti-replay memory continues from the last clean stop", "since", since.UTC().Format(time.RFC3339))
		default:
			log.Warn("the last server on this directory did not stop cleanly: early data that may predate this start is refused", "dir", zdir.Path, "for_up_to", 2*f.window)
		}
	} else if f.strike == "" && f.maxEarly > 0 {
		// Tickets are sealed with a key made at start: no ticket, and
		// so no 0-RTT flight, predates this register.
		cfg.StrikeRegister = tls13.NewMemoryStrikeRegister(1<<20, time.Now())
	}
	if f.strike != "" {
		u, err := url.Parse(f.strike)
		if err != nil || u.Scheme != "redis" || u.Host == "" {
			return fmt.Errorf("--strike-register: want redis://HOST:PORT, got %q", f.strike)
		}
		pass, _ := u.User.Password()
		reg, err := redisreg.New(redisreg.Options{Addr: u.Host, Password: pass, MaxClockSkew: f.skew})
		if err != nil {
			return err
		}
		defer reg.Close()
		cfg.StrikeRegister = reg
		if zdir != nil {
			// Held shared while this server runs: a server with a private
			// register on the directory is refused meanwhile, and one
			// already running refuses this one. What this server accepts
			// is in Redis, so a server that later serves the directory
			// alone does not trust an older saved state.
			release, err := zdir.ShareServing()
			if errors.Is(err, zdata.ErrDirServed) {
				return fmt.Errorf("%v: it keeps its own anti-replay register, so it would accept an early request this fleet's register has seen, and this server one that only it has seen; restart it with the same --strike-register, or give this server its own Z-data directory", err)
			}
			if err != nil {
				return err
			}
			defer release()
		}
	}
	cfg.MaxEarlyData = f.maxEarly
	cfg.EarlyDataWindow = f.window
	// One ticket key for the process, so that tickets outlive a SIGHUP
	// reload (a Config makes its own random key otherwise).
	if _, err := io.ReadFull(rand.Reader, cfg.TicketKey[:]); err != nil {
		return err
	}
	switch f.clientAuth {
	case "none", "":
	case "request":
		cfg.ClientAuth = tls13.VerifyClientCertIfGiven
	case "require":
		cfg.ClientAuth = tls13.RequireAndVerifyClientCert
	default:
		return fmt.Errorf("--client-auth: want none, request or require, got %q", f.clientAuth)
	}
	if cfg.ClientAuth != tls13.NoClientCert && cfg.ClientCAs == nil {
		return errors.New("--client-auth needs --client-ca FILE to verify client certificates against")
	}
	respond := f.respond
	if !f.echo && respond == "" {
		respond = "hello from ztls\n"
	}
	inner, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	ln := connlimit.New(inner, connlimit.Limits{Max: f.maxConns, PerSource: f.maxPerIP, PerNetwork: f.maxPerNet})
	log.Info("serving TLS 1.3 on", "addr", ln.Addr().String())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if zdir != nil {
		keeper := &zdataKeeper{dir: zdir, pub: f.publish, log: log}
		if f.turbo { // the advert of TurboTLS at the TCP port's number
			keeper.pub.turboPort = inner.Addr().(*net.TCPAddr).Port
		}
		if f.rotate && !zdir.Fleet() { // a fleet derives its keys: nothing to write
			release, ok, err := zdir.ClaimRotation()
			if err != nil {
				return err
			}
			if ok {
				defer release()
				keeper.rotate = true
			} else {
				log.Info("another process rotates the Z-data: this server reloads what it writes", "dir", zdir.Path)
			}
		}
		keeper.tick(ctx, time.Now()) // before serving: a key due now exists
		log.Info("ZTLS on", "host", zdir.Config.Host, "port", zdir.Config.Port, "dir", zdir.Path, "live_keys", len(zdir.Keyring.Live(time.Now())))
		go every(ctx, 10*time.Second, func() { keeper.tick(ctx, time.Now()) })
	}
	go func() { <-ctx.Done(); ln.Close() }()
	var mt *metrics.Registry
	if f.metrics != "" {
		mt = metrics.New()
		mt.GaugeFunc("ztls_conns_open", "TCP connections held now.", func() float64 { return float64(ln.Stats().Open) })
		mt.CounterFunc("ztls_conns_refused_per_ip_total", "TCP connections closed at accept: their address held --max-conns-per-ip.",
			func() float64 { return float64(ln.Stats().RefusedSource) })
		mt.CounterFunc("ztls_conns_refused_per_net_total", "TCP connections closed at accept: their network (/24, /56) held --max-conns-per-net.",
			func() float64 { return float64(ln.Stats().RefusedNetwork) })
		if zdir != nil {
			mt.GaugeFunc("ztls_zdata_live_keys", "Z-data keys live now (0: ZTLS clients fall back to TLS 1.3).",
				func() float64 { return float64(len(zdir.Keyring.Live(time.Now()))) })
			mt.GaugeFunc("ztls_zdata_expiry_seconds", "Seconds until the last live Z-data key expires (0: none live).",
				func() float64 { return zdataExpiry(zdir, time.Now()).Seconds() })
		}
	}
	var tsrv *turbo.TLSServer
	if f.turbo {
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			ln.Close()
			return fmt.Errorf("--turbo: %w", err)
		}
		var answer turbo.AnswerFunc
		if proxy == nil {
			// An early request is answered inside the UDP flight.
			answer = func(early []byte, _ tls13.ConnectionState) []byte {
				if f.echo {
					return early
				}
				return []byte(respond)
			}
		}
		tsrv = turbo.NewTLSServer(cfg, answer, turbo.Config{})
		tsrv.LinkTimeout = f.hsTimeout
		defer tsrv.Close()
		if mt != nil {
			turboMetrics(mt, tsrv.Server)
		}
		go tsrv.ServeUDP(pc)
		log.Info("TurboTLS on UDP", "addr", pc.LocalAddr().String())
	}
	if mt != nil {
		a, err := mt.Serve(ctx, f.metrics)
		if err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
		log.Info("metrics on", "url", "http://"+a.String()+"/metrics")
	}
	// SIGHUP reloads the certificate (and CAs and CRLs) for the
	// handshakes that start from then on, and the Z-data keys now.
	var cur atomic.Pointer[tls13.Config]
	cur.Store(cfg)
	defer onHUP(ctx, func() {
		n, err := reloadServerConfig(f, cur.Load())
		if err != nil {
			log.Error("SIGHUP: keeping the current certificate", "err", err)
		} else {
			cur.Store(n)
			if tsrv != nil {
				tsrv.SetConfig(n)
			}
			leaf := n.Certificates[0].Leaf
			log.Info("SIGHUP: reloaded the certificate", "subject", leaf.Subject.CommonName, "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
		if zdir != nil {
			if _, err := zdir.Reload(); err != nil {
				log.Error("SIGHUP: Z-data", "err", err)
			} else {
				log.Info("SIGHUP: reloaded Z-data", "dir", zdir.Path, "live_keys", len(zdir.Keyring.Live(time.Now())))
			}
		}
	})()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		raw, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Until its handshake is done a connection has
			// --handshake-timeout, whatever path it takes (slowloris).
			hsDeadline := time.Now().Add(f.hsTimeout)
			raw.SetDeadline(hsDeadline)
			var c *tls13.Conn
			answered, turboConn, earlyUDP := false, false, 0
			if tsrv != nil {
				sc, err := tsrv.Accept(raw)
				if err != nil {
					raw.Close()
					return
				}
				c, answered, turboConn = sc.Conn, sc.EarlyAnswered, sc.Turbo
				earlyUDP = len(sc.Early)
				c.SetDeadline(hsDeadline) // reading the link record cleared it
			} else {
				c = tls13.Server(raw, cur.Load())
			}
			if proxy != nil {
				ctx, cancel := context.WithDeadline(context.Background(), hsDeadline)
				err := c.HandshakeEarly(ctx)
				cancel()
				if err != nil {
					mt.HandshakeFailed()
				} else {
					mt.Flight(c.ConnectionState(), turboConn)
				}
				if f.verbose && err == nil {
					log.Info("connection", "remote", c.RemoteAddr().String(), "state", describeServerState(c.ConnectionState()))
				}
				// What is left of the handshake time bounds the rest of
				// the handshake in the proxy (the client's Finished),
				// not the proxy's idle --timeout.
				p := *proxy
				p.HandshakeTimeout = time.Until(hsDeadline)
				if err == nil && p.HandshakeTimeout > 0 {
					err = p.ServeConn(c)
				} else {
					c.Close()
				}
				if err != nil && f.verbose {
					log.Info("connection ended", "remote", raw.RemoteAddr().String(), "err", err)
				}
				return
			}
			mt.EarlyBytes(earlyUDP)
			serveConn(c, f, respond, answered, hsDeadline, mt, turboConn)
		}()
	}
}

// serveConn serves one connection; answered means its early request was
// already answered in a TurboTLS UDP flight.
// mt (which may be nil) counts the flight, the early bytes and failures.
func serveConn(c *tls13.Conn, f *serveFlags, respond string, answered bool, hsDeadline time.Time, mt *metrics.Registry, turboConn bool) {
	defer c.Close()
	ctx, cancel := context.WithDeadline(context.Background(), hsDeadline)
	defer cancel()
	if err := c.HandshakeEarly(ctx); err != nil {
		mt.HandshakeFailed()
		if f.verbose {
			f.log.Info("connection ended", "remote", c.RemoteAddr().String(), "err", err)
		}
		return
	}
	c.SetDeadline(hsDeadline) // reading the early data is part of the handshake
	mt.Flight(c.ConnectionState(), turboConn)
	if f.verbose {
		f.log.Info("connection", "remote", c.RemoteAddr().String(), "state", describeServerState(c.ConnectionState()))
	}
	// 0-RTT data first: a request that came early is answered now, in the
	// server's first flight (0.5-RTT).
	buf := make([]byte, 16*1024)
	for {
		n, err := c.ReadEarlyData(buf)
		mt.EarlyBytes(n)
		if n > 0 {
			if f.echo {
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
	if err := c.HandshakeContext(ctx); err != nil {
		mt.HandshakeFailed()
		if f.verbose {
			f.log.Info("connection ended", "remote", c.RemoteAddr().String(), "err", err)
		}
		return
	}
	c.SetDeadline(time.Now().Add(f.timeout))
	if f.echo {
		io.Copy(c, c)
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

// describeServerState is the one line -v prints per connection.
func describeServerState(st tls13.ConnectionState) string {
	mode := "TLS 1.3"
	switch {
	case st.ZTLS:
		mode = "ZTLS accepted"
	case st.ZTLSOffered:
		mode = "ZTLS offered, rejected (" + st.ZTLSRejectReason + ")"
	case st.DidResume && st.EarlyDataAccepted:
		mode = "resumed, 0-RTT accepted"
	case st.DidResume && st.EarlyDataOffered:
		mode = "resumed, 0-RTT rejected"
	case st.DidResume:
		mode = "resumed"
	}
	return fmt.Sprintf("%s, %s, %s", mode, tls13.CipherSuiteName(st.CipherSuite), tls13.GroupName(st.Group))
}
