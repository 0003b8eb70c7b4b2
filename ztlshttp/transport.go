//lint:file-ignore SA1019 net/http speaks HTTP/2 only over its own *tls.Conn; over a tls13.Conn x/net/http2 is the way (its Server.ServeConn and Transport.DialTLSContext)

package ztlshttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/tls13"
)

// Transport is an http.RoundTripper that connects with ZTLS when the
// server publishes Z-data, else with TLS 1.3, over HTTP/2 or HTTP/1.1:
//
//	client := &http.Client{Transport: ztlshttp.NewTransport(dial.Options{})}
//
// Each response's TLS field holds the connection's state (as crypto/tls
// would fill it) and ReportOf(resp) its connection report.
//
// The first request of a connection goes as early data when it is an
// idempotent request (GET, HEAD, OPTIONS) without a body that the
// connection's client writes whole, so its response can come in the
// server's first flight: with HTTP/2 the connection preface, SETTINGS and
// the request's HEADERS; with HTTP/1.1 the request. Anything else goes
// after the handshake.
//
// Early data is in the protocol the Z-data names (its early ALPN), and
// the client must choose the protocol before it can see the Z-data (the
// lookups run in parallel with TCP). So a connection offers one ALPN
// protocol, the one its request is written in: a server that selects it
// (and whose Z-data names it) gets the request early; one that doesn't
// refuses the handshake. The Transport tries HTTP/2 first and, when a
// server does not select "h2", sends the request again over HTTP/1.1
// and remembers that server (per host and port, for this Transport) so
// its later connections go straight to HTTP/1.1. The first request to an
// HTTP/1.1-only server therefore costs a refused handshake.
//
// Create Transports with NewTransport; a Transport is safe for concurrent
// use and, like http.Transport, should be reused.
type Transport struct {
	opts      dial.Options
	resolvErr error // why there is no default resolver (then no Z-data)
	h1        *http.Transport
	h2        *http2.Transport // nil when HTTP/2 is off
	h2Memory  *dial.Memory     // the HTTP/2 attempts' memory of aborts (see newH2Conn)

	mu     sync.Mutex
	noH2   map[string]bool // host:port whose server did not select h2
	protos []string        // ALPN protocols, preference order
}

// ResolverEnv names the environment variable that overrides the default
// resolver's servers: a DNS server as HOST[:PORT] (port 53 by default),
// asked over UDP. Without it the default resolver asks the nameservers
// of /etc/resolv.conf, as `ztls connect` does without --resolver.
const ResolverEnv = "ZTLS_RESOLVER"

// NewTransport returns a Transport that connects with opts. The zero
// dial.Options is the one-line ZTLS client:
//
//   - Resolver nil means the default T-DNS resolver (DefaultResolver): the
//     name servers of /etc/resolv.conf, or the server in the ZTLS_RESOLVER
//     environment variable (ResolverEnv), read when NewTransport runs, so
//     the Z-data is looked up without more options. Set Mode to "tls" for
//     no Z-data lookups. When no default resolver can be made, the
//     connections use the system resolver and TLS 1.3, and the report's
//     fallback reason says why.
//   - TLS.NextProtos chooses the HTTP versions: nil means HTTP/2 then
//     HTTP/1.1 ("h2", "http/1.1"); a list without "h2" means HTTP/1.1
//     only, one without "http/1.1" HTTP/2 only.
//   - Mode "" is "auto"; Request, ReplaySafe, ReadResponse, HTTP, Input
//     and Out are the Transport's to set and are ignored.
//   - TLS.ChainCache nil means the dial.Cache's (Cache, else the
//     process's): a new connection to a server met before skips
//     verifying the chain verified then (revocation and
//     VerifyPeerCertificate still run).
func NewTransport(opts dial.Options) *Transport {
	t := &Transport{opts: opts, noH2: map[string]bool{}}
	if t.opts.Resolver == nil && t.opts.Mode != "tls" {
		t.opts.Resolver, t.resolvErr = DefaultResolver()
	}
	t.protos = []string{"h2", "http/1.1"}
	if opts.TLS != nil && len(opts.TLS.NextProtos) > 0 {
		t.protos = slices.DeleteFunc(slices.Clone(opts.TLS.NextProtos), func(p string) bool { return p != "h2" && p != "http/1.1" })
	}
	t.h1 = &http.Transport{
		DialTLSContext:      t.dialer("http/1.1"),
		ForceAttemptHTTP2:   false,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
	}
	if slices.Contains(t.protos, "h2") {
		t.h2Memory = dial.NewMemory()
		t.h2 = &http2.Transport{
			DialTLSContext: func(ctx context.Context, network, addr string, _ *tls.Config) (net.Conn, error) {
				return t.dialer("h2")(ctx, network, addr)
			},
			IdleConnTimeout: 90 * time.Second,
		}
	}
	return t
}

