package main

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/ztlshttp"
)

type connectFlags struct {
	name      string // the command: connect, get or prefetch (errors name it)
	tls       tlsFlags
	mode      string
	json      bool
	earlyFile string
	sessIn    string
	sessOut   string
	data      string
	// earlyUnsafe sends a request that is not replay-safe as early data.
	earlyUnsafe bool
	// raw sends --data as given, a request line alone too (connect).
	raw bool
	// showCerts prints the server's chain as PEM (connect).
	showCerts bool
	// addrs, if set, are where to connect instead of the host's A/AAAA
	// (get --resolve); the host still names the server and its Z-data.
	addrs []netip.Addr
	// out, if set, wraps where the response goes (get's -o and --fail).
	out      func(io.Writer) io.Writer
	timeout  time.Duration
	maxBytes int
	budget   time.Duration
	noBFE    bool
	// zdataFrom is --zdata-from: which record Z-data is taken from.
	zdataFrom string
	// pq is --pq: the post-quantum policy (connect_pq.go).
	pq string
	// echRequire and echOff are --ech and --no-ech (connect_ech.go).
	echRequire, echOff bool
	// How DNS is reached, as lookup's flags say it (dnsClient).
	resolvers     []string
	transport     string
	dnsCA         string
	dnsServername string
	turbo         bool
	turboPort     int
	turboWait     time.Duration
	ocsp          string
	// get --prefetch-links (prefetch.go)
	prefetchLinks   bool
	linkConcurrency int
}

func (f *connectFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.mode, "mode", "auto", "connection mode: auto (ZTLS when the server publishes Z-data, else TLS 1.3), ztls, tls")
	fs.BoolVar(&f.json, "json", false, "print the connection report as JSON on stdout (the response goes to stderr)")
	fs.StringVar(&f.earlyFile, "early-data", "", "send FILE as 0-RTT early data, whatever it holds (needs --sess-in with a ticket that allows it; resent after the handshake if rejected). Early data can be replayed by an attacker: only for requests that are safe to repeat")
	fs.StringVar(&f.sessIn, "sess-in", "", "resume the session stored in FILE")
	fs.StringVar(&f.sessOut, "sess-out", "", "store the server's session ticket in FILE (it holds a secret: keep it private)")
	fs.DurationVar(&f.timeout, "timeout", 15*time.Second, "give up after this long (a response not finished by then is an error); typing on a terminal does not count")
	fs.IntVar(&f.maxBytes, "max-bytes", 1<<20, "read at most N bytes of response")
	f.registerDNS(fs)
	fs.DurationVar(&f.budget, "zdata-budget", 20*time.Millisecond, "how long to wait for the Z-data answers after TCP connects before falling back to TLS 1.3 (their checks, OCSP included, are waited for once the answers are in)")
	fs.StringVar(&f.zdataFrom, "zdata-from", "https", "which DNS record Z-data is taken from: https (the HTTPS record asked anyway, key65370; the TXT record asked only when it carries none, a second round trip), both (HTTPS and TXT asked at once: one query more, never a second round trip) or txt (the TXT record only, as clients before the HTTPS record did); the report says which record was used")
	f.registerPQ(fs)
	f.registerECH(fs)
	fs.BoolVar(&f.noBFE, "no-bfe", false, "act as a client without Bloom filter encryption: use a server's v1 Z-data records, not its v2 records with bfe=")
	fs.BoolVar(&f.turbo, "turbo", false, "TurboTLS: send the first flight over UDP while TCP connects, to servers whose HTTPS record advertises a UDP port (key65280)")
	fs.IntVar(&f.turboPort, "turbo-port", 0, "the server's TurboTLS UDP port, when not taken from DNS (e.g. connecting to an IP)")
	fs.DurationVar(&f.turboWait, "turbo-wait", 0, "wait this long for the UDP flight after TCP connects (default: half the TCP connect time, at least 2 ms)")
	fs.StringVar(&f.ocsp, "ocsp", "off", "ask the certificate's OCSP responder before trusting it: off, soft (no answer passes, as browsers do) or hard (only a good answer passes); answers prefetched ('ztls prefetch') are used until their nextUpdate")
	f.tls.register(fs, false)
}

