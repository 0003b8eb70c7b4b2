package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/ztlshttp"
)

type connectFlags struct {
	tls       tlsFlags
	mode      string
	json      bool
	earlyFile string
	sessIn    string
	sessOut   string
	data      string
	// earlyUnsafe sends a request that is not replay-safe as early data.
	earlyUnsafe bool
	timeout     time.Duration
	maxBytes    int
	resolver    string
	transport   string
	budget      time.Duration
	dnsCA       string
	turbo       bool
	turboPort   int
	turboWait   time.Duration
}

func (f *connectFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.mode, "mode", "auto", "connection mode: auto (ZTLS when the server publishes Z-data, else TLS 1.3), ztls, tls")
	fs.BoolVar(&f.json, "json", false, "print the connection report as JSON on stdout (the response goes to stderr)")
	fs.StringVar(&f.earlyFile, "early-data", "", "send FILE as 0-RTT early data, whatever it holds (needs --sess-in with a ticket that allows it; resent after the handshake if rejected). Early data can be replayed by an attacker: only for requests that are safe to repeat")
	fs.StringVar(&f.sessIn, "sess-in", "", "resume the session stored in FILE")
	fs.StringVar(&f.sessOut, "sess-out", "", "store the server's session ticket in FILE (it holds a secret: keep it private)")
	fs.DurationVar(&f.timeout, "timeout", 15*time.Second, "give up after this long")
	fs.IntVar(&f.maxBytes, "max-bytes", 1<<20, "stop reading the response after N bytes")
	fs.StringVar(&f.resolver, "resolver", "", "DNS server for addresses and Z-data, HOST[:PORT] (default: the first nameserver of /etc/resolv.conf)")
	fs.StringVar(&f.transport, "dns-transport", "udp", "DNS transport: udp, tcp or tls (DNS over TLS, RFC 7858)")
	fs.StringVar(&f.dnsCA, "dns-ca", "", "PEM roots for the DNS-over-TLS server (default: the system's)")
	fs.DurationVar(&f.budget, "zdata-budget", 20*time.Millisecond, "how long to wait for Z-data after TCP connects before falling back to TLS 1.3")
	fs.BoolVar(&f.turbo, "turbo", false, "TurboTLS: send the first flight over UDP while TCP connects, to servers whose HTTPS record advertises a UDP port (key65280)")
	fs.IntVar(&f.turboPort, "turbo-port", 0, "the server's TurboTLS UDP port, when not taken from DNS (e.g. connecting to an IP)")
	fs.DurationVar(&f.turboWait, "turbo-wait", 0, "wait this long for the UDP flight after TCP connects (default: half the TCP connect time, at least 2 ms)")
	f.tls.register(fs, false)
}

