package dial

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/tls13"
)

// Options configures one connection.
type Options struct {
	// Mode says whether ZTLS is tried: ModeAuto (the zero value too),
	// ModeZTLS or ModeTLS.
	Mode Mode
	// TLS is the client configuration; ServerName defaults to the host.
	TLS *tls13.Config
	// Resolver is the T-DNS resolver used for addresses and Z-data; nil
	// means the system resolver for addresses and no Z-data.
	Resolver *resolver.Resolver
	// ZDataBudget is how long to wait for the Z-data answers once TCP is
	// up (with TurboTLS: once the UDP port is known, before the UDP
	// flight; and for the HTTPS record that advertises it, after the
	// address); 0 means 20 ms. Their checks, once they are in, are waited
	// for without it: a TLS 1.3 handshake would run them on the same
	// certificate.
	ZDataBudget time.Duration
	// Session, if set, is offered for resumption in TLS mode; with
	// ResumeEarly the Request goes as 0-RTT data when the ticket allows.
	Session     *tls13.ClientSession
	ResumeEarly bool
	// Request is sent as early data when it is ReplaySafe and ZTLS or a
	// 0-RTT session allows; otherwise after the handshake.
	Request []byte
	// ReplaySafe marks Request as idempotent, so it may go as early data:
	// early data is replayable (an attacker can deliver it twice) and not
	// client-authenticated. When the server rejects it, it is resent after
	// the handshake. Without ReplaySafe, Request never goes early.
	// Whichever way, the server is sent one copy of it.
	ReplaySafe bool
	// RequestALPN is the application protocol Request is written in, an
	// ALPN protocol ID ("http/1.1", "h2"); "" means data in no protocol
	// in particular, sent whatever the handshake negotiates. With it, the
	// ClientHello offers TLS.NextProtos narrowed to what the request can
	// be sent in; Request goes early only under Z-data whose early data is
	// for that protocol ("http/1.1" also under Z-data without alpn=, in a
	// ClientHello without ALPN, as a connection without ALPN carries
	// HTTP/1.1); and it is sent after the handshake only when the
	// connection negotiated that protocol (or none, for "http/1.1"):
	// otherwise it is not sent at all, and Result.Err wraps
	// ErrRequestNotSent (the caller writes it anew in the protocol
	// negotiated).
	RequestALPN string
	// RequestIn, with RequestALPN, gives Request written in another
	// protocol of TLS.NextProtos (and whether that is replay-safe): it is
	// called at most once, before the ClientHello, when the Z-data's early
	// data is for proto, so the request goes early in it; nil (or an empty
	// request) keeps Request as it is, sent after the handshake. A caller
	// that sets it can write the request in any protocol of
	// TLS.NextProtos, so the ClientHello offers them all (the Z-data's
	// first), and the report says which was negotiated.
	RequestIn func(proto string) (request []byte, replaySafe bool)
	// ReadResponse reads up to this many bytes of response (0: don't read).
	// Without HTTP the response ends when the server closes the
	// connection (or at this many bytes, see Report.ResponseLimited).
	ReadResponse int
	// HTTP reads the response as one HTTP/1.1 response to Request, an
	// HTTP/1.x request (its method decides whether a body follows; GET if
	// it has none) (RFC 9112, Section 6): reading stops at its end
	// (Content-Length, chunked or the server's close), whether or not the
	// server keeps the connection open, and a response cut short is an
	// error (Result.Err). Out then receives the status line and header as
	// received and the body decoded; after a 101 (Switching Protocols)
	// the rest as it comes, until the server closes, and so an answer
	// that is no HTTP response (a server that does not speak HTTP).
	HTTP bool
	// Input, if set, is sent after Request as it is read, while the
	// response is read; at its end the connection is half-closed
	// (close_notify, RFC 8446, Section 6.1), so a server that answers
	// until the client is done (an echo) ends the response. The response
	// read has no deadline until Input ends (a person may be typing it),
	// then ctx's deadline or, if that passed, as long again as ctx
	// allowed from the start.
	Input io.Reader
	// Out receives the response bytes as they arrive (may be nil).
	Out io.Writer
	// Memory remembers servers that abort on a ztls ClientHello; nil
	// means a process-wide default.
	Memory *Memory
	// Cache holds prevalidated services (filled by prevalidate.Prefetch):
	// a connection that finds its host and port there, validated under
	// its certificate policy (TLS, OCSP, NoBFE), sends its first flight
	// without a DNS lookup or a certificate verification
	// (Report.Prefetch), and shares the chains it verifies with the
	// cache's other connections. nil means the process-wide
	// prevalidate.DefaultCache, empty until a Prefetch with a nil Cache
	// fills it, so a program that never prefetches connects as without a
	// cache.
	Cache *prevalidate.Cache
	// OCSP asks the server leaf's OCSP responder (its authority
	// information access) about it, soft- or hard-fail, before the leaf
	// is trusted: with ZTLS before the Z-data is used, else during the
	// handshake (on the critical path, unless a Prefetch asked already:
	// answers are kept in the Cache until their nextUpdate). The zero
	// value asks nothing.
	OCSP prevalidate.OCSPPolicy
	// Addrs, if set, are the addresses to connect to instead of the host's
	// A and AAAA records (curl's --resolve): the host still names the
	// server (SNI, the certificate's name) and the Z-data and HTTPS
	// records are still looked up under it, so ZTLS works as it would
	// with the addresses from DNS.
	Addrs []netip.Addr
	// Now is the clock for Z-data validity; nil means the ztls clock (internal/clock: the system clock, unless ZTLS_CLOCK_OFFSET shifts it).
	Now func() time.Time
	// NoBFE makes the client one without Bloom filter encryption: it uses
	// the v1 records of a server that publishes v2 twins with bfe=
	// (docs/ztls-spec.md, Section 7). By default a record with bfe= is
	// preferred and its ciphertext encapsulated with the prepared share.
	NoBFE bool
	// ZDataFrom says which record Z-data is taken from
	// (docs/ztls-spec.md, Section 8.5): ZDataHTTPSFirst (the zero value
	// too) takes the HTTPS record's, asked anyway, and asks for the TXT
	// record only when it carries none (a second round trip then);
	// ZDataBoth asks both at once; ZDataTXT asks the TXT record only.
	// Report.ZDataFrom says which record the Z-data came from.
	ZDataFrom ZDataFrom
	// ZDataSvcParamKey is the SvcParamKey the HTTPS record carries Z-data
	// under; 0 means zdata.DefaultSvcParamKey (65370). Publisher and
	// client must agree on it, as on the extension's codepoint.
	ZDataSvcParamKey dns.SVCBKey
	// Turbo sends the first flights over UDP while TCP connects
	// (TurboTLS, package turbo) to servers whose HTTPS record advertises
	// a UDP port (key65280); see TurboOptions.
	Turbo bool
	TurboOptions
	// PostQuantum is the post-quantum policy (docs/ztls-spec.md, Section
	// 9.6): PQPrefer (the zero value too), PQOnly or PQClassical (the
	// user's explicit opt-in to classical early data under a service that
	// publishes v3 records). Report.EarlyData.PostQuantum says whether the
	// early data was post-quantum.
	PostQuantum PostQuantum
	// ECH is the Encrypted ClientHello policy (docs/ztls-spec.md,
	// Section 10; dial/ech.go): ECHAuto (the zero value too) uses the
	// HTTPS record's ech when it has one, ECHRequire fails without it or
	// when the server rejects it, ECHOff never uses it. Report.ECH says
	// what became of it.
	ECH ECHMode
}