// registerDNS adds the flags that say how connect, get and prefetch reach
// DNS, named and meaning as in lookup.
func (f *connectFlags) registerDNS(fs *pflag.FlagSet) {
	fs.StringSliceVar(&f.resolvers, "resolver", nil, "DNS server for addresses and Z-data, HOST[:PORT], repeatable, tried in order (default: $"+ztlshttp.ResolverEnv+", else the nameservers of /etc/resolv.conf)")
	fs.StringVar(&f.transport, "dns-transport", "", "DNS transport: udp, tcp or tls (DNS over TLS, RFC 7858, port 853 unless --resolver names one) (default: udp, or tcp with resolv.conf's 'options use-vc')")
	fs.StringVar(&f.dnsCA, "dns-ca", "", "PEM roots the DNS-over-TLS resolver's certificate must chain to (default: the system's)")
	fs.StringVar(&f.dnsServername, "dns-servername", "", "name the DNS-over-TLS resolver's certificate must carry (default: the resolver's host)")
}

// dnsClient is the DNS flags as lookup's, for dnsClientFlags.config.
func (f *connectFlags) dnsClient() *dnsClientFlags {
	return &dnsClientFlags{resolvers: f.resolvers, transport: f.transport, ca: f.dnsCA, servername: f.dnsServername,
		timeout: resolver.DefaultTimeout, resolvConf: "/etc/resolv.conf"}
}

// The help of connect and get.
const (
	connectLong = `Connect to HOST:PORT, send --data (or standard input when it is not a
terminal), print what comes back, and report what was negotiated and where
the time went.

With --mode auto (the default) the address, the HTTPS record (which may
carry the Z-data, key65370), the TLSA and the CERT records are looked up at
once; the TXT record, the other home of Z-data, only when the HTTPS record
carries none (a second round trip), or at once with --zdata-from both, or
alone with --zdata-from txt. TCP starts on the first address; if valid
Z-data is in hand when TCP is up (within --zdata-budget) a request that is
safe to replay (see below) rides with the ClientHello (ZTLS), else plain
TLS 1.3, and the report says why and which record the Z-data came from. A server that aborts on the ztls
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
replay risk, taken on explicitly.

The end: once the request is sent (--data, or standard input up to its
end) connect sends close_notify, closing its side only (a TLS half-close,
RFC 8446, Section 6.1), and reads until the server closes: an echo server
ends there too. An HTTP/1.x request (e.g. --data $'GET / HTTP/1.1\r\n...')
is different: its response has its own end (Content-Length, chunked),
where connect stops as get does, without the half-close (which HTTP
servers may take for the client going away). On a terminal connect is
interactive: each line typed is sent, what comes back is printed, Ctrl-D
ends the input (the half-close) and Ctrl-C quits; --timeout then bounds
the connecting and the wait after Ctrl-D, not the typing.

A request line typed alone, such as --data 'GET /', is no request an HTTP
server can answer (it waits for the header, or calls it malformed): it is
sent as the whole HTTP/1.1 request it stands for, with Host (the
--servername, else the host, and the port unless 443), User-Agent and
Connection: close, and the blank line that ends it. --raw sends the data
exactly as given. For HTTP, 'ztls get URL' writes the request for you.

--showcerts prints the server's certificate chain as PEM after the
response, each with its subject and issuer (as openssl s_client
-showcerts); under ZTLS the chain is the one from DNS, the server having
omitted its Certificate. When verification fails, the certificate that
failed is printed instead.

Exit status: 0 when the response ended as it should, 1 otherwise (no
connection, a failed handshake, a server that closed without a byte of
response to the request sent, a response cut short or not finished
within --timeout), with or without --json; once a connection is tried,
--json prints the report, its "error" field set when it failed (a flag
refused before that prints no report).`
	connectExample = `  ztls connect 127.0.0.1:8443 --ca cert.pem --servername localhost --data 'ping'
  ztls connect example.test:443 --json
  # an HTTP request line alone is completed: Host: example.test, CRLFs
  ztls connect example.test:443 --data 'GET /'
  # the server's chain as PEM, as openssl s_client -showcerts
  ztls connect example.test:443 --showcerts </dev/null
  # two resolvers, tried in order; or DNS over TLS to a resolver by name
  ztls connect example.test:443 --resolver 10.0.0.53 --resolver 10.0.1.53 --data 'GET /'
  ztls connect example.test:443 --resolver 9.9.9.9 --dns-transport tls --dns-servername dns.quad9.net --data 'GET /'
  ZTLS_RESOLVER=127.0.0.1:5354 ztls connect www.ztls.test:8443 --ca ca.pem --data 'GET /' --json
  # a POST goes after the handshake; to accept that it may be replayed:
  ztls connect example.test:443 --early-unsafe \
      --data $'POST /vote HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\n\r\n'
  # resumption with 0-RTT
  ztls connect 127.0.0.1:8443 --ca ca.pem --sess-out sess.bin --data hi
  printf 'GET / HTTP/1.0\r\n\r\n' > req.txt
  ztls connect 127.0.0.1:8443 --ca ca.pem --sess-in sess.bin --early-data req.txt --json`
	getLong = `Fetch URL (https://HOST[:PORT]/PATH) with HTTP/1.1 over a ztls connection
and print the response (status line and header as received, then the
body); --json prints the connection report on standard output and the
response on standard error.

The request is shaped with curl's flags: -H adds a header (repeatable), -X
sets the method, -d sends a body (a POST unless -X says otherwise; @FILE
reads a file, @- standard input), -I asks for the header only (HEAD).
Only a GET, HEAD or OPTIONS goes as early data: a request with a body is
sent after the handshake, once, whatever the fallback. -o writes the body
to a file (the status line and header then go to standard error).
--resolve HOST:PORT:ADDR connects to ADDR without asking DNS for the
address; the URL's name is still sent and verified, and its Z-data
looked up, so ZTLS works as with the address from DNS.

get stops at the response's end (its Content-Length or last chunk),
whether or not the server then closes the connection. Exit status: 0 for
a whole response (whatever its HTTP status; with --fail, 22 for a status
of 400 or more, whose response is not printed, as curl), 1 otherwise (no
connection, a failed handshake, a response cut short, longer than
--max-bytes or not finished within --timeout), with or without --json.`
	getExample = `  ztls get https://localhost:8443/ --ca cert.pem
  ztls get https://localhost:8443/index.html --ca cert.pem --json
  ztls get https://localhost:8443/ --ca cert.pem --http2   # HTTP/2, as browsers speak it
  # curl's habits: headers, a POST, the header only, the body to a file
  ztls get https://example.test/api -H 'Accept: application/json' -H 'Authorization: Bearer TOKEN'
  ztls get https://example.test/form -d 'name=ztls' -d 'lang=go'
  ztls get https://example.test/upload -X PUT -d @report.json -H 'Content-Type: application/json'
  ztls get https://example.test/ -I
  ztls get https://example.test/big.tar -o big.tar --fail || echo "HTTP error or no response"
  # a server not (yet) in DNS, reached by its name
  ztls get https://www.example.test/ --resolve www.example.test:443:192.0.2.10
  ZTLS_RESOLVER=127.0.0.1:5354 ztls get https://www.ztls.test:8443/ --ca ca.pem`
)