// DialTLSContext returns a function for http.Transport.DialTLSContext that
// connects with ZTLS when the server publishes Z-data (else TLS 1.3), for
// an HTTP/1.1 transport of your own:
//
//	tr := &http.Transport{DialTLSContext: ztlshttp.DialTLSContext(opts)}
//
// The connection is opened when the transport writes its first request,
// so an idempotent request (GET, HEAD, OPTIONS) that net/http writes
// whole in one piece rides as early data and its response can come in the
// server's first flight; any other request is sent after the handshake.
// Unlike NewTransport it uses opts.Resolver as given (nil: no Z-data), and
// offers ALPN "http/1.1" unless opts.TLS.NextProtos says otherwise.
// net/http fills resp.TLS only for its own TLS connections: use
// NewTransport, or the connection's ConnectionState (httptrace's GotConn
// hands you the connection).
func DialTLSContext(opts dial.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		o := opts
		if o.TLS == nil {
			o.TLS = &tls13.Config{}
		}
		o.TLS = o.TLS.Clone()
		if len(o.TLS.NextProtos) == 0 {
			o.TLS.NextProtos = []string{"http/1.1"}
		}
		return newLazyConn(ctx, addr, o, "http/1.1", nil), nil
	}
}

// dialer makes lazy connections speaking proto.
func (t *Transport) dialer(proto string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		o := t.opts
		o.Request, o.ReplaySafe, o.ReadResponse, o.HTTP, o.Input, o.Out = nil, false, 0, false, nil, nil
		if o.TLS == nil {
			o.TLS = &tls13.Config{}
		}
		o.TLS = o.TLS.Clone()
		// One protocol: the early data's must be the one negotiated.
		o.TLS.NextProtos = []string{proto}
		if proto == "h2" && o.Memory == nil {
			// A server without h2 refuses the ClientHello with an alert,
			// which package dial would remember as an abort on ztls.
			o.Memory = t.h2Memory
		}
		l := newLazyConn(ctx, addr, o, proto, t.resolvErr)
		if proto == "h2" {
			l.noH2 = func() { t.rememberNoH2(addr) }
		}
		return l, nil
	}
}

func (t *Transport) rememberNoH2(addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.noH2[addr] = true
}

func (t *Transport) useH2(addr string) bool {
	if t.h2 == nil {
		return false
	}
	return !slices.Contains(t.protos, "http/1.1") || !t.fellBack(addr)
}

// RoundTrip sends req over a ZTLS or TLS 1.3 connection and fills
// resp.TLS and the connection report (ReportOf). Requests for http://
// URLs go over plain TCP, as http.Transport sends them.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "https" {
		return t.h1.RoundTrip(req)
	}
	addr := hostPort(req.URL.Host)
	if t.useH2(addr) {
		resp, err := t.roundTrip(t.h2, req)
		if err == nil || !t.fellBack(addr) {
			return resp, err
		}
		// The server did not select h2: nothing of the request reached
		// an HTTP/2 server, so it is sent again over HTTP/1.1.
		if req.Body != nil && req.Body != http.NoBody {
			if req.GetBody == nil {
				return nil, err
			}
			body, gerr := req.GetBody()
			if gerr != nil {
				return nil, err
			}
			req = req.Clone(req.Context())
			req.Body = body
		}
	}
	return t.roundTrip(t.h1, req)
}