// Mode says whether a connection tries ZTLS (Options.Mode).
type Mode string

const (
	// ModeAuto uses ZTLS when valid Z-data is in hand, else TLS 1.3; ""
	// means the same.
	ModeAuto Mode = "auto"
	// ModeZTLS fails the connection when ZTLS cannot be used
	// (ErrZTLSImpossible).
	ModeZTLS Mode = "ztls"
	// ModeTLS never tries ZTLS: TLS 1.3 (resuming Options.Session, if
	// set).
	ModeTLS Mode = "tls"
)

// String returns the mode's name; the zero value is "auto".
func (m Mode) String() string {
	if m == "" {
		return string(ModeAuto)
	}
	return string(m)
}

// ParseMode parses "auto", "ztls" or "tls" ("" is auto).
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case "", ModeAuto, ModeZTLS, ModeTLS:
		return m, nil
	}
	return "", fmt.Errorf("dial: unknown mode %q (want auto, ztls or tls)", s)
}

// Result is a finished connection.
type Result struct {
	Report  Report
	Conn    *tls13.Conn
	Session *tls13.ClientSession // the newest ticket, if the server sent one
	// Err is what went wrong after the handshake (the request lost, the
	// response timed out or cut short), as Report.Error says; nil when
	// the exchange completed.
	Err error
}

// Connect looks addr up, connects, runs the handshake, sends the request
// and reads the response, timing each step from the start of the lookup.
// When it fails it returns the report so far, its Error set, with the
// error (and no Conn); a failure after the handshake is the Result's Err.
func Connect(ctx context.Context, addr string, o Options) (*Result, error) {
	a := &attempt{o: o, start: time.Now() /* real time: elapsed */, res: &Result{Report: Report{Mode: "tls", Transport: "tcp", ECH: ECHReportNone}}}
	a.r = &a.res.Report
	if err := a.run(ctx, addr); err != nil {
		res := a.res
		if res.Conn != nil {
			res.Conn.Close()
			res.Conn = nil
		}
		res.Report.Error = err.Error()
		res.Report.Timing.Total = ms(time.Since(a.start))
		return res, err
	}
	return a.res, nil
}

