package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/ztlshttp"
)

type lookupFlags struct {
	qtype string
	port  int
	dns   dnsClientFlags
	json  bool
	short bool // +short: only the records' data
}

// dnsClientFlags say how a command reaches DNS: lookup and zdata check
// share them, and connect, get and prefetch build them from their own
// flags (connectFlags.dnsClient), so that --resolver, --dns-transport,
// --dns-ca, --dns-servername and ZTLS_RESOLVER mean one thing everywhere.
type dnsClientFlags struct {
	resolvers  []string
	transport  string
	ca         string // --dns-ca: roots of a DNS-over-TLS resolver
	servername string // --dns-servername
	dnsPort    int    // -p / --dns-port: port of resolvers that name none
	timeout    time.Duration
	resolvConf string
}

// register adds the flags; dig adds dig's -p for --dns-port and keeps
// lookup's old spellings --ca and --servername as deprecated aliases.
func (f *dnsClientFlags) register(fs *pflag.FlagSet, dig bool) {
	fs.StringSliceVar(&f.resolvers, "resolver", nil, "resolver ADDR[:PORT] to ask, repeatable, tried in order (default: $ZTLS_RESOLVER, else /etc/resolv.conf)")
	fs.StringVar(&f.transport, "dns-transport", "", "udp, tcp or tls (default: udp, or tcp with resolv.conf's 'options use-vc')")
	fs.StringVar(&f.ca, "dns-ca", "", "PEM roots the DNS-over-TLS resolver's certificate must chain to (default: the system's)")
	fs.StringVar(&f.servername, "dns-servername", "", "name the DNS-over-TLS resolver's certificate must carry (default: the resolver's host)")
	if dig {
		fs.IntVarP(&f.dnsPort, "dns-port", "p", 0, "port of the resolvers that name none, as dig's -p (default: 53, or 853 with --dns-transport tls)")
		fs.StringVar(&f.ca, "ca", "", "old name of --dns-ca")
		fs.MarkDeprecated("ca", "use --dns-ca (--ca is the TLS server's roots in every other command)")
		fs.StringVar(&f.servername, "servername", "", "old name of --dns-servername")
		fs.MarkDeprecated("servername", "use --dns-servername")
	} else {
		fs.IntVar(&f.dnsPort, "dns-port", 0, "port of the resolvers that name none (default: 53, or 853 with --dns-transport tls)")
	}
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "time budget of each query, retries included")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "resolv.conf to read when --resolver is not given")
}

