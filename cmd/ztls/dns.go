package main

import (
	"context"
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/metrics"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// dnsCmd groups the DNS server tools.
var dnsCmd = &cobra.Command{
	Use:   "dns",
	Short: "DNS tools: an authoritative server for Z-data",
	Long: `DNS tools for ztls.

  serve        an authoritative DNS server (UDP, TCP, DNS over TLS) for zone
               files and Z-data, with T-DNS stream handling: pipelined queries
               answered out of order
  check-zone   check zone files the way serve loads them (like named-checkzone)`,
}

func init() { groupCommand(dnsCmd) }

type dnsServeFlags struct {
	zones       []string
	listen      string
	tlsListen   string
	cert, key   string
	tlsEngine   string
	pskKE       bool
	zdata       []string
	turbo       bool
	https       httpsAdvert
	idle        time.Duration
	maxConns    int
	udpWorkers  int
	udpSockets  int
	answerCache int
	maxUDPSize  int
	verboseLogs bool
	metrics     string
	rotate      bool

	// Limits under abuse.
	maxConnsPerAddr, maxConnsPerPrefix int
	firstQuery                         time.Duration
	rrlRate, rrlSlip                   int
	rrlWindow                          time.Duration
	amplification                      int
	amplificationFloor                 int
	noCookies                          bool
	cookieRotate                       time.Duration
}

// The help of dns serve.
const (
	dnsServeLong = `Serve one or more zone files (RFC 1035 master format) authoritatively.

--listen serves UDP and TCP on the same address; --tls adds DNS over TLS
(RFC 7858) with --cert and --key. A stream connection is read continuously:
its queries are answered concurrently and each answer leaves as soon as it
is ready, so a slow answer never holds back a fast one (T-DNS). Answers
carry the AA bit, NXDOMAIN or NODATA with the SOA, and are truncated (TC=1)
to the client's EDNS buffer (512 bytes without EDNS). Names outside the
zones get REFUSED; UPDATE gets NOTIMP (publish into a primary with ztls's
publish package instead); a packet whose header does not parse gets no
answer at all.

DNS over TLS runs on Go's crypto/tls (TLS 1.2 and 1.3) by default;
--tls-engine ztls serves it with ztls's own TLS 1.3 engine instead (TLS 1.3
only). Both hand resolvers session tickets, so a reconnecting resolver skips
the certificate and its signatures. With ztls's engine and --psk-ke, a
resolver that offers psk_ke (as OpenSSL's SSL_OP_ALLOW_NO_DHE_KEX does)
also skips the key exchange, as TLS 1.2 session tickets did: a reconnect
costs a third to a half of a full handshake's CPU (docs/dns-bench.md), and
the ticket key, rotated hourly and dropped once its tickets expire (at most
25 hours), is then all that protects those sessions.

The zone's origin is taken from its SOA record, or given as ORIGIN=FILE when
the file uses relative names without $ORIGIN.

--zdata DIR serves a Z-data directory's records (TXT, CERT, TLSA; made by
'ztls zdata new') inside the zones and keeps them current without restart:
the first process to claim the directory (DIR/rotate.lock: this server, or
a 'ztls serve --zdata DIR' started before it) rotates its keys, adding each
period's key before it is due; the others pick up what it writes within a
second, and when it stops (cleanly or not) the first of them to find the
lock free, within ten seconds, takes the rotation over. --rotate=false only
reads, leaving rotation to another process or to 'ztls zdata rotate DIR'
from cron; a --seed-file fleet derives its keys.

SIGHUP reloads the zone files, the Z-data (a replaced certificate gets new
keys at once in the rotating process) and the --tls certificate.

Each --zdata service also gets its HTTPS record (RFC 9460) at HOST (port
443) or _PORT._https.HOST, carrying its Z-data in SvcParam key65370
(docs/ztls-spec.md, Section 8): the current and the next period's records,
each with its v2 twin when the directory has BFE keys, signed as their TXT
form; so a client that asks HTTPS beside A and AAAA needs no TXT query. It
is republished with the TXT set at each change (rollover, new key), its TTL
ends before the earliest not-after, and the zone's A and AAAA records for
HOST become its address hints. --https-alpn sets its alpn, --zdata-svc-key
the private-use key (65281 to 65534; clients must ask for the same), and
--zdata-https=false leaves the Z-data in TXT only. When the zone file has
its own HTTPS records at that name, the Z-data and TurboTLS keys are added
to each ServiceMode one (its target, alpn, ech and hints kept; the lower
TTL); an AliasMode one is served as it is, without them (put them at its
target). Its answer fits 1232 bytes
with an ECDSA P-256 or Ed25519 leaf, BFE twins included; with an RSA leaf
and BFE (about 1600 bytes) UDP answers are truncated (TC=1) and resolvers
ask again over TCP: the log says so at start.

With --turbo the same HTTPS record also advertises TurboTLS (key65280) on
the UDP port with the service's TCP port number, where 'ztls serve --turbo'
and 'ztls turbo-proxy --server' listen: one ServiceMode RR carries both
keys.

Under abuse (defaults in brackets):
  TCP and TLS   one address holds at most --max-conns-per-addr connections
                [32], one /24 (IPv4) or /56 (IPv6) --max-conns-per-prefix
                [128]; a connection that sends no query within
                --first-query-timeout [3s] is closed; at --max-conns [1000]
                a newcomer replaces an idle connection (never-used ones
                first), and is refused only when all are busy.
  UDP           Response Rate Limiting as in BIND 9: --rrl-rate identical
                answers per second to one /24 or /56 [10], every
                --rrl-slip-th limited answer sent as an empty TC=1 reply
                [2], a flooder answered again after --rrl-window of quiet
                [15s]. DNS cookies (RFC 7873, RFC 9018 format; --no-cookies
                to turn off): a client presenting a valid server cookie is
                never limited and gets answers up to its buffer; others get
                at most --udp-amplification times their query [10] or
                --udp-amplification-floor bytes [1232] if that is more
                (so an HTTPS record with Z-data reaches a resolver that
                sends no cookie over UDP), larger answers truncated (TC=1)
                so they retry over TCP. ANY is answered with one RRset
                (RFC 8482).`
	dnsServeExample = `  # a zone on a high port, UDP and TCP
  ztls dns serve --zone example.org.zone --listen 127.0.0.1:5353
  dig @127.0.0.1 -p 5353 www.example.org A

  # two zones, the second with an explicit origin, plus DNS over TLS
  ztls dns serve --zone example.org.zone --zone example.net.=net.db \
      --listen 127.0.0.1:5353 --tls 127.0.0.1:8853 --cert cert.pem --key key.pem
  kdig @127.0.0.1 -p 8853 +tls +tls-ca=ca.pem www.example.org A

  # DNS over TLS on ztls's engine; resolvers allowing psk_ke resume without ECDHE
  ztls dns serve --zone example.org.zone --tls 127.0.0.1:8853 --cert cert.pem \
      --key key.pem --tls-engine ztls --psk-ke
  dig @127.0.0.1 -p 8853 +tls +tls-ca=ca.pem +tls-hostname=dns.example.org www.example.org A

  # Z-data (TXT, TLSA, CERT and the HTTPS record) and the TurboTLS advertisement
  # of a 'ztls serve --zdata zd/ --turbo' server
  ztls dns serve --zone example.org.zone --zdata zd/ --turbo --https-alpn h2,http/1.1 \
      --listen 127.0.0.1:5353
  dig @127.0.0.1 -p 5353 www.example.org HTTPS

  # Z-data under another private-use SvcParamKey, or in TXT only
  ztls dns serve --zone example.org.zone --zdata zd/ --zdata-svc-key 65371 --listen 127.0.0.1:5353
  ztls dns serve --zone example.org.zone --zdata zd/ --zdata-https=false --listen 127.0.0.1:5353

  # the six lookups of a ZTLS connection, pipelined on one DNS-over-TLS connection
  ztls lookup @127.0.0.1 -p 8853 www.example.org ztls +tls --dns-ca ca.pem`
)

func init() {
	var f dnsServeFlags
	serve := &cobra.Command{
		Use:     "serve --zone [ORIGIN=]FILE --listen ADDR [--tls ADDR --cert FILE --key FILE]",
		Short:   "Serve zone files authoritatively over UDP, TCP and DNS over TLS",
		Long:    dnsServeLong,
		Example: dnsServeExample,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runDNSServe(ctx, cmd.ErrOrStderr(), &f)
		},
	}
	f.register(serve.Flags())
	dnsCmd.AddCommand(serve)
	rootCmd.AddCommand(dnsCmd)
}