// attempt is one Connect: what it was asked, what the lookups deliver,
// where ZTLS stands, and the report as it fills. Its phases are methods
// that run in order (see run); the transport step has two variants, TCP
// alone (transport.go) and TurboTLS (turbo.go), and every decision to
// fall back is in fallback.go.
type attempt struct {
	o     Options
	cfg   *tls13.Config // o.TLS, ServerName defaulting to host
	mem   *Memory       // servers that aborted on ztls
	now   func() time.Time
	start time.Time // of the lookups: the report's times count from it
	host  string
	port  int
	ip    netip.Addr // host as an IP address (else not valid)
	res   *Result
	r     *Report // &res.Report

	cache *prevalidate.Cache
	hit   *prevalidate.Entry // the cache's entry for host:port, or nil

	look *lookups     // what the lookup phase delivers
	ips  []netip.Addr // the first address answer

	// ZTLS: whether it may be tried at all (planZTLS), the verified
	// offer the handshake makes, and why the connection is plain TLS 1.3
	// (so far).
	wantZ  bool
	offer  *tls13.ZDataOffer
	reason string
	// pqForced: the offer is classical and only PQClassical allowed it
	// (pq.go).
	pqForced bool

	// ALPN (alpn.go): the client's protocols (TLS.NextProtos), the one
	// the request is written in, whether RequestIn was asked, and the
	// HTTPS answer once seen.
	protos  []string
	reqALPN string
	askedIn bool
	https   *resolver.Answer

	ech echState // Encrypted ClientHello (ech.go)
}

// run is the attempt, phase by phase.
func (a *attempt) run(ctx context.Context, addr string) error {
	if err := a.configure(addr); err != nil {
		return err
	}
	a.consultCache(ctx) // prefetched and prevalidated inputs, if any
	if err := a.planZTLS(); err != nil {
		return err
	}
	lctx, cancelLookups := context.WithCancel(ctx)
	defer cancelLookups()
	a.startLookups(lctx) // addresses, Z-data, TLSA, CERT and HTTPS at once
	if err := a.awaitAddress(ctx); err != nil {
		return err
	}
	// The transport step starts on the first address: TCP (and TurboTLS's
	// UDP flight) while the Z-data is verified, then the handshake with
	// what was verified in time, and the retry without ztls of a server
	// that aborts on it.
	c, err := a.transport(ctx).connect(ctx)
	if err != nil {
		return err
	}
	return a.exchange(ctx, c)
}

// configure checks the options and the address and settles the TLS
// configuration, the memory and the clock.
func (a *attempt) configure(addr string) error {
	if _, err := ParseMode(string(a.o.Mode)); err != nil {
		return err
	}
	if _, err := ParseZDataFrom(string(a.o.ZDataFrom)); err != nil {
		return err
	}
	if _, err := ParsePostQuantum(string(a.o.PostQuantum)); err != nil {
		return err
	}
	if _, err := ParseECHMode(string(a.o.ECH)); err != nil {
		return err
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dial: %q is not HOST:PORT: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("dial: bad port in %q", addr)
	}
	a.host, a.port = host, port
	if ip, err := netip.ParseAddr(host); err == nil {
		a.ip = ip
	}
	a.cfg = a.o.TLS
	if a.cfg == nil {
		a.cfg = &tls13.Config{}
	}
	if a.cfg.ServerName == "" {
		a.cfg = a.cfg.Clone()
		a.cfg.ServerName = host
	}
	a.mem = a.o.Memory
	if a.mem == nil {
		a.mem = defaultMemory
	}
	a.now = a.o.clock()
	a.cache = a.o.cacheOrDefault()
	a.protos, a.reqALPN = a.cfg.NextProtos, a.o.RequestALPN
	return nil
}

// clock is Options.Now, or clock.Now.
func (o *Options) clock() func() time.Time {
	if o.Now != nil {
		return o.Now
	}
	return clock.Now
}

// cacheOrDefault is Options.Cache, or the process default.
func (o *Options) cacheOrDefault() *prevalidate.Cache {
	if o.Cache != nil {
		return o.Cache
	}
	return prevalidate.DefaultCache()
}