func init() {
	rootCmd.AddCommand(newConnectCmd(), newGetCmd())
}

// newConnectCmd is ztls connect.
func newConnectCmd() *cobra.Command {
	f := connectFlags{name: "connect"}
	cmd := &cobra.Command{
		Use:     "connect HOST:PORT",
		Short:   "Open a TLS 1.3 connection, send a request, print the response (like openssl s_client)",
		Long:    connectLong,
		Example: connectExample,
		Args:    oneArg("HOST[:PORT]", "example.com:443"),
		RunE: func(cmd *cobra.Command, args []string) error {
			addr, err := connectAddr(args[0])
			if err != nil {
				return err
			}
			var req []byte
			var input io.Reader
			switch {
			case f.data != "":
				req, input = []byte(f.data), noMoreInput
			case isTerminal(os.Stdin):
				input = &prompt{r: os.Stdin}
			default:
				// The first MiB can go as early data; the rest follows.
				req, _ = io.ReadAll(io.LimitReader(os.Stdin, 1<<20))
				input = noMoreInput
				if len(req) == 1<<20 {
					input = os.Stdin
				}
			}
			if !f.raw && input == noMoreInput {
				req = f.completeRequest(req, addr)
			}
			return runConnect(&f, addr, req, input)
		},
	}
	cmd.Flags().StringVar(&f.data, "data", "", "request to send (default: standard input when it is a pipe or file); early data only if it is a GET, HEAD or OPTIONS request")
	cmd.Flags().BoolVar(&f.earlyUnsafe, "early-unsafe", false, "also send a request that is not replay-safe (a POST, non-HTTP data) as early data, accepting that an attacker may replay it to the server")
	cmd.Flags().BoolVar(&f.raw, "raw", false, "send --data (or standard input) exactly as given: an HTTP request line alone (e.g. 'GET /') is not completed into a whole request")
	cmd.Flags().BoolVar(&f.showCerts, "showcerts", false, "print the server's certificate chain as PEM, leaf first, each with its subject and issuer (as openssl s_client -showcerts), after the response; on a failed verification, the certificate that failed")
	f.register(cmd)
	return cmd
}