// register defines dns serve's flags.
func (f *dnsServeFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.zones, "zone", nil, "zone file to serve, as FILE or ORIGIN=FILE (repeatable)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:53", "address for UDP and TCP (empty: none)")
	fs.StringVar(&f.tlsListen, "tls", "", "address for DNS over TLS (needs --cert and --key)")
	fs.StringVar(&f.cert, "cert", "", "PEM certificate chain for --tls")
	fs.StringVar(&f.key, "key", "", "PEM private key for --tls")
	fs.StringVar(&f.tlsEngine, "tls-engine", "go", "TLS stack for --tls: go (Go's crypto/tls, TLS 1.2 and 1.3) or ztls (ztls's own TLS 1.3 engine: session-ticket keys rotated hourly, and --psk-ke)")
	fs.BoolVar(&f.pskKE, "psk-ke", false, "with --tls-engine ztls: resume resolvers that offer psk_ke without a new key exchange (cheaper reconnects; a stolen ticket key then reads those sessions: forward secrecy only beyond the ticket key's life, at most 25 hours)")
	fs.StringArrayVar(&f.zdata, "zdata", nil, "Z-data directory whose records to serve and keep current (repeatable)")
	fs.BoolVar(&f.turbo, "turbo", false, "also advertise TurboTLS in each --zdata service's HTTPS record, on UDP at its TCP port number (key65280)")
	f.https.register(fs, "serve")
	fs.DurationVar(&f.idle, "idle-timeout", authority.DefaultIdleTimeout, "close stream connections idle this long (announced by EDNS keepalive)")
	fs.IntVar(&f.maxConns, "max-conns", authority.DefaultMaxConns, "most open TCP and TLS connections")
	fs.IntVar(&f.udpWorkers, "udp-workers", 0, "goroutines answering each UDP socket (0: 2, each reading and writing batches of datagrams)")
	fs.IntVar(&f.udpSockets, "udp-sockets", 0, "UDP sockets on the --listen port, spread over by the kernel (SO_REUSEPORT; 0: one per CPU)")
	fs.IntVar(&f.answerCache, "answer-cache", defaultAnswerCache, "packed answers kept per transport and sent again to the same query without rebuilding them (0: off)")
	fs.IntVar(&f.maxUDPSize, "max-udp-size", authority.DefaultMaxUDPSize, "largest UDP answer, advertised in EDNS")
	fs.IntVar(&f.maxConnsPerAddr, "max-conns-per-addr", authority.DefaultMaxConnsPerAddr, "most TCP and TLS connections from one address (0: no limit)")
	fs.IntVar(&f.maxConnsPerPrefix, "max-conns-per-prefix", authority.DefaultMaxConnsPerPrefix, "most TCP and TLS connections from one /24 or /56 (0: no limit)")
	fs.DurationVar(&f.firstQuery, "first-query-timeout", authority.DefaultFirstQueryTimeout, "close a TCP or TLS connection that sent no query this long after it opened (at most --idle-timeout)")
	fs.IntVar(&f.rrlRate, "rrl-rate", authority.DefaultRRLResponsesPerSecond, "UDP response rate limit: identical answers per second to one /24 or /56 (0: off)")
	fs.IntVar(&f.rrlSlip, "rrl-slip", authority.DefaultRRLSlip, "send every Nth rate-limited answer as an empty TC=1 reply (0: drop all)")
	fs.DurationVar(&f.rrlWindow, "rrl-window", authority.DefaultRRLWindow, "how long a flooding network must keep quiet to be answered again")
	fs.IntVar(&f.amplification, "udp-amplification", authority.DefaultMaxUDPAmplification, "UDP answers to clients without a valid DNS cookie are at most N times the query, else TC=1 (0: no cap)")
	fs.IntVar(&f.amplificationFloor, "udp-amplification-floor", authority.DefaultAmplificationFloor, "--udp-amplification never cuts an answer of up to N bytes (0: the factor alone)")
	fs.BoolVar(&f.noCookies, "no-cookies", false, "turn DNS cookies (RFC 7873) off")
	fs.DurationVar(&f.cookieRotate, "cookie-rotate", 0, "replace the DNS cookie secret this often (0: one random secret for the process)")
	fs.BoolVarP(&f.verboseLogs, "verbose", "v", false, "log socket and connection errors")
	fs.BoolVar(&f.rotate, "rotate", true, "rotate each --zdata directory's keys when no other process does (the first to claim DIR/rotate.lock rotates: ztls serve or this server; the others take over when it stops); off: only reload")
	fs.StringVar(&f.metrics, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9181): queries by type and rcode, UDP bytes, RRL drops and slips, cookies, connections, live Z-data keys, the --tls certificate's expiry, build info; /healthz (alive) and /readyz (503 until every listener is bound)")
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