// fellBack: the server at addr did not select h2.
func (t *Transport) fellBack(addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.noH2[addr]
}

// roundTrip sends req with rt and notes the connection that carried it.
func (t *Transport) roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	var mu sync.Mutex
	var conn *lazyConn
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if lc, ok := info.Conn.(*lazyConn); ok {
			mu.Lock()
			conn = lc
			mu.Unlock()
		}
	}}
	resp, err := rt.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	if err != nil {
		return nil, err
	}
	mu.Lock()
	lc := conn
	mu.Unlock()
	if lc != nil {
		st := lc.ConnectionState()
		resp.TLS = &st
		if rep := lc.Report(); rep != nil {
			resp.Request = req.WithContext(context.WithValue(req.Context(), reportKey{}, rep))
		}
	}
	return resp, nil
}

type reportKey struct{}

// ReportOf returns the report of the connection that carried resp, a
// response from a Transport: ZTLS or TLS 1.3 (Mode), why not ZTLS
// (FallbackReason), whether the early data was accepted, the negotiated
// parameters and timings. The report describes how the connection was
// opened: only its first request can have gone as early data, so with
// HTTP/2 (several requests on one connection) and keep-alive it is the
// same for each response on the connection. Over HTTP/2 the server's
// SETTINGS frame is application data too, so AnswerInFirstFlight then
// says that the server spoke in its first flight, not that the response
// came in it. nil when resp did not come from a Transport, or not over
// TLS.
func ReportOf(resp *http.Response) *dial.Report {
	if resp == nil || resp.Request == nil {
		return nil
	}
	rep, _ := resp.Request.Context().Value(reportKey{}).(*dial.Report)
	return rep
}

// CloseIdleConnections closes the idle connections of both HTTP versions.
func (t *Transport) CloseIdleConnections() {
	t.h1.CloseIdleConnections()
	if t.h2 != nil {
		t.h2.CloseIdleConnections()
	}
}

// hostPort is the dial address of an https URL's host.
func hostPort(host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	return net.JoinHostPort(trimBrackets(host), "443")
}

func trimBrackets(h string) string {
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		return h[1 : len(h)-1]
	}
	return h
}

var defaultResolvers struct {
	mu sync.Mutex
	m  map[string]*resolver.Resolver
}

// DefaultResolver is the T-DNS resolver a Transport uses when
// dial.Options has none: the server named by the ZTLS_RESOLVER
// environment variable (ResolverEnv; HOST[:PORT], UDP), else the
// nameservers of /etc/resolv.conf (UDP, or TCP with "options use-vc").
// It is made once per server setting and shared by the process; do not
// close it.
func DefaultResolver() (*resolver.Resolver, error) {
	key := os.Getenv(ResolverEnv)
	defaultResolvers.mu.Lock()
	defer defaultResolvers.mu.Unlock()
	if r := defaultResolvers.m[key]; r != nil {
		return r, nil
	}
	var cfg resolver.Config
	if key != "" {
		cfg.Servers = []string{key}
	} else {
		c, err := resolver.FromResolvConf("/etc/resolv.conf")
		if err != nil {
			return nil, fmt.Errorf("ztlshttp: no default resolver: %w", err)
		}
		cfg = c
	}
	r, err := resolver.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("ztlshttp: no default resolver (%s=%q): %w", ResolverEnv, key, err)
	}
	if defaultResolvers.m == nil {
		defaultResolvers.m = map[string]*resolver.Resolver{}
	}
	defaultResolvers.m[key] = r
	return r, nil
}

// errNoH2 is a connection's error when the server did not select h2.
var errNoH2 = errors.New("ztlshttp: the server does not speak HTTP/2 (it did not select ALPN h2)")
