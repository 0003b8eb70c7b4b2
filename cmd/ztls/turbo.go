package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/internal/metrics"
	"github.com/ztls-project/ztls/turbo"
)

type turboProxyFlags struct {
	client, server bool
	listen         string
	to             string
	udp            string
	backend        string
	wait           time.Duration
	minWait        time.Duration
	quiet          time.Duration
	expect         int
	verbose        bool
	metrics        string
}

func init() {
	var f turboProxyFlags
	cmd := &cobra.Command{
		Use:   "turbo-proxy --client|--server",
		Short: "TurboTLS proxy pair for unmodified TLS clients and servers",
		Long: `The TurboTLS proxy pair (the TurboTLS paper, Section 4.3): the client
proxy takes each TLS client's first flight off its TCP connection and
sends it over UDP to the server proxy while connecting to it over TCP; the
server proxy hands the flight to the real TLS server and returns that
server's first flight over UDP, saving TCP's round trip. TLS passes
unchanged, end to end. If UDP does not get through in time, the pair
carries the connection over TCP alone.

--client: --listen ADDR (where TLS clients connect), --to HOST:PORT (the
server proxy's TCP address), --udp PORT (its UDP port; default the same).
--server: --listen ADDR (TCP and UDP), --backend HOST:PORT (the TLS server).

How long the client proxy waits for the UDP flight (--wait): by default
half the TCP connect time, and at least --min-wait (10 ms). The server
proxy's flight takes its backend's handshake plus --quiet (3 ms) of
silence that ends it, so on loopback or a LAN, where TCP connects in
microseconds, a shorter wait would always fall back to TCP.`,
		Example: `  # near the server, in front of a TLS server on 127.0.0.1:8443
  ztls turbo-proxy --server --listen 0.0.0.0:9443 --backend 127.0.0.1:8443
  # near the client; point TLS clients at 127.0.0.1:7443
  ztls turbo-proxy --client --listen 127.0.0.1:7443 --to server.example:9443
  openssl s_client -connect 127.0.0.1:7443 -servername server.example`,
		Args: func(cmd *cobra.Command, args []string) error { return f.checkArgs(cmd, args) },
		RunE: func(cmd *cobra.Command, args []string) error { return runTurboProxy(&f) },
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.client, "client", false, "run the client-side proxy")
	fs.BoolVar(&f.server, "server", false, "run the server-side proxy")
	fs.StringVar(&f.listen, "listen", "", "address to listen on (--server: TCP and UDP)")
	fs.StringVar(&f.to, "to", "", "--client: the server proxy's TCP address HOST:PORT")
	fs.StringVar(&f.udp, "udp", "", "--client: the server proxy's UDP port (default: the TCP port)")
	fs.StringVar(&f.backend, "backend", "", "--server: the TLS server's address HOST:PORT")
	fs.DurationVar(&f.wait, "wait", 0, "--client: wait this long for the UDP flight after TCP connects (default: half the TCP connect time, at least --min-wait)")
	fs.DurationVar(&f.minWait, "min-wait", defaultProxyMinWait, "--client: the shortest default wait; the server proxy needs its backend's handshake plus --quiet")
	fs.DurationVar(&f.quiet, "quiet", 3*time.Millisecond, "--server: the backend's first flight ends after it is silent this long")
	fs.IntVar(&f.expect, "expect-flight", 0, "--client: server flight size in bytes to ask room for (default: learned, first 4096)")
	fs.BoolVarP(&f.verbose, "verbose", "v", false, "print one line per connection")
	fs.StringVar(&f.metrics, "metrics", "", "--server: serve Prometheus metrics at http://ADDR/metrics: TurboTLS datagrams in and out, drops, links and fallbacks")
	rootCmd.AddCommand(cmd)
}

// defaultProxyMinWait is the client proxy's floor on the UDP wait: the
// server proxy's flight is the backend's handshake plus its --quiet (3 ms
// by default), so the library's 2 ms floor never sees it on loopback.
const defaultProxyMinWait = 10 * time.Millisecond

// check rejects missing flags and flags of the other side before
// anything listens.
func (f *turboProxyFlags) check() error {
	if f.client == f.server {
		return errors.New("turbo-proxy: choose one of --client (near TLS clients) and --server (in front of a TLS server)")
	}
	if f.listen == "" {
		return errors.New("turbo-proxy: --listen ADDR is required")
	}
	if f.wait < 0 || f.wait > time.Minute {
		return fmt.Errorf("turbo-proxy: --wait %v: want a duration from 0 (the default) to 1m, e.g. 20ms", f.wait)
	}
	if f.minWait <= 0 || f.minWait > time.Minute {
		return fmt.Errorf("turbo-proxy: --min-wait %v: want a duration above 0 and at most 1m, e.g. 10ms", f.minWait)
	}
	if f.quiet <= 0 || f.quiet > time.Second {
		return fmt.Errorf("turbo-proxy: --quiet %v: want a duration above 0 and at most 1s, e.g. 3ms", f.quiet)
	}
	if f.expect < 0 || f.expect > 1<<20 {
		return fmt.Errorf("turbo-proxy: --expect-flight %d: want bytes from 0 (learned) to 1048576", f.expect)
	}
	if f.server {
		if f.to != "" || f.udp != "" || f.wait != 0 || f.expect != 0 || f.minWait != defaultProxyMinWait {
			return errors.New("turbo-proxy --server: --to, --udp, --wait, --min-wait and --expect-flight are --client flags; the server proxy forwards to --backend")
		}
		if f.backend == "" {
			return errors.New("turbo-proxy --server: --backend HOST:PORT (the TLS server) is required")
		}
		return nil
	}
	if f.backend != "" {
		return errors.New("turbo-proxy --client: --backend is a --server flag; the client proxy sends to the server proxy given by --to")
	}
	if f.to == "" {
		return errors.New("turbo-proxy --client: --to HOST:PORT (the server proxy's TCP address) is required")
	}
	if f.udp != "" {
		if _, err := parseUDPPort(f.udp); err != nil {
			return err
		}
	}
	return nil
}