// newGetCmd is ztls get.
func newGetCmd() *cobra.Command {
	g := connectFlags{name: "get"}
	var c getFlags
	var http2 bool
	get := &cobra.Command{
		Use:     "get URL",
		Short:   "Fetch a URL over TLS 1.3 (curl's -H, -X, -d, -I, -o, --fail, --resolve) and print the response",
		Long:    getLong,
		Example: getExample,
		Args:    oneArg("URL", "https://example.com/"),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := getURL(args[0])
			if err != nil {
				return err
			}
			host := u.Host
			if u.Port() == "" {
				host = net.JoinHostPort(u.Hostname(), "443")
			}
			r, err := c.build()
			if err != nil {
				return err
			}
			pinned, err := c.resolveAddr(u)
			if err != nil {
				return err
			}
			if pinned.IsValid() {
				g.addrs = []netip.Addr{pinned}
			}
			file, err := c.openOutput()
			if err != nil {
				return err
			}
			if file != nil {
				defer file.Close()
			}
			if http2 {
				if g.prefetchLinks {
					return fmt.Errorf("--prefetch-links reads the page over HTTP/1.1: leave out --http2")
				}
				return runGetHTTP2(&g, u, r, file, c.fail)
			}
			var split *responseSplit
			if file != nil || c.fail {
				g.out = func(out io.Writer) io.Writer {
					split = &responseSplit{head: out, body: out, fail: c.fail}
					if file != nil {
						split.head, split.body = os.Stderr, file
					}
					return split
				}
			}
			if len(g.tls.alpn) == 0 {
				g.tls.alpn = []string{"http/1.1"}
			}
			err = runConnect(&g, host, r.http11(u), nil)
			if err == nil && split != nil && split.failed() {
				return errHTTPStatus(split.Status())
			}
			return err
		},
	}
	g.register(get)
	c.register(get.Flags())
	get.Flags().BoolVar(&g.prefetchLinks, "prefetch-links", false, "after the page, prefetch and prevalidate the https hosts it links to (see 'ztls prefetch'), kept for later runs")
	get.Flags().IntVar(&g.linkConcurrency, "prefetch-concurrency", 4, "with --prefetch-links, prefetch at most N hosts at once")
	get.Flags().BoolVar(&http2, "http2", false, "speak HTTP/2 or HTTP/1.1, whichever the server selects (both offered in one ClientHello, as browsers do), through the ztlshttp transport; the request goes early in the protocol the Z-data names (over HTTP/2: its frames)")
	return get
}