func init() {
	var f connectFlags
	cmd := &cobra.Command{
		Use:   "connect HOST:PORT",
		Short: "Open a TLS 1.3 connection, send a request, print the response (like openssl s_client)",
		Long: `Connect to HOST:PORT, send --data (or standard input when it is not a
terminal), print what comes back, and report what was negotiated and where
the time went.

With --mode auto (the default) the address, the Z-data (TXT, CERT), the TLSA
and HTTPS records are looked up at once; TCP starts on the first address; if
valid Z-data is in hand when TCP is up (within --zdata-budget) a request
that is safe to replay (see below) rides with the ClientHello (ZTLS), else
plain TLS 1.3, and the report says why. A server that aborts on the ztls
ClientHello is retried without it and remembered for 24 hours (in the user
cache dir, ztls/ztls-aborts.json).

Early data can be replayed: an attacker who records the ClientHello and
its early data can send them to the server again, and the server may act
on the request twice (RFC 8446, Section 8). So only a request that is safe
to repeat goes early by default: one whole HTTP GET, HEAD or OPTIONS
request (RFC 8470, Section 4.1). Anything else (a POST, PUT or DELETE, or
--data that is not an HTTP request) is sent after a plain TLS 1.3
handshake, and the report says why. --early-unsafe sends it early anyway:
use it only when a replay is harmless or the server refuses replays itself
(e.g. answers 425 Too Early to requests marked Early-Data: 1).

Resumption and 0-RTT: the first run stores the server's ticket with
--sess-out; a second run with --sess-in resumes, and with --early-data
sends the file with its ClientHello (0-RTT), whatever it holds: the same
replay risk, taken on explicitly.`,
		Example: `  ztls connect 127.0.0.1:8443 --ca cert.pem --servername localhost --data 'ping'
  ztls connect example.test:443 --json
  # a POST goes after the handshake; to accept that it may be replayed:
  ztls connect example.test:443 --early-unsafe \
      --data $'POST /vote HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\n\r\n'
  # resumption with 0-RTT
  ztls connect 127.0.0.1:8443 --ca ca.pem --sess-out sess.bin --data hi
  printf 'GET / HTTP/1.0\r\n\r\n' > req.txt
  ztls connect 127.0.0.1:8443 --ca ca.pem --sess-in sess.bin --early-data req.txt --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var req []byte
			if f.data != "" {
				req = []byte(f.data)
			} else if st, err := os.Stdin.Stat(); err == nil && st.Mode()&os.ModeCharDevice == 0 {
				req, _ = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
			}
			return runConnect(&f, args[0], req)
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "", "request to send (default: standard input when it is a pipe or file); early data only if it is a GET, HEAD or OPTIONS request")
	cmd.Flags().BoolVar(&f.earlyUnsafe, "early-unsafe", false, "also send a request that is not replay-safe (a POST, non-HTTP data) as early data, accepting that an attacker may replay it to the server")
	f.register(cmd)
	rootCmd.AddCommand(cmd)

	var g connectFlags
	get := &cobra.Command{
		Use:   "get URL",
		Short: "HTTP GET over TLS 1.3 and print the response",
		Long: `Fetch URL (https://HOST[:PORT]/PATH) with HTTP/1.1 over a ztls connection
and print the response; --json prints the connection report instead.`,
		Example: `  ztls get https://localhost:8443/ --ca cert.pem
  ztls get https://localhost:8443/index.html --ca cert.pem --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := url.Parse(args[0])
			if err != nil || u.Scheme != "https" || u.Host == "" {
				return fmt.Errorf("want an https:// URL, got %q", args[0])
			}
			host := u.Host
			if u.Port() == "" {
				host = net.JoinHostPort(u.Hostname(), "443")
			}
			path := u.RequestURI()
			req := []byte(fmt.Sprintf("GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: ztls\r\nConnection: close\r\n\r\n", path, u.Host))
			if len(g.tls.alpn) == 0 {
				g.tls.alpn = []string{"http/1.1"}
			}
			return runConnect(&g, host, req)
		},
	}
	g.register(get)
	rootCmd.AddCommand(get)
}