// Prevalidation returns the options of a prevalidate.Prefetch whose
// entries a Connect with o uses: o's TLS configuration, Resolver, Cache,
// OCSP policy, NoBFE, Z-data source (ZDataFrom, ZDataSvcParamKey) and
// clock (an entry serves the certificate policy it was validated under
// only), and whether the connection wants v3 records (PostQuantum and
// Memory's pin, docs/ztls-spec.md, Section 9.6), so the prefetch asks
// for the TXT RRset over TCP at once as the connection would.
func (o Options) Prevalidation() prevalidate.Options {
	return prevalidate.Options{TLS: o.TLS, Resolver: o.Resolver, Cache: o.Cache, OCSP: o.OCSP, NoBFE: o.NoBFE, Now: o.Now,
		ZDataFrom: o.ZDataFrom, ZDataSvcParamKey: o.ZDataSvcParamKey, WantPQ: o.wantsPQ}
}

// budget is how long to wait for Z-data (and TurboTLS's advertisement).
func (a *attempt) budget() time.Duration {
	if a.o.ZDataBudget > 0 {
		return a.o.ZDataBudget
	}
	return 20 * time.Millisecond
}

// step puts a step in the report's trace, timed now.
func (a *attempt) step(name string) {
	a.r.Trace = append(a.r.Trace, TraceStep{Step: name, AtMS: ms(time.Since(a.start))})
}

// exchange fills the report from the handshake, sends the request if it
// did not go early, and reads the response; what goes wrong after the
// handshake is res.Err, not an error return (but for a request that could
// not be sent).
func (a *attempt) exchange(ctx context.Context, c *tls13.Conn) error {
	res, r, o := a.res, a.r, &a.o
	res.Conn = c
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline && o.Input == nil {
		c.SetDeadline(deadline) // the response read is bounded too
	}
	st := c.ConnectionState()
	r.fillTLS(st)
	a.settleReason(st)
	a.reportPQ(st)
	a.rememberLeaf(st)
	r.AnswerInFirstFlight = st.AnswerInFirstFlight
	if err := a.sendRequest(c, st); err != nil {
		return err
	}
	if o.Input != nil && res.Err == nil {
		go a.sendInput(c, deadline, hasDeadline)
	}
	if o.ReadResponse > 0 && res.Err == nil {
		rr := &responseReader{c: c, max: o.ReadResponse, out: o.Out, r: r, start: a.start, step: a.step}
		var err error
		if o.HTTP {
			err = rr.readHTTP(requestMethod(o.Request))
		} else {
			err = rr.readAll()
		}
		if err != nil && res.Err == nil {
			res.Err = err
		}
	}
	if res.Err != nil {
		r.Error = res.Err.Error()
	}
	res.Session = c.Session()
	r.Timing.Total = ms(time.Since(a.start))
	return nil
}

// rememberLeaf keeps the chain the handshake verified, with which the
// next connection verifies the HTTPS record's Z-data without asking TLSA
// or CERT (docs/ztls-spec.md, Section 8.3, Memory.RememberLeaf).
func (a *attempt) rememberLeaf(st tls13.ConnectionState) {
	if a.ip.IsValid() || a.cfg.InsecureSkipVerify || st.DidResume || len(st.PeerCertificates) == 0 {
		return
	}
	a.mem.RememberLeaf(a.host, a.port, st.PeerCertificates, a.now())
}

// sendRequest sends the Request after the handshake unless it went as
// early data and was accepted. dial is its one writer: the engine is told
// not to resend rejected early data (handshake), so the server is sent
// one copy, however the ZTLS offer fared. A request written in another
// protocol than the one negotiated is not sent (RFC 8446, Section
// 4.2.10: early data rejected on a connection that selected another ALPN
// protocol must be constructed anew); Result.Err says so.
func (a *attempt) sendRequest(c *tls13.Conn, st tls13.ConnectionState) error {
	o := &a.o
	switch {
	case len(o.Request) == 0 || st.EarlyDataAccepted:
		return nil
	case !fitsALPN(a.reqALPN, st.NegotiatedProtocol):
		negotiated := "no ALPN protocol"
		if st.NegotiatedProtocol != "" {
			negotiated = fmt.Sprintf("ALPN %q", st.NegotiatedProtocol)
		}
		a.res.Err = fmt.Errorf("%w: the request is written in %s, and the server selected %s", ErrRequestNotSent, a.reqALPN, negotiated)
		a.step("request_not_sent")
		return nil
	}
	_, err := c.Write(o.Request)
	return err
}

// sendInput sends Options.Input as it is read, then half-closes.
func (a *attempt) sendInput(c *tls13.Conn, deadline time.Time, hasDeadline bool) {
	io.Copy(c, a.o.Input)
	if hasDeadline {
		// The rest is bounded by ctx's deadline or, when the input
		// outlasted it (typing), as long again from now.
		d := deadline
		if now := time.Now(); now.After(d) { // real time: a deadline
			d = now.Add(deadline.Sub(a.start))
		}
		c.SetDeadline(d)
	}
	c.CloseWrite()
}