func init() {
	var f lookupFlags
	cmd := &cobra.Command{
		Use:   "lookup [@SERVER] NAME [TYPE] [+short] [+tcp|+tls]",
		Short: "Look a name up, dig-style, over UDP, TCP or DNS over TLS",
		Long: `Ask a recursive resolver for NAME and print each answer with the time it
took, like dig. The resolver is the T-DNS one ztls uses itself: over TCP and
DNS over TLS (RFC 7858) it keeps one connection open, pipelines queries and
matches answers that come back out of order.

dig's habits work: @SERVER names the resolver (as --resolver), a TYPE after
NAME is the record type (as --type), -p PORT is the resolver's port (as
--dns-port), +short prints only the records' data, +tcp (+vc) and +tls
choose the transport (as --dns-transport).

The type is any record type (A, AAAA, TXT, TLSA, HTTPS, CERT, MX, ...) or
"ztls": the parallel lookup ztls makes before it connects to NAME:PORT
(--port, the service's port). It asks at once for
  A and AAAA                 NAME
  TXT and CERT (Z-data)      _ztls._PORT._tcp.NAME
  TLSA (DANE)                _PORT._tcp.NAME
  HTTPS                      NAME for port 443, else _PORT._https.NAME
and prints each answer the moment it lands, then the total.

The resolvers come from @SERVER or --resolver (repeatable, tried in
order), else from ZTLS_RESOLVER (HOST[:PORT], as the Go client reads it),
else from /etc/resolv.conf. A resolver without a port is reached on -p, else on 53 (853
with --dns-transport tls). Over TLS its certificate must name
--dns-servername (default: the resolver's address) and chain to --dns-ca
(default: the system roots).

With --json each answer is one JSON object on its own line, printed as it
lands; --type ztls adds a last line with kind "service" summing up.`,
		Example: `  ztls lookup www.example.test
  ztls lookup @127.0.0.1 -p 5353 www.example.test AAAA +short
  ztls lookup www.example.test --type AAAA --resolver 127.0.0.1:5353
  ZTLS_RESOLVER=127.0.0.1:5353 ztls lookup www.example.test ztls +short
  ztls lookup www.example.test ztls --port 8443 --resolver 127.0.0.1:5353 --dns-transport tcp
  ztls lookup www.example.test --type ztls --resolver 127.0.0.1:853 --dns-transport tls \
      --dns-ca ca.pem --dns-servername dns.example.test --json`,
		Args: cobra.RangeArgs(1, 6),
		RunE: func(cmd *cobra.Command, args []string) error {
			g := f // the words below change this run only
			name, err := parseDigArgs(&g, args, cmd.Flags().Changed("type"))
			if err != nil {
				return err
			}
			return runLookup(cmd.Context(), cmd.OutOrStdout(), &g, name)
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.qtype, "type", "t", "A", `record type to ask for, or "ztls" for the parallel service lookup`)
	fs.IntVar(&f.port, "port", 443, "the service's TCP port, for --type ztls (the resolver's port is -p)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per answer, one per line")
	f.dns.register(fs, true)
	rootCmd.AddCommand(cmd)
}

// digOptions are the +options lookup understands.
var digOptions = "+short, +tcp, +vc, +notcp, +tls, +notls"

// parseDigArgs reads dig-style words: @SERVER, NAME, TYPE and +options.
// typeFlag says --type was given, so a TYPE word must agree with it.
func parseDigArgs(f *lookupFlags, args []string, typeFlag bool) (string, error) {
	var words []string
	var servers []string
	for _, a := range args {
		switch {
		case strings.HasPrefix(a, "@"):
			if len(a) == 1 {
				return "", errors.New("lookup: @ needs a server, e.g. @127.0.0.1 or @127.0.0.1:5353")
			}
			servers = append(servers, a[1:])
		case strings.HasPrefix(a, "+"):
			switch strings.ToLower(a) {
			case "+short":
				f.short = true
			case "+noshort":
				f.short = false
			case "+tcp", "+vc":
				f.dns.transport = string(resolver.TCP)
			case "+notcp", "+novc", "+notls":
				f.dns.transport = string(resolver.UDP)
			case "+tls":
				f.dns.transport = string(resolver.TLS)
			default:
				return "", fmt.Errorf("lookup: %s: unknown option; lookup understands %s (and flags: ztls lookup --help)", a, digOptions)
			}
		default:
			words = append(words, a)
		}
	}
	if len(servers) > 0 {
		f.dns.resolvers = append(append([]string(nil), f.dns.resolvers...), servers...)
	}
	var name, typ string
	switch len(words) {
	case 0:
		return "", errors.New("lookup: give a NAME to look up, e.g. ztls lookup www.example.org AAAA")
	case 1:
		name = words[0]
	case 2:
		switch {
		case isQueryType(words[1]):
			name, typ = words[0], words[1]
		case isQueryType(words[0]):
			typ, name = words[0], words[1]
		default:
			return "", fmt.Errorf("lookup: %q is not a record type (give one NAME, then a TYPE such as A, AAAA, TXT, TLSA, HTTPS or ztls)", words[1])
		}
	default:
		return "", fmt.Errorf("lookup: one NAME and at most one TYPE, got %q", strings.Join(words, " "))
	}
	if typ != "" {
		if typeFlag && !strings.EqualFold(typ, f.qtype) {
			return "", fmt.Errorf("lookup: type %s and --type %s disagree: give one", typ, f.qtype)
		}
		f.qtype = typ
	}
	return name, nil
}

// isQueryType says whether s names a record type (or "ztls").
func isQueryType(s string) bool {
	_, err := parseQueryType(s)
	return err == nil || strings.EqualFold(s, "ztls")
}

// parseQueryType parses a type name or TYPEnnn (RFC 3597).
func parseQueryType(s string) (uint16, error) {
	if t, ok := dns.StringToType[strings.ToUpper(s)]; ok {
		return t, nil
	}
	u := strings.ToUpper(s)
	if strings.HasPrefix(u, "TYPE") {
		if n, err := strconv.Atoi(u[len("TYPE"):]); err == nil && n >= 1 && n <= 65535 {
			return uint16(n), nil
		}
	}
	return 0, fmt.Errorf("lookup: unknown record type %q (A, AAAA, TXT, TLSA, HTTPS, CERT, MX, ..., TYPEnnn, or ztls)", s)
}

// lookupConfig turns the flags into a resolver configuration.
func lookupConfig(f *lookupFlags) (resolver.Config, error) {
	return f.dns.config("lookup")
}

// config turns the flags into a resolver configuration; cmd prefixes
// errors.
func (f *dnsClientFlags) config(cmd string) (resolver.Config, error) {
	var cfg resolver.Config
	if f.dnsPort < 0 || f.dnsPort > 65535 {
		return cfg, fmt.Errorf("%s: --dns-port %d: want a port from 1 to 65535 (0: the default)", cmd, f.dnsPort)
	}
	if f.timeout <= 0 {
		return cfg, fmt.Errorf("%s: --timeout %v: want a positive duration, e.g. 5s", cmd, f.timeout)
	}
	servers, from := f.resolvers, "--resolver"
	if len(servers) == 0 {
		// As the Go client (ztlshttp.DefaultResolver): the environment's
		// server before resolv.conf's.
		if env := os.Getenv(ztlshttp.ResolverEnv); env != "" {
			servers, from = []string{env}, ztlshttp.ResolverEnv
		}
	}
	fromConf := len(servers) == 0
	if !fromConf {
		cfg.Servers = append([]string(nil), servers...)
		cfg.Transport = resolver.UDP
	} else {
		var err error
		if cfg, err = resolver.FromResolvConf(f.resolvConf); err != nil {
			return cfg, fmt.Errorf("%s: no --resolver given, no %s set, and %w", cmd, ztlshttp.ResolverEnv, err)
		}
	}
	if f.transport != "" {
		switch t := resolver.Transport(strings.ToLower(f.transport)); t {
		case resolver.UDP, resolver.TCP, resolver.TLS:
			cfg.Transport = t
		default:
			return cfg, fmt.Errorf("%s: --dns-transport %q: want udp, tcp or tls", cmd, f.transport)
		}
	}
	port := f.dnsPort
	if port == 0 {
		port = 53
		if cfg.Transport == resolver.TLS {
			port = 853
		}
	}
	for i, s := range cfg.Servers {
		host, p, err := net.SplitHostPort(s)
		if err != nil {
			// No port: a name, an IPv4 address, or an IPv6 one with or
			// without brackets.
			cfg.Servers[i] = net.JoinHostPort(strings.Trim(s, "[]"), strconv.Itoa(port))
			continue
		}
		if fromConf && (f.dnsPort != 0 || cfg.Transport == resolver.TLS) {
			// resolv.conf names plain DNS servers on port 53.
			cfg.Servers[i] = net.JoinHostPort(host, strconv.Itoa(port))
			continue
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return cfg, fmt.Errorf("%s: resolver %q (%s): the port must be a number from 1 to 65535", cmd, s, from)
		}
	}
	if cfg.Transport == resolver.TLS {
		tc := &tls.Config{ServerName: f.servername}
		if f.ca != "" {
			pem, err := os.ReadFile(f.ca)
			if err != nil {
				return cfg, fmt.Errorf("%s: --dns-ca: %w", cmd, err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("%s: --dns-ca %s: no PEM certificate in it", cmd, f.ca)
			}
		}
		cfg.TLSConfig = tc
	} else if f.ca != "" || f.servername != "" {
		return cfg, fmt.Errorf("%s: --dns-ca and --dns-servername are for a DNS-over-TLS resolver: add --dns-transport tls", cmd)
	}
	cfg.Timeout = f.timeout
	return cfg, nil
}

func runLookup(ctx context.Context, out io.Writer, f *lookupFlags, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := lookupConfig(f)
	if err != nil {
		return err
	}
	r, err := resolver.New(cfg)
	if err != nil {
		return err
	}
	defer r.Close()
	server := strings.Join(cfg.Servers, ",")

	if strings.EqualFold(f.qtype, "ztls") {
		return runServiceLookup(ctx, out, f, r, name, server, cfg.Transport)
	}
	qtype, err := parseQueryType(f.qtype)
	if err != nil {
		return err
	}
	a, err := r.Lookup(ctx, name, qtype)
	if f.short {
		printShort(out, *a)
	} else {
		printLookupAnswer(out, f.json, *a, server)
	}
	return err
}

func runServiceLookup(ctx context.Context, out io.Writer, f *lookupFlags, r *resolver.Resolver, host, server string, tr resolver.Transport) error {
	if f.port < 1 || f.port > 65535 {
		return fmt.Errorf("lookup: --port %d: want the service's port, 1 to 65535", f.port)
	}
	if !f.json && !f.short {
		fmt.Fprintf(out, ";; ztls service lookup: %s port %d via %s over %s\n\n", dns.Fqdn(host), f.port, server, tr)
	}
	var mu sync.Mutex
	res, err := r.LookupService(ctx, host, f.port, func(a resolver.Answer) {
		mu.Lock()
		defer mu.Unlock()
		if f.short {
			printShort(out, a)
			return
		}
		printLookupAnswer(out, f.json, a, server)
	})
	if res == nil {
		return err
	}
	failed := 0
	for _, a := range res.Answers() {
		if a.Err != nil {
			failed++
		}
	}
	addrs := res.Addrs()
	if f.short {
		// +short prints the records alone.
	} else if f.json {
		summary := struct {
			Kind      string   `json:"kind"`
			Host      string   `json:"host"`
			Port      int      `json:"port"`
			TimeMS    float64  `json:"time_ms"`
			Addresses []string `json:"addresses"`
			Failed    int      `json:"failed"`
		}{"service", res.Host, res.Port, ms(res.Took), make([]string, 0, len(addrs)), failed}
		for _, a := range addrs {
			summary.Addresses = append(summary.Addresses, a.String())
		}
		b, _ := json.Marshal(summary)
		fmt.Fprintln(out, string(b))
	} else {
		fmt.Fprintf(out, ";; all 6 answers in %.2f ms (%d failed); addresses: %v\n", ms(res.Took), failed, addrs)
	}
	if err != nil {
		return fmt.Errorf("lookup: %w", err)
	}
	if failed == len(res.Answers()) {
		return errors.New("lookup: every query failed")
	}
	return nil
}

// lookupJSON is one answer in --json output.
type lookupJSON struct {
	Kind      string         `json:"kind"`
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Rcode     string         `json:"rcode,omitempty"`
	TimeMS    float64        `json:"time_ms"`
	Transport string         `json:"transport,omitempty"`
	Server    string         `json:"server"`
	FromCache bool           `json:"from_cache"`
	Records   []lookupRecord `json:"records"`
	Error     string         `json:"error,omitempty"`
}

type lookupRecord struct {
	Name string `json:"name"`
	TTL  uint32 `json:"ttl"`
	Type string `json:"type"`
	Data string `json:"data"`
}

func printLookupAnswer(out io.Writer, asJSON bool, a resolver.Answer, server string) {
	typ := dns.Type(a.Qtype).String()
	if asJSON {
		j := lookupJSON{Kind: "answer", Name: a.Name, Type: typ, TimeMS: ms(a.Took), Transport: a.Transport,
			Server: server, FromCache: a.FromCache, Records: []lookupRecord{}}
		if a.Err != nil {
			j.Error = a.Err.Error()
		} else {
			j.Rcode = dns.RcodeToString[a.Rcode]
		}
		for _, rr := range a.RRs {
			h := rr.Header()
			j.Records = append(j.Records, lookupRecord{Name: h.Name, TTL: h.Ttl, Type: dns.Type(h.Rrtype).String(),
				Data: strings.TrimSpace(strings.TrimPrefix(rr.String(), h.String()))})
		}
		b, _ := json.Marshal(j)
		fmt.Fprintln(out, string(b))
		return
	}
	status := dns.RcodeToString[a.Rcode]
	if a.Err != nil {
		status = "ERROR " + a.Err.Error()
	} else if a.Rcode == dns.RcodeSuccess && len(a.RRs) == 0 {
		status = "NOERROR (no records)"
	}
	via := a.Transport
	if a.FromCache {
		via = "cache"
	}
	fmt.Fprintf(out, ";; %s %s  %s  %.2f ms  %s %s\n", a.Name, typ, status, ms(a.Took), via, server)
	for _, rr := range a.RRs {
		fmt.Fprintln(out, rr.String())
	}
	if a.Reply != nil && len(a.RRs) == 0 {
		for _, rr := range a.Reply.Ns {
			if soa, ok := rr.(*dns.SOA); ok {
				fmt.Fprintf(out, "; authority: %s\n", soa.String())
			}
		}
	}
	fmt.Fprintln(out)
}

// printShort prints each record's data alone, one a line, as dig +short.
func printShort(out io.Writer, a resolver.Answer) {
	for _, rr := range a.RRs {
		h := rr.Header()
		fmt.Fprintln(out, strings.TrimSpace(strings.TrimPrefix(rr.String(), h.String())))
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