// runDNSServe serves until ctx ends; its log goes to logw.
func runDNSServe(ctx context.Context, logw io.Writer, f *dnsServeFlags) error {
	log, err := newLogger(logw)
	if err != nil {
		return err
	}
	if err := checkDNSServeFlags(f); err != nil {
		return err
	}
	dirs, claims, release, err := loadDNSZData(f)
	defer release()
	if err != nil {
		return err
	}
	zs, zones, err := loadDNSZones(f, dirs)
	if err != nil {
		return err
	}
	for _, d := range dirs {
		log.Info("serving Z-data", "host", d.Config.Host, "port", d.Config.Port, "dir", d.Path, "rotates", claims[d].Held(),
			"live_keys", len(d.Keyring.Live(clock.Now())))
		logHTTPSRecord(log, zones, d, &f.https)
	}
	var dot *reloadableCert
	if f.tlsListen != "" {
		if dot, err = loadReloadableCert(f.cert, f.key, dotEngineConfig(f)); err != nil {
			return fmt.Errorf("dns serve: --cert, --key: %w", err)
		}
	}
	defer onHUP(ctx, func() { reloadDNSServe(log, f, dot, zs, dirs) })()
	if len(dirs) > 0 {
		go refreshZData(ctx, zones, dirs, claims, &f.https, f.verboseLogs, log)
	}
	mt := dnsMetrics(f, dirs)
	srv := newAuthorityServer(ctx, f, zones, mt, log)
	if mt != nil {
		mt.AuthorityStats(srv.Stats)
		if dot != nil {
			// The name and meaning of serve's, for DNS over TLS.
			mt.GaugeFunc("ztls_certificate_expiry_timestamp_seconds", "When the served certificate expires (its notAfter), in seconds since the Unix epoch; a SIGHUP reload moves it.",
				func() float64 { return float64(dot.leaf().NotAfter.Unix()) })
		}
		a, err := mt.Serve(ctx, f.metrics)
		if err != nil {
			return fmt.Errorf("dns serve: --metrics: %w", err)
		}
		log.Info("metrics on", "url", "http://"+a.String()+"/metrics")
	}
	return serveDNS(ctx, f, srv, dot, zs, mt, log)
}