// runConnect connects to addr, sends req and then input, and prints the
// response and the report. A nil input (get) or an HTTP/1.x req with no
// more input has one HTTP/1.1 response, read to its end; other input is
// half-closed at its end. The error, if any, says what to do about it.
func runConnect(f *connectFlags, addr string, req []byte, input io.Reader) error {
	if err := f.check(); err != nil {
		return err
	}
	cfg, err := f.tls.config(false)
	if err != nil {
		return err
	}
	safe, notEarly := earlyPolicy(f, req)
	if !safe && notEarly != "" && f.mode == "ztls" {
		return fmt.Errorf("--mode ztls sends the request as early data, but %s: pass --early-unsafe to send it early anyway (an attacker may replay it), or use --mode auto to send it after the handshake", notEarly)
	}
	opts, closeRes, err := f.dialOptions(cfg)
	if err != nil {
		return err
	}
	defer closeRes()
	opts.Request, opts.ReadResponse, opts.Out, opts.ReplaySafe = req, f.maxBytes, os.Stdout, safe
	opts.HTTP, opts.Input = input == nil, input
	if f.json {
		opts.Out = os.Stderr
	}
	ends := endLines(opts.Out) // nil unless the response goes to a terminal
	if ends != nil {
		opts.Out = ends
		defer ends.end() // before an error is printed
	}
	out := opts.Out // where the chain goes, with the response
	if f.out != nil {
		opts.Out = f.out(opts.Out)
	}
	page := f.teeForLinks(&opts)
	if opts.Session, err = f.loadSession(); err != nil {
		return err
	}
	if f.earlyFile != "" {
		if err := f.sendEarlyFile(&opts, req); err != nil {
			return err
		}
		notEarly = ""
	}
	// The request's protocol: dial then sends it only on a connection
	// that speaks it, and early only under Z-data for it.
	opts.RequestALPN = requestALPN(opts.Request)
	if input == noMoreInput && httpRequest.Match(opts.Request) {
		// The response has its own end; a half-close now may read as
		// the client leaving (Go's net/http cancels the request).
		opts.HTTP, opts.Input = true, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	res, err := dial.Connect(ctx, addr, opts)
	if err != nil {
		if f.showCerts {
			writeFailedCert(out, err)
		}
		err = f.cure(err, addr)
		if f.json && res != nil {
			res.Report.Error = err.Error()
			ends.end()
			writeJSON(res.Report)
		}
		return err
	}
	defer res.Conn.Close()
	defer f.prefetchLinked(opts, addr, page)
	flagHints(&res.Report)
	if res.Report.FallbackReason == dial.ReasonNoEarly && notEarly != "" {
		// The reason first, so the report says ZTLS was not tried.
		res.Report.FallbackReason = dial.ReasonNoEarly + " (" + notEarly + "): the request went after the handshake, not as early data;" +
			" --early-unsafe sends it early, accepting that it may be replayed"
	}
	if err := f.saveSession(res.Session); err != nil {
		return err
	}
	if f.showCerts {
		writeChain(out, res.Conn.ConnectionState())
	}
	if res.Err == nil && len(opts.Request) > 0 && res.Report.ResponseBytes == 0 {
		res.Err = errNoResponse
	}
	if res.Err != nil {
		err = f.cure(res.Err, addr)
		res.Report.Error = err.Error()
	}
	ends.end()
	if f.json {
		writeJSON(res.Report)
		return err
	}
	res.Report.WriteText(os.Stderr)
	return err
}

// loadSession reads --sess-in (nil without it).
func (f *connectFlags) loadSession() (*tls13.ClientSession, error) {
	if f.sessIn == "" {
		return nil, nil
	}
	data, err := os.ReadFile(f.sessIn)
	if err != nil {
		return nil, fmt.Errorf("--sess-in: %w", err)
	}
	s := new(tls13.ClientSession)
	if err := s.UnmarshalBinary(data); err != nil {
		return nil, fmt.Errorf("--sess-in %s: %w", f.sessIn, err)
	}
	return s, nil
}

// sendEarlyFile makes --early-data's file the request, sent early by the
// user's choice (replay-safe as far as dial is concerned); req is what
// --data or standard input gave, which must be empty.
func (f *connectFlags) sendEarlyFile(opts *dial.Options, req []byte) error {
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
	opts.Request, opts.ResumeEarly, opts.ReplaySafe = data, true, true
	return nil
}

// saveSession writes the session to --sess-out, if given.
func (f *connectFlags) saveSession(s *tls13.ClientSession) error {
	if f.sessOut == "" {
		return nil
	}
	if s == nil {
		fmt.Fprintln(os.Stderr, "ztls: the server sent no session ticket; nothing stored in", f.sessOut)
		return nil
	}
	data, err := s.MarshalBinary()
	if err != nil {
		return err
	}
	return writePrivate(f.sessOut, data)
}

// writePrivate writes a file only its owner may read: also one that
// already existed with a looser mode (os.WriteFile keeps that mode), as a
// session ticket's resumption secret decrypts the sessions resumed with it.
func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dialOptions are the options connect, get and get --http2 share: the
// mode, the TLS configuration, the T-DNS resolver (which also finds the
// address in --mode tls; close it with the returned func), the Z-data
// budget, TurboTLS, and the memory of servers that aborted on ztls.
func (f *connectFlags) dialOptions(cfg *tls13.Config) (dial.Options, func(), error) {
	rcfg, err := f.dnsClient().config(f.name)
	if err != nil {
		return dial.Options{}, nil, err
	}
	res, err := resolver.New(rcfg)
	if err != nil {
		return dial.Options{}, nil, err
	}
	mode, err := dial.ParseMode(f.mode)
	if err != nil {
		res.Close()
		return dial.Options{}, nil, fmt.Errorf("--mode: %w", err)
	}
	from, err := dial.ParseZDataFrom(f.zdataFrom)
	if err != nil {
		res.Close()
		return dial.Options{}, nil, fmt.Errorf("--zdata-from: %w", err)
	}
	ocsp, err := prevalidate.ParseOCSPPolicy(f.ocsp)
	if err != nil {
		res.Close()
		return dial.Options{}, nil, fmt.Errorf("--ocsp: %w", err)
	}
	opts := dial.Options{Mode: mode, TLS: cfg, Resolver: res, ZDataBudget: f.budget, Turbo: f.turbo || f.turboPort != 0, NoBFE: f.noBFE, Addrs: f.addrs}
	opts.TurboPort, opts.TurboWait, opts.OCSP, opts.ZDataFrom = f.turboPort, f.turboWait, ocsp, from
	if opts.PostQuantum, err = dial.ParsePostQuantum(f.pq); err != nil {
		res.Close()
		return dial.Options{}, nil, fmt.Errorf("--pq: %w", err)
	}
	if f.echRequire && f.echOff {
		res.Close()
		return dial.Options{}, nil, fmt.Errorf("--ech and --no-ech: give one")
	}
	opts.ECH = f.echMode()
	// What 'ztls prefetch' (or get --prefetch-links) kept: its DNS
	// answers spare the lookups.
	opts.Cache = cliCache()
	if path := dial.DefaultMemoryPath(); path != "" {
		// Servers that aborted on ztls are remembered for 24 h across runs.
		opts.Memory = dial.OpenMemory(path)
	}
	return opts, func() { res.Close() }, nil
}

// noMoreInput is connect's input when the request is all there is.
var noMoreInput io.Reader = endOfInput{}

type endOfInput struct{}

func (endOfInput) Read([]byte) (int, error) { return 0, io.EOF }

// httpRequest matches the request line of an HTTP/1.x request (RFC 9112,
// Section 3).
var httpRequest = regexp.MustCompile(`^[A-Z]+ [^ \r\n]+ HTTP/1\.[01]\r?\n`)

// requestALPN is the ALPN protocol req is written in: "http/1.1" for an
// HTTP/1.x request, "h2" for data that opens with HTTP/2's connection
// preface, else "" (data in no protocol in particular).
func requestALPN(req []byte) string {
	switch {
	case httpRequest.Match(req):
		return "http/1.1"
	case bytes.HasPrefix(req, []byte(http2Preface)):
		return "h2"
	}
	return ""
}

// http2Preface opens an HTTP/2 client's connection (RFC 9113, Section
// 3.4).
const http2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// writeJSON prints the report on standard output.
func writeJSON(r dial.Report) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.Encode(r)
	os.Stdout.Write(buf.Bytes())
}