// checkArgs refuses arguments (turbo-proxy takes only flags), with a hint
// for an address after --client or --server, which are switches: the
// server proxy's address is --to, the TLS server's --backend.
func (f *turboProxyFlags) checkArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if _, _, err := net.SplitHostPort(args[0]); err == nil {
		switch {
		case f.client && cmd.Flags().Changed("server"):
			return fmt.Errorf("turbo-proxy: --server is a switch (run the server-side proxy), not an address: for the client proxy give the server proxy's address as --to %s", args[0])
		case f.client:
			return fmt.Errorf("turbo-proxy --client: %s: give the server proxy's address as --to %s", args[0], args[0])
		case f.server:
			return fmt.Errorf("turbo-proxy --server: %s: give the TLS server's address as --backend %s, or the address to listen on as --listen %s", args[0], args[0], args[0])
		}
	}
	return cobra.NoArgs(cmd, args)
}

// parseUDPPort parses --udp.
func parseUDPPort(s string) (uint16, error) {
	p, err := strconv.ParseUint(s, 10, 16)
	if err != nil || p == 0 {
		return 0, fmt.Errorf("turbo-proxy: --udp: want a port number (1-65535), got %q", s)
	}
	return uint16(p), nil
}

func runTurboProxy(f *turboProxyFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	log, err := newLogger(os.Stderr)
	if err != nil {
		return err
	}
	logf := func(string, ...any) {}
	if f.verbose {
		logf = structuredLogf(log, turboLogFormats)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	if f.server {
		pc, err := net.ListenPacket("udp", ln.Addr().String())
		if err != nil {
			ln.Close()
			return err
		}
		p := turbo.NewServerProxy(f.backend, turbo.Config{})
		p.Quiet, p.Logf = f.quiet, logf
		defer p.Close()
		go p.ServeUDP(pc)
		if f.metrics != "" {
			mt := metrics.New()
			turboMetrics(mt, p.Server)
			a, err := mt.Serve(ctx, f.metrics)
			if err != nil {
				return fmt.Errorf("--metrics: %w", err)
			}
			log.Info("metrics on", "url", "http://"+a.String()+"/metrics")
		}
		log.Info("TurboTLS server proxy on", "addr", ln.Addr().String(), "backend", f.backend)
		if err := p.Serve(ln); ctx.Err() == nil {
			return err
		}
		return nil
	}
	tcpAddr, err := resolveAddrPort(ctx, f.to)
	if err != nil {
		return err
	}
	udpAddr := tcpAddr
	if f.udp != "" {
		port, err := parseUDPPort(f.udp)
		if err != nil {
			return err
		}
		udpAddr = netip.AddrPortFrom(tcpAddr.Addr(), port)
	}
	p := &turbo.ClientProxy{ServerTCP: tcpAddr, ServerUDP: udpAddr, Logf: logf,
		Client: turbo.ClientConfig{Wait: f.wait, MinWait: f.minWait, ExpectedFlight: f.expect}}
	wait := "half the TCP connect time, at least " + f.minWait.String()
	if f.wait > 0 {
		wait = f.wait.String()
	}
	log.Info("TurboTLS client proxy on", "addr", ln.Addr().String(), "server_tcp", tcpAddr.String(), "server_udp", udpAddr.String(), "wait", wait)
	if err := p.Serve(ln); ctx.Err() == nil {
		return err
	}
	return nil
}

// resolveAddrPort turns HOST:PORT into one address (the first found).
func resolveAddrPort(ctx context.Context, hostport string) (netip.AddrPort, error) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("turbo-proxy: %q is not HOST:PORT", hostport)
	}
	var p uint16
	if _, err := fmt.Sscanf(port, "%d", &p); err != nil || p == 0 {
		return netip.AddrPort{}, fmt.Errorf("turbo-proxy: bad port in %q", hostport)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return netip.AddrPortFrom(ip, p), nil
	}
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return netip.AddrPort{}, fmt.Errorf("turbo-proxy: looking up %s: %v", host, err)
	}
	return netip.AddrPortFrom(ips[0].Unmap(), p), nil
}
