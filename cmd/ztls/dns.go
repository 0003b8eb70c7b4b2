package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// dnsCmd groups the DNS server tools.
var dnsCmd = &cobra.Command{
	Use:   "dns",
	Short: "DNS tools: an authoritative server for Z-data",
	Long: `DNS tools for ztls.

  serve    an authoritative DNS server (UDP, TCP, DNS over TLS) for zone files,
           with T-DNS stream handling: pipelined queries answered out of order`,
}

type dnsServeFlags struct {
	zones       []string
	listen      string
	tlsListen   string
	cert, key   string
	zdata       []string
	turbo       bool
	idle        time.Duration
	maxConns    int
	udpWorkers  int
	maxUDPSize  int
	verboseLogs bool
}

func init() {
	var f dnsServeFlags
	serve := &cobra.Command{
		Use:   "serve --zone [ORIGIN=]FILE --listen ADDR [--tls ADDR --cert FILE --key FILE]",
		Short: "Serve zone files authoritatively over UDP, TCP and DNS over TLS",
		Long: `Serve one or more zone files (RFC 1035 master format) authoritatively.

--listen serves UDP and TCP on the same address; --tls adds DNS over TLS
(RFC 7858) with --cert and --key. A stream connection is read continuously:
its queries are answered concurrently and each answer leaves as soon as it
is ready, so a slow answer never holds back a fast one (T-DNS). Answers
carry the AA bit, NXDOMAIN or NODATA with the SOA, and are truncated (TC=1)
to the client's EDNS buffer (512 bytes without EDNS). Names outside the
zones get REFUSED; UPDATE gets NOTIMP (publish into a primary with ztls's
publish package instead); a packet whose header does not parse gets no
answer at all.

The zone's origin is taken from its SOA record, or given as ORIGIN=FILE when
the file uses relative names without $ORIGIN.

--zdata DIR serves a Z-data directory's records (TXT, CERT, TLSA; made by
'ztls zdata new') inside the zones, and keeps them current as 'ztls zdata
rotate' changes the directory (fleets rotate themselves), without restart.
With --turbo it also serves, for each --zdata service, the HTTPS record
advertising TurboTLS (RFC 9460, key65280) on the UDP port with the
service's TCP port number, where 'ztls serve --turbo' and 'ztls
turbo-proxy --server' listen.`,
		Example: `  # a zone on a high port, UDP and TCP
  ztls dns serve --zone example.org.zone --listen 127.0.0.1:5353
  dig @127.0.0.1 -p 5353 www.example.org A

  # two zones, the second with an explicit origin, plus DNS over TLS
  ztls dns serve --zone example.org.zone --zone example.net.=net.db \
      --listen 127.0.0.1:5353 --tls 127.0.0.1:8853 --cert cert.pem --key key.pem
  kdig @127.0.0.1 -p 8853 +tls +tls-ca=ca.pem www.example.org A

  # Z-data and the TurboTLS advertisement of a 'ztls serve --zdata zd/ --turbo' server
  ztls dns serve --zone example.org.zone --zdata zd/ --turbo --listen 127.0.0.1:5353

  # pipelined queries on one connection
  ztls lookup www.example.org --resolver 127.0.0.1:8853 --dns-transport tls --ca ca.pem`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDNSServe(ctx, cmd.OutOrStdout(), &f)
		},
	}
	fs := serve.Flags()
	fs.StringArrayVar(&f.zones, "zone", nil, "zone file to serve, as FILE or ORIGIN=FILE (repeatable)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:53", "address for UDP and TCP (empty: none)")
	fs.StringVar(&f.tlsListen, "tls", "", "address for DNS over TLS (needs --cert and --key)")
	fs.StringVar(&f.cert, "cert", "", "PEM certificate chain for --tls")
	fs.StringVar(&f.key, "key", "", "PEM private key for --tls")
	fs.StringArrayVar(&f.zdata, "zdata", nil, "Z-data directory whose records to serve and keep current (repeatable)")
	fs.BoolVar(&f.turbo, "turbo", false, "also serve each --zdata service's HTTPS record advertising TurboTLS on UDP at its TCP port number (key65280)")
	fs.DurationVar(&f.idle, "idle-timeout", authority.DefaultIdleTimeout, "close stream connections idle this long (announced by EDNS keepalive)")
	fs.IntVar(&f.maxConns, "max-conns", authority.DefaultMaxConns, "most open TCP and TLS connections")
	fs.IntVar(&f.udpWorkers, "udp-workers", 0, "goroutines answering UDP (0: 4 per CPU)")
	fs.IntVar(&f.maxUDPSize, "max-udp-size", authority.DefaultMaxUDPSize, "largest UDP answer, advertised in EDNS")
	fs.BoolVarP(&f.verboseLogs, "verbose", "v", false, "log socket and connection errors")
	dnsCmd.AddCommand(serve)
	rootCmd.AddCommand(dnsCmd)
}

// loadZoneArg loads "FILE" or "ORIGIN=FILE".
func loadZoneArg(arg string) (*authority.Zone, error) {
	origin, file, explicit := strings.Cut(arg, "=")
	if !explicit {
		file, origin = arg, ""
	}
	text, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if origin == "" {
		if origin, err = soaOwner(string(text), file); err != nil {
			return nil, err
		}
	}
	return authority.LoadZone(strings.NewReader(string(text)), origin, file)
}

// soaOwner finds the origin of a zone file from its SOA record.
func soaOwner(text, file string) (string, error) {
	zp := dns.NewZoneParser(strings.NewReader(text), ".", file)
	for rr, ok := zp.Next(); ok; rr, ok = zp.Next() {
		if rr.Header().Rrtype == dns.TypeSOA {
			if rr.Header().Name == "." {
				break
			}
			return rr.Header().Name, nil
		}
	}
	if err := zp.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no SOA with an absolute owner; give the origin as ORIGIN=%s", file, file)
}