// check refuses flag values no connection can use, saying which work.
func (f *connectFlags) check() error {
	switch {
	case f.maxBytes <= 0:
		return fmt.Errorf("--max-bytes %d: want the most response bytes to read, at least 1 (default 1048576, 1 MiB)", f.maxBytes)
	case f.timeout <= 0:
		return fmt.Errorf("--timeout %v: want a duration above zero, e.g. 15s or 1m", f.timeout)
	case f.budget < 0:
		return fmt.Errorf("--zdata-budget %v: want a duration of zero or more, e.g. 20ms (0: the default, 20ms)", f.budget)
	case f.turboPort < 0 || f.turboPort > 65535:
		return fmt.Errorf("--turbo-port %d: want a UDP port from 1 to 65535 (0: from the server's HTTPS record)", f.turboPort)
	case f.turboWait < 0:
		return fmt.Errorf("--turbo-wait %v: want a duration of zero or more, e.g. 5ms (0: half the TCP connect time)", f.turboWait)
	}
	return nil
}

// flagHints adds to the report's reasons, which name dial's options, the
// flag that sets the option.
func flagHints(r *dial.Report) {
	if r.TurboFallback == dial.ReasonTurboNoDNS {
		r.TurboFallback += "; --turbo-port gives it"
	}
}

// cure adds to a failure what the user can do about it, when the failure
// says so: the symptom stays first, the cure follows.
func (f *connectFlags) cure(err error, addr string) error {
	var (
		notTLS *dial.NotTLSError
		cve    *tls13.CertificateVerificationError
		unkCA  x509.UnknownAuthorityError
		name   x509.HostnameError
		alert  *tls13.AlertError
		local  *tls13.LocalError
	)
	switch {
	case errors.As(err, &notTLS) && notTLS.HTTP():
		return fmt.Errorf("%w: not a TLS server? for plain HTTP use http:// (e.g. curl http://%s/)", err, addr)
	case errors.As(err, &notTLS):
		return fmt.Errorf("%w: not a TLS server? check the port", err)
	case errors.As(err, &alert) && alert.Alert == tls13.AlertProtocolVersion,
		errors.As(err, &local) && local.Alert == tls13.AlertProtocolVersion:
		return fmt.Errorf("%w: the server speaks only TLS 1.2 or older, and ztls only TLS 1.3; enable TLS 1.3 on the server (e.g. nginx: ssl_protocols TLSv1.2 TLSv1.3;), or reach it with a TLS 1.2 client such as curl or openssl s_client", err)
	case errors.As(err, &cve) && errors.As(err, &unkCA):
		if f.tls.ca != "" {
			return fmt.Errorf("%w: the server's certificate does not chain to the roots in --ca %s; pass the CA that issued it with --ca FILE (PEM), or --insecure for a test server", err, f.tls.ca)
		}
		return fmt.Errorf("%w: the server's certificate does not chain to the system's roots; pass the CA that issued it with --ca FILE (PEM), or --insecure for a test server", err)
	case errors.As(err, &cve) && errors.As(err, &name):
		return fmt.Errorf("%w: connect by a name the certificate holds, or pass it with --servername NAME", err)
	case errors.Is(err, dial.ErrRequestNotSent):
		return fmt.Errorf("%w: offer only the request's protocol (--alpn), or send it in the one the server selected", err)
	case errors.Is(err, dial.ErrZTLSImpossible):
		return fmt.Errorf("%w (--mode ztls; --mode auto falls back to TLS 1.3)", err)
	case errors.Is(err, dial.ErrResponseTimeout):
		return fmt.Errorf("%w: the server neither finished the response nor closed the connection within --timeout %v (raise it for a slow server)", err, f.timeout)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: gave up after --timeout %v", err, f.timeout)
	case errors.Is(err, dial.ErrResponseTooLong):
		return fmt.Errorf("%w: raise --max-bytes (now %d) to read it whole", err, f.maxBytes)
	case errors.Is(err, errNoResponse):
		return fmt.Errorf("%w: is the data in the server's protocol? For HTTP give a whole request (e.g. --data $'GET / HTTP/1.1\\r\\nHost: %s\\r\\n\\r\\n'), or fetch a URL with 'ztls get https://%s/'", err, hostHeader(addr, f.tls.servername), hostHeader(addr, f.tls.servername))
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%w: is a server listening on %s?", err, addr)
	}
	return err
}

