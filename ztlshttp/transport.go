//lint:file-ignore SA1019 net/http speaks HTTP/2 only over its own *tls.Conn; over a tls13.Conn x/net/http2 is the way (its Server.ServeConn and Transport.DialTLSContext)

package ztlshttp

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// A connection offers both protocols in one ClientHello, as browsers
// do, and speaks the one the server selects; first contact costs one
// connection whatever the server speaks. The choice follows what is
// known before the ClientHello: early data is in the protocol the
// Z-data names (its early ALPN), so with Z-data the request goes early
// in that protocol, the Z-data's protocol offered first (Z-data without
// alpn= is for connections without ALPN: the ClientHello then offers
// none, and the request goes as HTTP/1.1); without Z-data, an HTTPS
// record's alpn narrows the offer. The request is written once: early
// or, when the server selected another protocol, after the handshake in
// that one, by its client, on the same connection (see opening.go). A
// request whose body must be sent again for that needs Request.GetBody
// (http.NewRequest sets it for in-memory bodies), as net/http's own
// retries do. The protocol a server's connection spoke is remembered
// (per host and port, for this Transport), so its next connections
// write their first request in it.
//
// Create Transports with NewTransport; a Transport is safe for concurrent
// use and, like http.Transport, should be reused.
type Transport struct {
	opts      dial.Options
	resolvErr error // why there is no default resolver (then no Z-data)
	h1        *http.Transport
	h2        *http2.Transport // nil when HTTP/2 is off
	h2pool    *h2Pool
	protos    []string // ALPN protocols, preference order

	mu       sync.Mutex
	known    map[string]string      // host:port → the protocol its last connection spoke
	expected map[string]string      // host:port → the protocol a connection was handed over for before its ClientHello
	missed   map[string]string      // host:port → the early protocol its server did not take
	handed   map[handKey][]*opening // connections handed from one client to the other (opening.go)
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
//   - TLS.NextProtos chooses the HTTP versions: nil means both, HTTP/2
//     preferred ("h2", "http/1.1"); a list without "h2" means HTTP/1.1
//     only, one without "http/1.1" HTTP/2 only.
//   - Mode "" is "auto"; Request, ReplaySafe, RequestALPN, RequestIn,
//     ReadResponse, HTTP, Input and Out are the Transport's to set and
//     are ignored.
//   - TLS.ChainCache nil means the prevalidate.Cache's (Cache, else the
//     process's): a new connection to a server met before skips
//     verifying the chain verified then (revocation and
//     VerifyPeerCertificate still run).
func NewTransport(opts dial.Options) *Transport {
	t := &Transport{opts: opts, known: map[string]string{}, expected: map[string]string{}, missed: map[string]string{},
		handed: map[handKey][]*opening{}}
	if t.opts.Resolver == nil && t.opts.Mode != dial.ModeTLS {
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
	if len(t.protos) == 0 {
		t.protos = []string{"http/1.1"} // none of the HTTP versions: the default's
	}
	if slices.Contains(t.protos, "h2") {
		t.h2pool = &h2Pool{t: t, conns: map[string][]pooledH2{}}
		t.h2 = &http2.Transport{ConnPool: t.h2pool, IdleConnTimeout: 90 * time.Second}
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

// dialer makes lazy connections for the client speaking proto: one the
// other client handed over (opening.go), else a new one, unless the
// server is known to speak the other protocol: a client that opens a
// connection anyway (the HTTP/2 client retries a request whose
// connection changed hands) is told so.
func (t *Transport) dialer(proto string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		op := t.takeHanded(proto, addr)
		if p := t.protoFor(addr); op == nil && p != proto {
			return nil, &protocolSwitch{p}
		}
		o := t.opts
		o.ReadResponse, o.HTTP, o.Input, o.Out = 0, false, nil, nil
		if o.TLS == nil {
			o.TLS = &tls13.Config{}
		}
		o.TLS = o.TLS.Clone()
		o.TLS.NextProtos = t.protos
		l := newLazyConn(ctx, addr, o, proto, t.resolvErr)
		l.t = t
		if op != nil {
			l.adopt(op)
		}
		return l, nil
	}
}

// RoundTrip sends req over a ZTLS or TLS 1.3 connection and fills
// resp.TLS and the connection report (ReportOf). Requests for http://
// URLs go over plain TCP, as http.Transport sends them.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL == nil || req.URL.Scheme != "https" {
		return t.h1.RoundTrip(req)
	}
	addr := hostPort(req.URL.Host)
	proto := t.protoFor(addr)
	// A connection opened for req is handed to the other client at most
	// twice: before its ClientHello (the Z-data's early data is in the
	// other protocol), and after its handshake (the server selected the
	// other); requests sharing an HTTP/2 connection that changed hands,
	// or started for a protocol the server turned out not to speak, go
	// to the other client too.
	var err error
	for range 4 {
		var resp *http.Response
		var lc *lazyConn
		resp, lc, err = t.roundTrip(proto, req)
		if err == nil {
			return resp, nil
		}
		var sw *protocolSwitch
		switch {
		case lc != nil && lc.handedTo() != "":
			to, op := lc.handedTo(), lc.handedOp()
			defer t.release(to, addr, op)
			proto = to
		case errors.As(err, &sw):
			proto = sw.proto
		default:
			return nil, err
		}
		if req, err = rewind(req, err); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("ztlshttp: the connections to %s kept changing hands, the last with: %w", addr, err)
}

// roundTrip sends req with the client for proto and notes the connection
// that carried it (or was opened for it).
func (t *Transport) roundTrip(proto string, req *http.Request) (*http.Response, *lazyConn, error) {
	var rt http.RoundTripper = t.h1
	if proto == "h2" {
		rt = t.h2
	}
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
	mu.Lock()
	lc := conn
	mu.Unlock()
	if err != nil {
		return nil, lc, err
	}
	if lc != nil {
		st := lc.ConnectionState()
		resp.TLS = &st
		if rep := lc.responseReport(); rep != nil {
			if _, upgraded := resp.Body.(io.Writer); !upgraded {
				resp.Body = &countingBody{ReadCloser: resp.Body, rep: rep}
			}
			resp.Request = req.WithContext(context.WithValue(req.Context(), reportKey{}, rep))
		}
	}
	return resp, lc, nil
}

// countingBody counts a response's body into its report as it is read.
type countingBody struct {
	io.ReadCloser
	rep *dial.Report
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.rep.ResponseBytes += n
	return n, err
}

type reportKey struct{}

// ReportOf returns the report of the connection that carried resp, a
// response from a Transport: ZTLS or TLS 1.3 (Mode), why not ZTLS
// (FallbackReason), whether the early data was accepted, the negotiated
// parameters and timings. The report describes how the connection was
// opened: only its first request can have gone as early data, so with
// HTTP/2 (several requests on one connection) and keep-alive it is the
// same for each response on the connection, Timing.FirstByte included
// (when the connection's first response had arrived, its status and
// header, from the start of the lookups), but for ResponseBytes: the
// bytes of resp's body read so far (read the body, then look). Over HTTP/2 the server's
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
	if t.h2pool != nil {
		t.h2pool.closeIdle()
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