// checkDNSServeFlags refuses flag combinations that serve nothing.
func checkDNSServeFlags(f *dnsServeFlags) error {
	if len(f.zones) == 0 {
		return errors.New("dns serve: give at least one --zone")
	}
	if f.listen == "" && f.tlsListen == "" {
		return errors.New("dns serve: nothing to listen on (--listen, --tls)")
	}
	if (f.tlsListen != "") != (f.cert != "" && f.key != "") {
		return errors.New("dns serve: --tls needs --cert and --key, and they need --tls")
	}
	if f.tlsEngine != "" && f.tlsEngine != "go" && f.tlsEngine != "ztls" { // "": go
		return fmt.Errorf("dns serve: --tls-engine %q: give go (crypto/tls) or ztls (ztls's TLS 1.3 engine)", f.tlsEngine)
	}
	if f.pskKE && f.tlsEngine != "ztls" {
		return errors.New("dns serve: --psk-ke needs --tls-engine ztls (Go's crypto/tls always resumes with a key exchange)")
	}
	if f.turbo && len(f.zdata) == 0 {
		return errors.New("dns serve: --turbo advertises the --zdata services: give --zdata DIR")
	}
	if err := f.https.check(); err != nil {
		return fmt.Errorf("dns serve: %w", err)
	}
	f.https.turboAtServicePort = f.turbo
	f.https.zoneSets = &zoneHTTPS{}
	return checkAbuseFlags(f)
}

// loadDNSZData loads the --zdata directories and claims the rotation of
// those no other process rotates; claims holds a claim for each directory
// this process may rotate (held, or tried again at each refresh to take
// the rotation over: refreshZData), and release gives them back (call it
// also when err is set).
func loadDNSZData(f *dnsServeFlags) (dirs []*zdata.Dir, claims map[*zdata.Dir]*zdata.RotationClaim, release func(), err error) {
	claims = map[*zdata.Dir]*zdata.RotationClaim{}
	release = func() {
		for _, c := range claims {
			c.Release()
		}
	}
	for _, path := range f.zdata {
		d, err := zdata.LoadDir(path)
		if err != nil {
			return nil, nil, release, fmt.Errorf("dns serve: --zdata: %w", err)
		}
		dirs = append(dirs, d)
		// One process per directory rotates (ztls serve, or this one if
		// it claims the directory first); a fleet derives its keys.
		if !f.rotate || d.Fleet() {
			continue
		}
		c := zdata.NewRotationClaim(d)
		claims[d] = c
		took, err := c.Try(clock.Now())
		if err != nil {
			return nil, nil, release, fmt.Errorf("dns serve: --zdata: %w", err)
		}
		if !took {
			continue
		}
		if _, err := d.Rotate(clock.Now()); err != nil {
			return nil, nil, release, fmt.Errorf("dns serve: --zdata %s: rotating: %w", d.Path, err)
		}
		if _, _, err := d.RotateECH("", clock.Now()); err != nil {
			return nil, nil, release, fmt.Errorf("dns serve: --zdata %s: rotating the ECH keys: %w", d.Path, err)
		}
	}
	return dirs, claims, release, nil
}

// loadDNSZones reads the --zone files and adds the Z-data services'
// records (and TurboTLS adverts) to them.
func loadDNSZones(f *dnsServeFlags, dirs []*zdata.Dir) ([]*authority.Zone, *authority.Zones, error) {
	var zs []*authority.Zone
	for _, arg := range f.zones {
		z, err := loadZoneArg(arg)
		if err != nil {
			return nil, nil, fmt.Errorf("dns serve: %w", err)
		}
		zs = append(zs, z)
	}
	zones, err := authority.NewZones(zs...)
	if err != nil {
		return nil, nil, fmt.Errorf("dns serve: %w", err)
	}
	if err := addServiceRecords(zones, dirs, &f.https, clock.Now()); err != nil {
		return nil, nil, fmt.Errorf("dns serve: %w", err)
	}
	return zs, zones, nil
}