// connectAddr is connect's HOST[:PORT] argument as HOST:PORT: port 443
// when none is given; a URL is refused, pointing to get.
func connectAddr(arg string) (string, error) {
	if scheme, rest, ok := strings.Cut(arg, "://"); ok {
		hostport, _, _ := strings.Cut(rest, "/")
		if strings.EqualFold(scheme, "https") {
			if u, err := getURL(arg); err == nil {
				hostport = u.Host
				if u.Port() == "" {
					hostport = net.JoinHostPort(u.Hostname(), "443")
				}
			}
			return "", fmt.Errorf("connect takes HOST[:PORT], not a URL: to fetch %s use 'ztls get %s', or 'ztls connect %s' to talk to the server yourself", arg, arg, hostport)
		}
		return "", fmt.Errorf("connect takes HOST[:PORT] (e.g. %s:443), not a %s:// URL", hostport, scheme)
	}
	if ip, err := netip.ParseAddr(strings.Trim(arg, "[]")); err == nil {
		// An IP without a port (an IPv6 literal has colons of its own).
		return net.JoinHostPort(ip.String(), "443"), nil
	}
	host, port, err := net.SplitHostPort(arg)
	if err != nil {
		if strings.Contains(err.Error(), "missing port") {
			return net.JoinHostPort(arg, "443"), nil
		}
		return "", fmt.Errorf("%q is not HOST[:PORT] (e.g. example.com:443, [2001:db8::1]:443): %w", arg, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: the port %q is not a number from 1 to 65535", arg, port)
	}
	if host == "" {
		return "", fmt.Errorf("%q: no host before the port (e.g. localhost%s)", arg, arg)
	}
	return arg, nil
}

// getURL parses get's URL argument: https:// only, with a host.
func getURL(arg string) (*url.URL, error) {
	if !strings.Contains(arg, "://") {
		return nil, fmt.Errorf("want an https:// URL, got %q: did you mean https://%s ?", arg, arg)
	}
	u, err := url.Parse(arg)
	if err != nil {
		return nil, fmt.Errorf("want an https:// URL, got %q: %w", arg, err)
	}
	switch {
	case strings.EqualFold(u.Scheme, "http"):
		return nil, fmt.Errorf("%q is plain HTTP: ztls speaks TLS, so give https://%s, or use curl for http://", arg, strings.TrimPrefix(arg, u.Scheme+"://"))
	case !strings.EqualFold(u.Scheme, "https"):
		return nil, fmt.Errorf("want an https:// URL, got a %s:// one (%q)", u.Scheme, arg)
	case u.Host == "":
		return nil, fmt.Errorf("want an https:// URL with a host, e.g. https://example.com/, got %q", arg)
	}
	return u, nil
}

// oneArg accepts exactly one argument, what (e.g. "URL"), and else says
// what to pass.
func oneArg(what, example string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 1 {
			return nil
		}
		got := "nothing"
		if len(args) > 1 {
			got = fmt.Sprintf("%d arguments (%s)", len(args), strings.Join(args, " "))
		}
		return fmt.Errorf("%s takes one %s, e.g. '%s %s', got %s; see '%s --help'",
			cmd.Name(), what, cmd.CommandPath(), example, got, cmd.CommandPath())
	}
}

