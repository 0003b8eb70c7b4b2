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

	"github.com/ztls-project/ztls/dns/resolver"
)

type lookupFlags struct {
	qtype      string
	port       int
	resolvers  []string
	transport  string
	ca         string
	servername string
	json       bool
	timeout    time.Duration
	resolvConf string
}

func init() {
	var f lookupFlags
	cmd := &cobra.Command{
		Use:   "lookup NAME",
		Short: "Look a name up, dig-style, over UDP, TCP or DNS over TLS",
		Long: `Ask a recursive resolver for NAME and print each answer with the time it
took, like dig. The resolver is the T-DNS one ztls uses itself: over TCP and
DNS over TLS (RFC 7858) it keeps one connection open, pipelines queries and
matches answers that come back out of order.

--type takes any record type (A, AAAA, TXT, TLSA, HTTPS, CERT, MX, ...) or
"ztls": the parallel lookup ztls makes before it connects to NAME:PORT. It
asks at once for
  A and AAAA                 NAME
  TXT and CERT (Z-data)      _ztls._PORT._tcp.NAME
  TLSA (DANE)                _PORT._tcp.NAME
  HTTPS                      NAME for port 443, else _PORT._https.NAME
and prints each answer the moment it lands, then the total.

The resolvers come from /etc/resolv.conf unless --resolver names them.
With --dns-transport tls they are reached on port 853 unless ADDR names a
port; the certificate must name --servername (default: the resolver's
address) and chain to --ca (default: the system roots).

With --json each answer is one JSON object on its own line, printed as it
lands; --type ztls adds a last line with kind "service" summing up.`,
		Example: `  ztls lookup www.example.test
  ztls lookup www.example.test --type AAAA --resolver 127.0.0.1:5353
  ztls lookup www.example.test --type ztls --port 8443 --resolver 127.0.0.1:5353 --dns-transport tcp
  ztls lookup www.example.test --type ztls --resolver 127.0.0.1:853 --dns-transport tls \
      --ca ca.pem --servername dns.example.test --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLookup(cmd.Context(), cmd.OutOrStdout(), &f, args[0])
		},
	}
	fs := cmd.Flags()
	fs.StringVarP(&f.qtype, "type", "t", "A", `record type to ask for, or "ztls" for the parallel service lookup`)
	fs.IntVarP(&f.port, "port", "p", 443, "service port for --type ztls")
	fs.StringSliceVar(&f.resolvers, "resolver", nil, "resolver ADDR[:PORT] to ask, repeatable (default: /etc/resolv.conf)")
	fs.StringVar(&f.transport, "dns-transport", "", "udp, tcp or tls (default: udp, or tcp with 'options use-vc')")
	fs.StringVar(&f.ca, "ca", "", "PEM file of roots the DNS over TLS server must chain to (default: the system's)")
	fs.StringVar(&f.servername, "servername", "", "name the DNS over TLS certificate must carry (default: the resolver's host)")
	fs.BoolVar(&f.json, "json", false, "print one JSON object per answer, one per line")
	fs.DurationVar(&f.timeout, "timeout", 5*time.Second, "time budget of each query, retries included")
	fs.StringVar(&f.resolvConf, "resolv-conf", "/etc/resolv.conf", "resolv.conf to read when --resolver is not given")
	rootCmd.AddCommand(cmd)
}

// lookupConfig turns the flags into a resolver configuration.
func lookupConfig(f *lookupFlags) (resolver.Config, error) {
	var cfg resolver.Config
	if len(f.resolvers) > 0 {
		cfg.Servers = f.resolvers
		cfg.Transport = resolver.UDP
	} else {
		var err error
		if cfg, err = resolver.FromResolvConf(f.resolvConf); err != nil {
			return cfg, err
		}
	}
	if f.transport != "" {
		switch t := resolver.Transport(strings.ToLower(f.transport)); t {
		case resolver.UDP, resolver.TCP, resolver.TLS:
			cfg.Transport = t
		default:
			return cfg, fmt.Errorf("lookup: --dns-transport %q: want udp, tcp or tls", f.transport)
		}
	}
	if cfg.Transport == resolver.TLS && len(f.resolvers) == 0 {
		// resolv.conf names plain DNS servers on port 53; DoT is on 853.
		for i, s := range cfg.Servers {
			if host, _, err := net.SplitHostPort(s); err == nil {
				cfg.Servers[i] = net.JoinHostPort(host, "853")
			}
		}
	}
	if cfg.Transport == resolver.TLS {
		tc := &tls.Config{ServerName: f.servername}
		if f.ca != "" {
			pem, err := os.ReadFile(f.ca)
			if err != nil {
				return cfg, fmt.Errorf("lookup: --ca: %w", err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return cfg, fmt.Errorf("lookup: --ca %s: no PEM certificate in it", f.ca)
			}
		}
		cfg.TLSConfig = tc
	} else if f.ca != "" || f.servername != "" {
		return cfg, errors.New("lookup: --ca and --servername need --dns-transport tls")
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
	qtype, ok := dns.StringToType[strings.ToUpper(f.qtype)]
	if !ok {
		n, err := strconv.Atoi(strings.TrimPrefix(strings.ToUpper(f.qtype), "TYPE"))
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("lookup: unknown record type %q", f.qtype)
		}
		qtype = uint16(n)
	}
	a, err := r.Lookup(ctx, name, qtype)
	printLookupAnswer(out, f.json, *a, server)
	return err
}

func runServiceLookup(ctx context.Context, out io.Writer, f *lookupFlags, r *resolver.Resolver, host, server string, tr resolver.Transport) error {
	if !f.json {
		fmt.Fprintf(out, ";; ztls service lookup: %s port %d via %s over %s\n\n", dns.Fqdn(host), f.port, server, tr)
	}
	var mu sync.Mutex
	res, err := r.LookupService(ctx, host, f.port, func(a resolver.Answer) {
		mu.Lock()
		defer mu.Unlock()
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
	if f.json {
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