// reloadDNSServe is SIGHUP: it reads the zone files, the Z-data (a
// replaced certificate included) and the DNS-over-TLS certificate again
// and swaps each zone's data at once; a file that no longer loads keeps
// the old data.
func reloadDNSServe(log *slog.Logger, f *dnsServeFlags, dot *reloadableCert, zs []*authority.Zone, dirs []*zdata.Dir) {
	if dot != nil {
		if err := dot.reload(); err != nil {
			log.Error("SIGHUP: keeping the DNS-over-TLS certificate", "err", err)
		} else {
			leaf := dot.leaf()
			log.Info("SIGHUP: reloaded the DNS-over-TLS certificate", "subject", leaf.Subject.String(), "not_after", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if err := reloadZones(f, zs, dirs); err != nil {
		log.Error("SIGHUP: keeping the zones as they are", "err", err)
		return
	}
	log.Info("SIGHUP: reloaded the zones and Z-data", "zones", len(zs), "zdata", len(dirs))
}

// dnsMetrics is the --metrics registry (nil without it) with the Z-data
// gauges of each service.
func dnsMetrics(f *dnsServeFlags, dirs []*zdata.Dir) *metrics.Registry {
	if f.metrics == "" {
		return nil
	}
	mt := metrics.New().DNSServer()
	// One gauge per service, over its directories (a fleet's, served by
	// one authority): a second registration with the same label panicked
	// (docs/soak.md, bug 3).
	var services []string
	of := map[string][]*zdata.Dir{}
	for _, d := range dirs {
		service := net.JoinHostPort(d.Config.Host, fmt.Sprint(d.Config.Port))
		if of[service] == nil {
			services = append(services, service)
		}
		of[service] = append(of[service], d)
	}
	for _, service := range services {
		ds := of[service]
		mt.GaugeFunc("ztls_zdata_live_keys", "Z-data keys live now in the service's directories, each Zdata_id once "+
			"(a fleet's directories hold the same keys) (0: ZTLS clients fall back to TLS 1.3).",
			func() float64 { return float64(liveZDataKeys(ds, clock.Now())) }, "service", service)
		mt.GaugeFunc("ztls_zdata_expiry_seconds", "Seconds until the last live Z-data key of the service's directories expires (0: none live).",
			func() float64 {
				var last time.Duration
				for _, d := range ds {
					last = max(last, zdataExpiry(d, clock.Now()))
				}
				return last.Seconds()
			}, "service", service)
	}
	return mt
}

// liveZDataKeys counts the distinct Zdata_ids live at now in dirs.
func liveZDataKeys(dirs []*zdata.Dir, now time.Time) int {
	ids := map[uint32]bool{}
	for _, d := range dirs {
		for _, k := range d.Keyring.Live(now) {
			ids[k.Record.ID] = true
		}
	}
	return len(ids)
}

// defaultAnswerCache is --answer-cache's default: enough for the names
// and types of a zone of a few thousand names; at most 1 KB an entry
// (key and answer), so at most some 20 MB per transport.
const defaultAnswerCache = 20000

// newAuthorityServer is the authority with the abuse bounds of the flags;
// it rotates its cookie secret until ctx ends.
func newAuthorityServer(ctx context.Context, f *dnsServeFlags, zones *authority.Zones, mt *metrics.Registry, log *slog.Logger) *authority.Server {
	srv := &authority.Server{
		Handler:     authority.Chain(zones, mt.DNSMiddleware(), authority.CheckQuery),
		IdleTimeout: f.idle,
		MaxConns:    f.maxConns,
		UDPWorkers:  f.udpWorkers,
		MaxUDPSize:  f.maxUDPSize,

		MaxConnsPerAddr:     noLimitIfZero(f.maxConnsPerAddr),
		MaxConnsPerPrefix:   noLimitIfZero(f.maxConnsPerPrefix),
		FirstQueryTimeout:   f.firstQuery,
		RateLimit:           &authority.RateLimit{ResponsesPerSecond: f.rrlRate, Slip: f.rrlSlip, Window: f.rrlWindow},
		MaxUDPAmplification: noLimitIfZero(f.amplification),
		AmplificationFloor:  noLimitIfZero(f.amplificationFloor),
		DisableCookies:      f.noCookies,
		AnswerCacheSize:     f.answerCache,
		// Answers from the cache skip the metrics middleware: count them.
		CachedAnswer: mt.DNSAnswered,
	}
	if f.cookieRotate > 0 && !f.noCookies {
		go every(ctx, f.cookieRotate, func() {
			if err := srv.RotateCookieSecret(); err != nil && f.verboseLogs {
				log.Error("rotating the cookie secret", "err", err)
			}
		})
	}
	if f.verboseLogs {
		srv.Logf = structuredLogf(log, authorityLogFormats)
	}
	return srv
}

// serveDNS serves UDP and TCP (--listen) and DNS over TLS (--tls) until
// ctx ends or a listener fails; mt (may be nil) is ready once every
// listener is bound.
func serveDNS(ctx context.Context, f *dnsServeFlags, srv *authority.Server, dot *reloadableCert, zs []*authority.Zone, mt *metrics.Registry, log *slog.Logger) error {
	errs := make(chan error, 2+max(f.udpSockets, runtime.GOMAXPROCS(0)))
	serving := 0
	start := func(what string, addr net.Addr, serve func() error) {
		serving++
		log.Info("serving "+what+" on", "addr", addr.String())
		go func() { errs <- serve() }()
	}
	fail := func(err error) error {
		srv.Close()
		return fmt.Errorf("dns serve: %w", err)
	}
	if f.listen != "" {
		n := f.udpSockets
		if n <= 0 {
			n = runtime.GOMAXPROCS(0)
		}
		pcs, ln, err := authority.ListenReusePort(f.listen, n)
		if err != nil {
			return fail(err)
		}
		start("udp", pcs[0].LocalAddr(), func() error { return srv.ServeUDP(pcs[0]) })
		for _, pc := range pcs[1:] { // the same port: logged once
			serving++
			go func() { errs <- srv.ServeUDP(pc) }()
		}
		start("tcp", ln.Addr(), func() error { return srv.ServeTCP(ln) })
	}
	if dot != nil {
		ln, err := net.Listen("tcp", f.tlsListen)
		if err != nil {
			return fail(err)
		}
		if dot.engine != nil {
			start("tls (ztls engine)", ln.Addr(), func() error {
				return srv.ServeStream(&engineListener{ln, dot}, authority.TransportTLS)
			})
		} else {
			cfg := &tls.Config{GetCertificate: dot.get, MinVersion: tls.VersionTLS12, NextProtos: []string{"dot"}}
			start("tls", ln.Addr(), func() error { return srv.ServeTLS(ln, cfg) })
		}
	}
	var origins []string
	for _, z := range zs {
		origins = append(origins, z.Origin())
	}
	log.Info("zones", "origins", strings.Join(origins, " "))
	mt.SetReady(nil) // the zones are loaded and every listener is bound
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

// reloadableCert is a TLS certificate that SIGHUP replaces for the
// handshakes that start afterwards.
type reloadableCert struct {
	certFile, keyFile string
	cur               atomic.Pointer[tls.Certificate]

	// For --tls-engine ztls: the engine's settings, and a copy of them
	// with the current certificate.
	engine *tls13.Config
	cur13  atomic.Pointer[tls13.Config]
}

// loadReloadableCert loads the certificate; engine, if not nil, is the
// configuration of ztls's engine to serve it with.
func loadReloadableCert(certFile, keyFile string, engine *tls13.Config) (*reloadableCert, error) {
	r := &reloadableCert{certFile: certFile, keyFile: keyFile, engine: engine}
	return r, r.reload()
}

// reload reads the files again; on error the certificate stays.
func (r *reloadableCert) reload() error {
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	if r.engine != nil {
		signer, ok := c.PrivateKey.(crypto.Signer)
		if !ok {
			return fmt.Errorf("%s: a %T cannot sign", r.keyFile, c.PrivateKey)
		}
		cfg := r.engine.Clone()
		cfg.Certificates = []tls13.Certificate{{Chain: c.Certificate, PrivateKey: signer, Leaf: c.Leaf}}
		r.cur13.Store(cfg)
	}
	r.cur.Store(&c)
	return nil
}

// dotEngineConfig is the configuration of ztls's engine for DNS over TLS
// (nil for --tls-engine go): no early data (DNS has none to send before
// the handshake), tickets under rotating keys and, with --psk-ke,
// resumption without a key exchange preferred for resolvers that offer it.
func dotEngineConfig(f *dnsServeFlags) *tls13.Config {
	if f.tlsEngine != "ztls" {
		return nil
	}
	cfg := &tls13.Config{NextProtos: []string{"dot"}, TicketKeys: tls13.NewTicketKeys(time.Hour, nil)}
	if f.pskKE {
		cfg.PSKModes = []tls13.PSKMode{tls13.PSKModeKE, tls13.PSKModeDHEKE}
	}
	return cfg
}

// engineListener serves --tls with ztls's engine and the current
// certificate.
type engineListener struct {
	net.Listener
	cert *reloadableCert
}

func (l *engineListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tls13.Server(c, l.cert.cur13.Load()), nil
}

func (r *reloadableCert) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

func (r *reloadableCert) leaf() *x509.Certificate { return r.cur.Load().Leaf }

// checkAbuseFlags rejects limits that cannot mean anything, saying which
// values work.
func checkAbuseFlags(f *dnsServeFlags) error {
	for _, v := range []struct {
		name string
		n    int
	}{
		{"--max-conns-per-addr", f.maxConnsPerAddr}, {"--max-conns-per-prefix", f.maxConnsPerPrefix},
		{"--rrl-rate", f.rrlRate}, {"--rrl-slip", f.rrlSlip}, {"--udp-amplification", f.amplification},
		{"--udp-amplification-floor", f.amplificationFloor},
	} {
		if v.n < 0 {
			return fmt.Errorf("dns serve: %s %d: give 0 (off) or a positive number", v.name, v.n)
		}
	}
	if f.amplification == 1 {
		return errors.New("dns serve: --udp-amplification 1: an empty TC=1 answer can exceed its query; give 2 or more (or 0 for no cap)")
	}
	if f.firstQuery < 0 || f.idle > 0 && f.firstQuery > f.idle {
		return fmt.Errorf("dns serve: --first-query-timeout %v: give a duration of at most --idle-timeout (%v)", f.firstQuery, f.idle)
	}
	if f.rrlWindow < 0 || f.cookieRotate < 0 {
		return errors.New("dns serve: --rrl-window and --cookie-rotate take durations of 0 or more")
	}
	return nil
}

// noLimitIfZero maps the command line's "0: no limit" to the library's
// negative value (where 0 means the default).
func noLimitIfZero(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// addServiceRecords puts each directory's Z-data records and its HTTPS
// record (with the Z-data and, with --turbo, the TurboTLS key) into the
// zones.
func addServiceRecords(zones *authority.Zones, dirs []*zdata.Dir, https *httpsAdvert, now time.Time) error {
	if https != nil && https.zoneSets != nil {
		// What the zone files hold at the owners, before the services'
		// records go in: the base each refresh merges into.
		sets := map[string][]dns.RR{}
		for _, d := range dirs {
			owner := zdata.HTTPSOwner(d.Config.Host, d.Config.Port)
			if z := zones.Zone(owner); z != nil {
				sets[owner] = z.RRset(owner, dns.TypeHTTPS)
			}
		}
		https.zoneSets.set(sets)
	}
	for _, d := range dirs {
		if err := serveZData(zones, d, now, https); err != nil {
			return err
		}
	}
	return nil
}

// reloadZones loads every --zone file and the Z-data again, builds the
// new zones completely (records and all) and only then swaps them into
// the served ones; any error leaves everything as it was. The set of
// zones is fixed: adding or removing one takes a restart.
func reloadZones(f *dnsServeFlags, served []*authority.Zone, dirs []*zdata.Dir) error {
	var fresh []*authority.Zone
	for i, arg := range f.zones {
		z, err := loadZoneArg(arg)
		if err != nil {
			return err
		}
		if z.Origin() != served[i].Origin() {
			return fmt.Errorf("%s now holds zone %s, not %s: restart to change the set of zones", arg, z.Origin(), served[i].Origin())
		}
		fresh = append(fresh, z)
	}
	for _, d := range dirs {
		// The certificate too: a rotating directory gets keys for a new
		// one at once (zdata.Dir.SetRotating).
		if _, err := d.Reload(); err != nil {
			return err
		}
	}
	staged, err := authority.NewZones(fresh...)
	if err != nil {
		return err
	}
	if err := addServiceRecords(staged, dirs, &f.https, clock.Now()); err != nil {
		return err
	}
	for i, z := range served {
		if err := z.Swap(fresh[i]); err != nil {
			return err
		}
	}
	return nil
}

// serveZData replaces the service's Z-data RRsets with what d publishes
// at now, its HTTPS record among them (with the addresses the zone holds
// for the host as hints), so the record is republished at each rotation
// with the TXT set.
func serveZData(zones *authority.Zones, d *zdata.Dir, now time.Time, https *httpsAdvert) error {
	for _, set := range zdataSets(d, now, 5*time.Minute) {
		if err := zones.ReplaceRRset(set.Name, set.Type, set.Records); err != nil {
			return fmt.Errorf("the Z-data of %s: %w (is %s inside a --zone?)", d.Path, err, set.Name)
		}
	}
	if https == nil || !https.wanted() {
		return nil
	}
	rrs, _, err := servedHTTPSRecords(zones, d, now, https)
	if err != nil {
		return fmt.Errorf("the HTTPS record of %s: %w", d.Path, err)
	}
	if err := zones.ReplaceRRset(rrs[0].Header().Name, dns.TypeHTTPS, rrs); err != nil {
		return fmt.Errorf("the HTTPS record of %s: %w (is %s inside a --zone?)", d.Path, err, rrs[0].Header().Name)
	}
	return nil
}

// servedHTTPSRecords is the service's HTTPS RRset at now: the zone
// file's ServiceMode RRs at the owner with the Z-data and TurboTLS keys
// merged in (zdata.MergeHTTPS), or, when the zone file has none, the
// service's own record with the address hints the zones hold for the
// host. aliased: the zone file has an AliasMode RR there, served as it
// is (the Z-data belongs at its target).
func servedHTTPSRecords(zones *authority.Zones, d *zdata.Dir, now time.Time, https *httpsAdvert) (rrs []dns.RR, aliased bool, err error) {
	rr, err := serviceHTTPSRecord(zones, d, now, https)
	if err != nil {
		return nil, false, err
	}
	rrs, aliased = zdata.MergeHTTPS(https.zoneSets.get(rr.Hdr.Name), rr, https.managed()...)
	return rrs, aliased, nil
}

// serviceHTTPSRecord is the service's own HTTPS record at now, its
// address hints the A and AAAA records the zones hold for the host.
func serviceHTTPSRecord(zones *authority.Zones, d *zdata.Dir, now time.Time, https *httpsAdvert) (*dns.HTTPS, error) {
	var v4, v6 []net.IP
	host := dns.Fqdn(d.Config.Host)
	if z := zones.Zone(host); z != nil {
		for _, rr := range z.RRset(host, dns.TypeA) {
			v4 = append(v4, rr.(*dns.A).A)
		}
		for _, rr := range z.RRset(host, dns.TypeAAAA) {
			v6 = append(v6, rr.(*dns.AAAA).AAAA)
		}
	}
	return https.record(d, now, 5*time.Minute, v4, v6)
}

// logHTTPSRecord says what the service's HTTPS record carries and how
// large its answer is: over 1232 bytes a UDP answer is truncated and
// resolvers ask again over TCP (docs/ztls-spec.md, Section 8.3).
func logHTTPSRecord(log *slog.Logger, zones *authority.Zones, d *zdata.Dir, https *httpsAdvert) {
	if !https.wanted() {
		return
	}
	now := clock.Now()
	rrs, aliased, err := servedHTTPSRecords(zones, d, now, https)
	if err != nil {
		log.Error("the HTTPS record", "dir", d.Path, "err", err)
		return
	}
	owner := rrs[0].Header().Name
	if aliased {
		log.Warn("the zone file holds an AliasMode HTTPS record at the service's name: served as it is, without Z-data or TurboTLS's key (clients follow the alias; put the keys in the target's ServiceMode record, docs/ztls-spec.md Section 8.6)", "owner", owner)
		return
	}
	size, err := zdata.AnswerSize(rrs...)
	if err != nil {
		log.Error("the HTTPS record", "dir", d.Path, "err", err)
		return
	}
	recs, _ := zdata.RecordsFromSVCB(&rrs[0].(*dns.HTTPS).SVCB, dns.SVCBKey(https.key))
	args := []any{"owner", owner, "zdata_records", len(recs), "answer_bytes", size}
	if len(https.zoneSets.get(owner)) > 0 {
		args = append(args, "merged_into_zone_rrs", len(rrs))
	}
	if https.turboAtServicePort {
		args = append(args, "turbo_udp_port", d.Config.Port)
	}
	if size > 1232 {
		log.Warn("serving the HTTPS record: its answer is over 1232 bytes, so UDP answers are truncated (TC=1) and resolvers ask again over TCP; a smaller leaf key (ECDSA P-256) or --zdata-https=false keeps it on UDP", args...)
		return
	}
	log.Info("serving the HTTPS record", args...)
}

// refreshZData keeps the served Z-data current: every ten seconds, and
// just after each instant the records a directory publishes change, it
// rotates the directories this process rotates and re-reads the others,
// and within a second (zdataPoll) of another process writing one it
// reads it again; each time it swaps the records served. A directory
// another process rotates is claimed again at each refresh (claims), so
// that this process takes the rotation over when that one stops. It says
// loudly when a directory has no live key (its service's clients then
// fall back to TLS 1.3) and when it has one again, and which key files
// it cannot use.
func refreshZData(ctx context.Context, zones *authority.Zones, dirs []*zdata.Dir, claims map[*zdata.Dir]*zdata.RotationClaim, https *httpsAdvert, verbose bool, log *slog.Logger) {
	empty := map[*zdata.Dir]bool{}
	skipped := map[*zdata.Dir]string{}
	check := func(d *zdata.Dir) {
		live := len(d.Keyring.Live(clock.Now())) > 0
		switch {
		case !live && !empty[d]:
			log.Warn("0 live Z-data keys: ZTLS clients fall back to TLS 1.3 (is its server rotating? 'ztls serve --zdata DIR' does, or 'ztls zdata rotate DIR' from cron)",
				"dir", d.Path, "host", d.Config.Host, "port", d.Config.Port)
		case live && empty[d]:
			log.Info("Z-data: live keys again", "dir", d.Path)
		}
		empty[d] = !live
		skipped[d] = sayKeysSkipped(log, d, claims[d].Held(), skipped[d])
	}
	for _, d := range dirs {
		// No Changed() here: what changed since LoadDir read the files
		// is refreshed at the first poll.
		check(d)
	}
	refresh := func(d *zdata.Dir) {
		var err error
		if c := claims[d]; c != nil && !c.Held() {
			took, cerr := c.Try(clock.Now())
			if cerr != nil {
				log.Error("Z-data: taking over the rotation", "dir", d.Path, "err", cerr)
			}
			if took {
				log.Info("Z-data: took over the rotation: the process that rotated this directory stopped", "dir", d.Path)
			}
		}
		if claims[d].Held() {
			var added []*zdata.Key
			if added, err = d.Rotate(clock.Now()); len(added) > 0 {
				log.Info("Z-data: added keys", "dir", d.Path, "keys", len(added))
			}
			rotateECH(d, log, clock.Now()) // the rotating process rotates the ECH keys too (zdata_ech.go)
		} else {
			err = keepCurrent(d, clock.Now())
		}
		if err == nil {
			err = serveZData(zones, d, clock.Now(), https)
		}
		if err != nil && verbose {
			log.Error("Z-data", "dir", d.Path, "err", err)
		}
		check(d)
	}
	polls, round := 0, int(10*time.Second/zdataPoll)
	poll := time.NewTicker(zdataPoll)
	defer poll.Stop()
	// Also at each instant a directory's published set changes (a
	// rollover, a twin's start), so that no answer is stale until the
	// next round (docs/soak.md, bug 1).
	var wake changeWake
	defer wake.stop()
	for {
		first, next := nextZDataChange(dirs, clock.Now())
		select {
		case <-ctx.Done():
			return
		case <-poll.C:
			polls++
			for _, d := range dirs {
				if d.Changed() || polls%round == 0 {
					refresh(d)
				}
			}
		case <-wake.wait(first):
			wake.fired()
			now := clock.Now()
			for _, d := range dirs {
				if n := next[d]; !n.IsZero() && !now.Before(n) {
					refresh(d)
				}
			}
		}
	}
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

// keepCurrent picks up rotation in a process that does not rotate: a
// fleet derives its own next keys, others re-read the key files that the
// rotating process or 'ztls zdata rotate' writes (zdata.Dir.Refresh).
func keepCurrent(d *zdata.Dir, now time.Time) error {
	_, err := d.Refresh(now)
	return err
}

// onHUP calls fn on each SIGHUP until ctx is done or the returned stop
// is called.
func onHUP(ctx context.Context, fn func()) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
				fn()
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}