// prompt is a terminal's input: it says how the session works when it is
// first read, which dial does once the connection is up.
type prompt struct {
	r    io.Reader
	once sync.Once
}

func (p *prompt) Read(b []byte) (int, error) {
	p.once.Do(func() {
		fmt.Fprintln(os.Stderr, "ztls: connected: type lines to send; Ctrl-D ends the input (the server sees close_notify), Ctrl-C quits")
	})
	return p.r.Read(b)
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

// errNoResponse: the server closed the connection without a byte of
// response to a request.
var errNoResponse = errors.New("the server closed the connection without a response (0 bytes)")

// bareRequestLine matches an HTTP request line alone (RFC 9112, Section
// 3), without the header that must follow: what a person types, e.g.
// 'GET /' or 'HEAD /index.html HTTP/1.1'.
var bareRequestLine = regexp.MustCompile(`^(GET|HEAD|OPTIONS|POST|PUT|DELETE|PATCH|TRACE) (/[^ \r\n]*|\*|https?://[^ \r\n]+)( HTTP/1\.[01])?\r?\n?$`)

// completeRequest makes an HTTP request line given alone (req) into a
// whole HTTP/1.1 request to addr: a server cannot answer the line by
// itself (an HTTP server waits for the rest, or calls it malformed), so
// the line is what a person means, not what they want sent. Other data
// is returned unchanged; --raw sends the line as it is.
func (f *connectFlags) completeRequest(req []byte, addr string) []byte {
	m := bareRequestLine.FindSubmatch(req)
	if m == nil {
		return req
	}
	proto := "HTTP/1.1"
	if len(m[3]) > 0 {
		proto = string(m[3][1:])
	}
	host := hostHeader(addr, f.tls.servername)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s\r\nHost: %s\r\nUser-Agent: ztls\r\nConnection: close\r\n", m[1], m[2], proto, host)
	switch string(m[1]) {
	case "POST", "PUT", "PATCH":
		b.WriteString("Content-Length: 0\r\n")
	}
	b.WriteString("\r\n")
	fmt.Fprintf(os.Stderr, "ztls: %q is an HTTP request line alone: sending it as a whole request (Host: %s); 'ztls get https://%s%s' does this for a URL, --raw sends the data unchanged\n",
		strings.TrimRight(string(req), "\r\n"), host, host, m[2])
	return []byte(b.String())
}

// hostHeader is the Host header for a connection to addr (HOST:PORT):
// servername, when given, as the name the server's certificate is
// checked against, else the host; with the port unless it is 443.
func hostHeader(addr, servername string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if servername != "" {
		host = servername
	}
	if port == "443" {
		if strings.Contains(host, ":") {
			return "[" + host + "]"
		}
		return host
	}
	return net.JoinHostPort(host, port)
}

// writeChain prints the server's certificates as openssl s_client
// -showcerts does: for each, leaf first, its subject and issuer, then
// its PEM.
func writeChain(w io.Writer, st tls13.ConnectionState) {
	certs := st.PeerCertificates
	if len(certs) == 0 {
		fmt.Fprintln(w, "---\nno certificate chain: the session was resumed (the chain was checked when its ticket was issued)\n---")
		return
	}
	from := ""
	if st.CertificateOmitted {
		from = " (from DNS: the server omitted its Certificate, as ZTLS allows)"
	}
	fmt.Fprintf(w, "---\nCertificate chain%s\n", from)
	for i, c := range certs {
		fmt.Fprintf(w, " %d s:%s\n   i:%s\n", i, c.Subject, c.Issuer)
		pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	fmt.Fprintln(w, "---")
}

// writeFailedCert prints the certificate a failed verification names,
// so the user sees what the server presented.
func writeFailedCert(w io.Writer, err error) {
	var (
		unkCA   x509.UnknownAuthorityError
		name    x509.HostnameError
		invalid x509.CertificateInvalidError
		cert    *x509.Certificate
	)
	switch {
	case errors.As(err, &unkCA):
		cert = unkCA.Cert
	case errors.As(err, &name):
		cert = name.Certificate
	case errors.As(err, &invalid):
		cert = invalid.Cert
	}
	if cert == nil {
		return
	}
	fmt.Fprintf(w, "---\nThe certificate that failed verification\n 0 s:%s\n   i:%s\n", cert.Subject, cert.Issuer)
	pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
	fmt.Fprintln(w, "---")
}

// exitError ends the process with its own exit status: get --fail's 22
// for an HTTP error, as curl's.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process's exit status for err (not nil): 1 unless it
// says otherwise.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}