func runConnect(f *connectFlags, addr string, req []byte) error {
	cfg, err := f.tls.config(false)
	if err != nil {
		return err
	}
	safe, notEarly := earlyPolicy(f, req)
	if !safe && notEarly != "" && f.mode == "ztls" {
		return fmt.Errorf("--mode ztls sends the request as early data, but %s: pass --early-unsafe to send it early anyway (an attacker may replay it), or use --mode auto to send it after the handshake", notEarly)
	}
	opts := dial.Options{Mode: f.mode, TLS: cfg, Request: req, ReadResponse: f.maxBytes, Out: os.Stdout,
		ZDataBudget: f.budget, ReplaySafe: safe, Turbo: f.turbo || f.turboPort != 0}
	opts.TurboPort, opts.TurboWait = f.turboPort, f.turboWait
	if path := dial.DefaultMemoryPath(); path != "" {
		// Servers that aborted on ztls are remembered for 24 h across runs.
		opts.Memory = dial.OpenMemory(path)
	}
	{
		// The T-DNS resolver also finds the address in --mode tls.
		res, err := newResolver(f.resolver, f.transport, f.dnsCA)
		if err != nil {
			return err
		}
		defer res.Close()
		opts.Resolver = res
	}
	if f.json {
		opts.Out = os.Stderr
	}
	if f.sessIn != "" {
		data, err := os.ReadFile(f.sessIn)
		if err != nil {
			return fmt.Errorf("--sess-in: %w", err)
		}
		s := new(tls13.ClientSession)
		if err := s.UnmarshalBinary(data); err != nil {
			return fmt.Errorf("--sess-in %s: %w", f.sessIn, err)
		}
		opts.Session = s
	}
	if f.earlyFile != "" {
		data, err := os.ReadFile(f.earlyFile)
		if err != nil {
			return fmt.Errorf("--early-data: %w", err)
		}
		if len(req) > 0 {
			return fmt.Errorf("use one of --data (or standard input) and --early-data")
		}
		if opts.Session == nil && f.mode == "tls" {
			fmt.Fprintln(os.Stderr, "ztls: --early-data without --sess-in: sending the data after the handshake instead")
		}
		if ok, why := ztlshttp.EarlySafe(data); !ok {
			fmt.Fprintf(os.Stderr, "ztls: --early-data: %s; sending it as early data anyway, as asked\n", why)
		}
		// Early by the user's choice: replay-safe as far as dial is concerned.
		opts.Request, opts.ResumeEarly, opts.ReplaySafe = data, true, true
		notEarly = ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	res, err := dial.Connect(ctx, addr, opts)
	if err != nil {
		return err
	}
	defer res.Conn.Close()
	if res.Report.FallbackReason == dial.ReasonNoEarly && notEarly != "" {
		res.Report.FallbackReason = "request sent after the handshake, not as early data: " + notEarly +
			" (--early-unsafe sends it early, accepting that it may be replayed)"
	}
	if f.sessOut != "" {
		if res.Session == nil {
			fmt.Fprintln(os.Stderr, "ztls: the server sent no session ticket; nothing stored in", f.sessOut)
		} else {
			data, err := res.Session.MarshalBinary()
			if err != nil {
				return err
			}
			if err := os.WriteFile(f.sessOut, data, 0o600); err != nil {
				return err
			}
		}
	}
	if f.json {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		enc.Encode(res.Report)
		os.Stdout.Write(buf.Bytes())
		return nil
	}
	res.Report.WriteText(os.Stderr)
	return nil
}

// earlyPolicy says whether req may go as early data (dial's ReplaySafe)
// and, when not, why. Only a request whose replay is harmless goes early
// by default (RFC 8470, Section 4.1); --early-unsafe lets any through.
func earlyPolicy(f *connectFlags, req []byte) (safe bool, why string) {
	if len(req) == 0 {
		return false, ""
	}
	ok, why := ztlshttp.EarlySafe(req)
	if !ok && f.earlyUnsafe {
		fmt.Fprintf(os.Stderr, "ztls: %s; sending it as early data anyway (--early-unsafe)\n", why)
		return true, ""
	}
	return ok, why
}

// newResolver makes the T-DNS resolver for --resolver/--dns-transport.
func newResolver(server, transport, caFile string) (*resolver.Resolver, error) {
	var cfg resolver.Config
	if server == "" {
		c, err := resolver.FromResolvConf("/etc/resolv.conf")
		if err != nil {
			return nil, fmt.Errorf("no --resolver given and /etc/resolv.conf unusable: %w", err)
		}
		cfg = c
	} else {
		cfg.Servers = []string{server}
	}
	switch resolver.Transport(transport) {
	case resolver.UDP, resolver.TCP, resolver.TLS:
		cfg.Transport = resolver.Transport(transport)
	default:
		return nil, fmt.Errorf("--dns-transport: want udp, tcp or tls, got %q", transport)
	}
	if caFile != "" {
		pool, err := tls13.LoadCertPool(caFile)
		if err != nil {
			return nil, err
		}
		cfg.TLSConfig = &tls.Config{RootCAs: pool}
	}
	return resolver.New(cfg)
}