func runDNSServe(ctx context.Context, out io.Writer, f *dnsServeFlags) error {
	if len(f.zones) == 0 {
		return errors.New("dns serve: give at least one --zone")
	}
	if f.listen == "" && f.tlsListen == "" {
		return errors.New("dns serve: nothing to listen on (--listen, --tls)")
	}
	if (f.tlsListen != "") != (f.cert != "" && f.key != "") {
		return errors.New("dns serve: --tls needs --cert and --key, and they need --tls")
	}
	if f.turbo && len(f.zdata) == 0 {
		return errors.New("dns serve: --turbo advertises the --zdata services: give --zdata DIR")
	}
	var dirs []*zdata.Dir
	for _, path := range f.zdata {
		d, err := zdata.LoadDir(path)
		if err != nil {
			return fmt.Errorf("dns serve: --zdata: %w", err)
		}
		dirs = append(dirs, d)
	}
	var zs []*authority.Zone
	for _, arg := range f.zones {
		z, err := loadZoneArg(arg)
		if err != nil {
			return fmt.Errorf("dns serve: %w", err)
		}
		zs = append(zs, z)
	}
	zones, err := authority.NewZones(zs...)
	if err != nil {
		return fmt.Errorf("dns serve: %w", err)
	}
	for _, d := range dirs {
		if err := serveZData(zones, d, time.Now()); err != nil {
			return fmt.Errorf("dns serve: %w", err)
		}
		fmt.Fprintf(out, "serving Z-data for %s port %d from %s\n", d.Config.Host, d.Config.Port, d.Path)
		if f.turbo {
			rr := turbo.HTTPSRecord(d.Config.Host, d.Config.Port, uint16(d.Config.Port), 300)
			if err := zones.ReplaceRRset(rr.Hdr.Name, dns.TypeHTTPS, []dns.RR{rr}); err != nil {
				return fmt.Errorf("dns serve: --turbo: %w (is %s inside a --zone?)", err, rr.Hdr.Name)
			}
			fmt.Fprintf(out, "serving the TurboTLS advertisement for %s port %d (UDP %d)\n", d.Config.Host, d.Config.Port, d.Config.Port)
		}
	}
	if len(dirs) > 0 {
		go refreshZData(ctx, zones, dirs, f.verboseLogs)
	}
	srv := &authority.Server{
		Handler:     authority.Chain(zones, authority.CheckQuery),
		IdleTimeout: f.idle,
		MaxConns:    f.maxConns,
		UDPWorkers:  f.udpWorkers,
		MaxUDPSize:  f.maxUDPSize,
	}
	if f.verboseLogs {
		srv.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}

	errs := make(chan error, 3)
	serving := 0
	start := func(what string, addr net.Addr, serve func() error) {
		serving++
		fmt.Fprintf(out, "serving %s on %s\n", what, addr)
		go func() { errs <- serve() }()
	}
	fail := func(err error) error {
		srv.Close()
		return fmt.Errorf("dns serve: %w", err)
	}
	if f.listen != "" {
		pc, ln, err := authority.ListenUDPAndTCP(f.listen)
		if err != nil {
			return fail(err)
		}
		start("udp", pc.LocalAddr(), func() error { return srv.ServeUDP(pc) })
		start("tcp", ln.Addr(), func() error { return srv.ServeTCP(ln) })
	}
	if f.tlsListen != "" {
		cert, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return fail(err)
		}
		ln, err := net.Listen("tcp", f.tlsListen)
		if err != nil {
			return fail(err)
		}
		cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"dot"}}
		start("tls", ln.Addr(), func() error { return srv.ServeTLS(ln, cfg) })
	}
	var origins []string
	for _, z := range zs {
		origins = append(origins, z.Origin())
	}
	fmt.Fprintf(out, "zones: %s\n", strings.Join(origins, " "))

	select {
	case <-ctx.Done():
		srv.Close()
		for range serving {
			<-errs
		}
		return nil
	case err := <-errs:
		srv.Close()
		return fmt.Errorf("dns serve: %w", err)
	}
}

// serveZData replaces the service's Z-data RRsets with what d publishes at now.
func serveZData(zones *authority.Zones, d *zdata.Dir, now time.Time) error {
	for _, set := range zdataSets(d, now, 5*time.Minute) {
		if err := zones.ReplaceRRset(set.Name, set.Type, set.Records); err != nil {
			return fmt.Errorf("Z-data of %s: %w (is %s inside a --zone?)", d.Path, err, set.Name)
		}
	}
	return nil
}

// refreshZData re-reads the directories and swaps the records every 10 s.
func refreshZData(ctx context.Context, zones *authority.Zones, dirs []*zdata.Dir, verbose bool) {
	every(ctx, 10*time.Second, func() {
		for _, d := range dirs {
			err := keepCurrent(d, time.Now())
			if err == nil {
				err = serveZData(zones, d, time.Now())
			}
			if err != nil && verbose {
				fmt.Fprintf(os.Stderr, "ztls: %v\n", err)
			}
		}
	})
}

// every calls fn each interval until ctx is done.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fn()
		}
	}
}

// keepCurrent picks up rotation: a fleet derives its own next keys, others
// re-read the key files that 'ztls zdata rotate' writes.
func keepCurrent(d *zdata.Dir, now time.Time) error {
	if d.Service.Seed != nil {
		_, err := d.Service.Rotate(now)
		return err
	}
	_, err := d.Reload()
	return err
}
