// Package dial establishes ztls connections as the ZTLS paper's client
// does, done properly: the address, Z-data, TLSA and CERT lookups run in
// parallel; TCP starts the moment an address arrives; Z-data is verified
// (signature, validity, chain, name) while the SYN is in flight; the
// handshake opens with ZTLS if valid Z-data is in hand when TCP is up
// (waiting at most a small budget), else with TLS 1.3. Every step is
// timed and every fallback has its reason in the Report.
package dial

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// Options configures one connection.
type Options struct {
	// Mode: "auto" (ZTLS when valid Z-data is in hand, else TLS 1.3),
	// "ztls" (fail if ZTLS can't be used) or "tls".
	Mode string
	// TLS is the client configuration; ServerName defaults to the host.
	TLS *tls13.Config
	// Resolver is the T-DNS resolver used for addresses and Z-data; nil
	// means the system resolver for addresses and no Z-data.
	Resolver *resolver.Resolver
	// ZDataBudget is how long to wait for Z-data once TCP is up; 0 means 20 ms.
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
	ReplaySafe bool
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
	// Now is the clock for Z-data validity; nil means time.Now.
	Now func() time.Time
	// Turbo sends the first flights over UDP while TCP connects
	// (TurboTLS, package turbo) to servers whose HTTPS record advertises
	// a UDP port (key65280); see TurboOptions.
	Turbo bool
	TurboOptions
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

// Fallback reasons that are not Z-data verification failures.
const (
	ReasonModeTLS       = "mode tls"
	ReasonNoResolver    = "no DNS resolver for Z-data"
	ReasonIPLiteral     = "address given as an IP: no name to look Z-data up"
	ReasonBudget        = "Z-data not answered within the budget after TCP connected"
	ReasonRejected      = "server rejected the ztls early data (a server without these Z-data keys ignores ztls; a ztls server refuses early data that may be a replay, after a restart that lost its anti-replay memory or while that memory is unavailable, and when it requires client certificates; its log (ztls serve -v) says which)"
	ReasonRemembered    = "server aborted on ztls before (remembered)"
	ReasonServerAborted = "server aborted on the ztls ClientHello; retried without"
	ReasonNoEarly       = "no replay-safe request to send as early data"
	ReasonServerName    = "TLS ServerName differs from the dialled host (Z-data is signed for the dialled host)"
)

// ErrZTLSImpossible is what Connect's error wraps when Options.Mode is
// "ztls" and ZTLS cannot be used; the error goes on with the reason, one
// that would have been Report.FallbackReason in Mode "auto".
var ErrZTLSImpossible = errors.New(`dial: mode "ztls" impossible`)

type zresult struct {
	offer *tls13.ZDataOffer
	err   error
	at    time.Duration
}

// Connect looks addr up, connects, runs the handshake, sends the request
// and reads the response, timing each step from the start of the lookup.
// When it fails it returns the report so far, its Error set, with the
// error (and no Conn); a failure after the handshake is the Result's Err.
func Connect(ctx context.Context, addr string, o Options) (*Result, error) {
	start := time.Now()
	res := &Result{Report: Report{Mode: "tls", Transport: "tcp"}}
	if err := attempt(ctx, addr, o, res, start); err != nil {
		if res.Conn != nil {
			res.Conn.Close()
			res.Conn = nil
		}
		res.Report.Error = err.Error()
		res.Report.Timing.Total = ms(time.Since(start))
		return res, err
	}
	return res, nil
}

// attempt is Connect's work; res is filled as it goes.
func attempt(ctx context.Context, addr string, o Options, res *Result, start time.Time) error {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	r := &res.Report
	step := func(name string) { r.Trace = append(r.Trace, TraceStep{Step: name, AtMS: ms(time.Since(start))}) }
	switch o.Mode {
	case "", "auto", "ztls", "tls":
	default:
		return fmt.Errorf("dial: unknown mode %q (want auto, ztls or tls)", o.Mode)
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("dial: %q is not HOST:PORT: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 1 || port > 65535 {
		return fmt.Errorf("dial: bad port in %q", addr)
	}
	cfg := o.TLS
	if cfg == nil {
		cfg = &tls13.Config{}
	}
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	mem := o.Memory
	if mem == nil {
		mem = defaultMemory
	}
	wantZ := o.Mode != "tls"
	reason := ""
	_, isIP := netip.ParseAddr(host)
	switch {
	case !wantZ:
		reason = ReasonModeTLS
	case isIP == nil:
		reason, wantZ = ReasonIPLiteral, false
	case o.Resolver == nil:
		reason, wantZ = ReasonNoResolver, false
	case len(o.Request) == 0 || !o.ReplaySafe:
		// ZTLS's gain is the answer to an early request; a request that
		// must not be replayed never goes early (RFC 8470).
		reason, wantZ = ReasonNoEarly, false
	case !strings.EqualFold(strings.TrimSuffix(cfg.ServerName, "."), strings.TrimSuffix(host, ".")):
		// The certificate is checked against ServerName, the Z-data and
		// the SNI it needs against the host: one name must serve both.
		reason, wantZ = ReasonServerName, false
	case mem.Aborted(host, port, now()):
		reason, wantZ = ReasonRemembered, false
	}
	if o.Mode == "ztls" && !wantZ {
		return fmt.Errorf("%w: %s", ErrZTLSImpossible, reason)
	}

	lctx, cancelLookups := context.WithCancel(ctx)
	defer cancelLookups()
	addrs := make(chan []netip.Addr, 2)
	zdone := make(chan zresult, 1)
	lookupErr := make(chan error, 1)
	httpsAns := make(chan *resolver.Answer, 1)
	var likely chan likelyOffer // TurboTLS makes its first flight with it
	if o.Turbo && wantZ {
		likely = make(chan likelyOffer, 1)
	}
	if isIP == nil {
		a, _ := netip.ParseAddr(host)
		addrs <- []netip.Addr{a}
	} else if o.Resolver == nil {
		go func() {
			ips, err := net.DefaultResolver.LookupNetIP(lctx, "ip", host)
			if err != nil {
				lookupErr <- fmt.Errorf("dial: looking up %s: %w", host, err)
				return
			}
			addrs <- ips
		}()
	} else {
		go lookupService(lctx, o.Resolver, host, port, wantZ, newPolicy(cfg), now, start, addrs, zdone, lookupErr, httpsAns, likely)
	}

	// TCP starts on the first address to arrive.
	var ips []netip.Addr
	select {
	case ips = <-addrs:
	case err := <-lookupErr:
		return err
	case <-ctx.Done():
		return fmt.Errorf("dial: looking up %s: %w", host, ctx.Err())
	}
	tcpStart := time.Now()
	r.Timing.DNS = ms(tcpStart.Sub(start))
	step("address")
	var earlyConn net.Conn // TurboTLS's address-time TCP connection, when it was not used
	var earlyConnect time.Duration
	if o.Turbo {
		t := &turboDial{o: o, cfg: cfg, r: r, res: res, start: start, host: host, port: port, ips: ips,
			wantZ: wantZ, reason: reason, zdone: zdone, likely: likely, https: httpsAns, isIP: isIP == nil, mem: mem, now: now}
		if used, err := t.connect(ctx); used || err != nil {
			return err
		}
		earlyConn, earlyConnect = t.plainConn()
		tcpStart = time.Now()
	}
	raw := earlyConn
	if raw == nil {
		var err error
		if raw, err = dialFirst(ctx, ips, port); err != nil {
			return err
		}
	}
	r.Address = raw.RemoteAddr().String()
	r.Timing.TCPConnect = ms(time.Since(tcpStart))
	if earlyConn != nil {
		r.Timing.TCPConnect = ms(earlyConnect)
	}
	step("tcp_connected")

	var offer *tls13.ZDataOffer
	if wantZ {
		budget := o.ZDataBudget
		if budget <= 0 {
			budget = 20 * time.Millisecond
		}
		timer := time.NewTimer(budget)
		select {
		case z := <-zdone:
			offer = z.offer
			if z.err != nil {
				reason = string(zdata.ReasonOf(z.err)) + ": " + z.err.Error()
			}
			r.Trace = append(r.Trace, TraceStep{Step: "zdata_verified", AtMS: ms(z.at)})
		case <-timer.C:
			reason = ReasonBudget
		}
		timer.Stop()
		if offer == nil && o.Mode == "ztls" {
			raw.Close()
			return fmt.Errorf("%w: %s", ErrZTLSImpossible, reason)
		}
	}

	c, err := handshake(ctx, raw, cfg, offer, o, r, start)
	if err != nil && offer != nil && abortedOnHello(c, err) {
		// A server that does not know ztls may abort on early_data without
		// a PSK (ZTLS-SPEC §6): one retry without it, remembered.
		mem.RememberAbort(host, port, now())
		raw.Close()
		raw, err = dialFirst(ctx, ips, port)
		if err != nil {
			return err
		}
		offer, reason = nil, ReasonServerAborted
		c, err = handshake(ctx, raw, cfg, nil, o, r, start)
	}
	if err != nil {
		raw.Close()
		return err
	}
	_, err = finish(ctx, c, offer, reason, o, res, start, step)
	return err
}

// finish fills the report from the handshake, sends the request if it did
// not go early, and reads the response; what goes wrong after the
// handshake is res.Err, not an error return.
func finish(ctx context.Context, c *tls13.Conn, offer *tls13.ZDataOffer, reason string, o Options, res *Result, start time.Time, step func(string)) (*Result, error) {
	r := &res.Report
	res.Conn = c
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline && o.Input == nil {
		c.SetDeadline(deadline) // the response read is bounded too
	}
	st := c.ConnectionState()
	r.fillTLS(st)
	if st.ZTLS {
		r.Mode, reason = "ztls", ""
	} else if offer != nil {
		reason = ReasonRejected
		if st.ZTLSSkipped != "" {
			reason = "Z-data not usable: " + st.ZTLSSkipped
		}
	}
	r.FallbackReason = reason
	r.AnswerInFirstFlight = st.AnswerInFirstFlight
	if len(o.Request) > 0 && !st.EarlyDataOffered {
		if _, err := c.Write(o.Request); err != nil {
			return nil, err
		}
	} else if st.EarlyDataOffered && !st.EarlyDataAccepted && c.EarlyDataLost() {
		res.Err = ErrEarlyRequestLost
	}
	if o.Input != nil {
		go func() {
			io.Copy(c, o.Input)
			if hasDeadline {
				// The rest is bounded by ctx's deadline or, when the input
				// outlasted it (typing), as long again from now.
				d := deadline
				if now := time.Now(); now.After(d) {
					d = now.Add(deadline.Sub(start))
				}
				c.SetDeadline(d)
			}
			c.CloseWrite()
		}()
	}
	if o.ReadResponse > 0 {
		rr := &responseReader{c: c, max: o.ReadResponse, out: o.Out, r: r, start: start, step: step}
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
	r.Timing.Total = ms(time.Since(start))
	return res, nil
}

func handshake(ctx context.Context, raw net.Conn, cfg *tls13.Config, offer *tls13.ZDataOffer, o Options, r *Report, start time.Time) (c *tls13.Conn, err error) {
	sniff := &firstBytes{Conn: raw}
	c = tls13.Client(sniff, cfg)
	defer func() {
		// A server that does not speak TLS at all (plain HTTP) fails the
		// handshake with a record error: say what it sent instead.
		if err != nil {
			err = sniff.notTLS(err)
		}
	}()
	if offer != nil {
		c.SetZData(offer)
	} else if o.Session != nil {
		c.SetSession(o.Session)
	}
	if o.sendsEarly(offer) {
		c.SetEarlyData(o.Request, o.ReplaySafe)
		r.EarlyData.Bytes = len(o.Request)
	}
	return c, runHandshake(ctx, c, r, start)
}

// sendsEarly says whether the Request goes as early data: with ZTLS (an
// offer), or with a resumed session that allows 0-RTT when ResumeEarly
// asks for it. Early data is replayable, so only a request marked
// ReplaySafe ever goes early (RFC 8470, Section 4.1).
func (o *Options) sendsEarly(offer *tls13.ZDataOffer) bool {
	if len(o.Request) == 0 || !o.ReplaySafe {
		return false
	}
	if offer != nil {
		return true
	}
	return o.Session != nil && o.ResumeEarly && o.Session.MaxEarlyData > 0
}

// runHandshake runs c's handshake and puts its time and trace in r.
func runHandshake(ctx context.Context, c *tls13.Conn, r *Report, start time.Time) error {
	hsStart := time.Now()
	err := c.HandshakeContext(ctx)
	r.Timing.Handshake = ms(time.Since(hsStart))
	for _, ev := range c.Trace() {
		r.Trace = append(r.Trace, TraceStep{Step: ev.Event.String(), AtMS: ms(ev.At.Sub(start))})
	}
	return err
}

// abortedOnHello: an alert, or a closed or reset connection, after the
// ztls ClientHello and before any ServerHello byte (ZTLS-SPEC §6).
func abortedOnHello(c *tls13.Conn, err error) bool {
	for _, ev := range c.Trace() {
		if ev.Event == tls13.EventServerHelloReceived {
			return false
		}
	}
	var ae *tls13.AlertError
	return errors.As(err, &ae) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		isReset(err) || (err != nil && errors.Is(err, tls13.ErrClosedDuringHandshake))
}

func dialFirst(ctx context.Context, ips []netip.Addr, port int) (net.Conn, error) {
	var d net.Dialer
	var err error
	for _, ip := range ips {
		var c net.Conn
		c, err = d.DialContext(ctx, "tcp", netip.AddrPortFrom(ip, uint16(port)).String())
		if err == nil {
			return c, nil
		}
	}
	if err == nil {
		err = errors.New("no address")
	}
	return nil, fmt.Errorf("dial: connecting to port %d: %w", port, err)
}

// lookupService runs the parallel lookup: the first address answer goes
// to addrs at once; the Z-data is verified as soon as TXT, TLSA and CERT
// have all landed, while TCP connects.
func lookupService(ctx context.Context, res *resolver.Resolver, host string, port int, wantZ bool,
	trust *policy, now func() time.Time, start time.Time,
	addrs chan<- []netip.Addr, zdone chan<- zresult, lookupErr chan<- error, httpsAns chan<- *resolver.Answer, likely chan<- likelyOffer) {
	var txt, tlsa, cert *resolver.Answer
	sentAddr := false
	pendingAddr := 2
	verified := false
	// The Z-data's public-key work starts as early as its inputs allow, so
	// little is left when the last answer lands (TurboTLS sends nothing
	// before the check is done): the client's key share at once, the DNS
	// round trip being idle time; the ECDH with the likeliest record's
	// share when the TXT answer lands; the chain checks when TLSA and CERT
	// have landed; the records' signatures when all three are in.
	var keyShare chan *tls13.ZDataKeyShare
	var prepared *preparedShare
	sel := zdata.NewSelector(host, port, zdata.SelectOptions{Now: now(), Policy: trust.check})
	chains := false
	if wantZ {
		keyShare = make(chan *tls13.ZDataKeyShare, 1)
		go func() { keyShare <- tls13.NewZDataKeyShare(tls13.X25519, nil) }()
	}
	verify := func() {
		if !wantZ {
			return
		}
		if !chains && tlsa != nil && cert != nil {
			sel.StartChains(rrsOf[*dns.TLSA](tlsa), rrsOf[*dns.CERT](cert))
			chains = true
		}
		if verified || txt == nil || !chains {
			return
		}
		verified = true
		txts := txtStrings(txt)
		if likely != nil {
			if rec, leaf := sel.Likely(txts); leaf != nil {
				likely <- likelyOffer{offer: rec.Offer(leaf), prepared: prepared}
			}
		}
		check := func() {
			offer, err := verifyZData(txts, sel, trust, prepared)
			zdone <- zresult{offer: offer, err: err, at: time.Since(start)}
		}
		if sentAddr {
			// The address is out; what may still land (AAAA, HTTPS) can
			// wait the check, which a new goroutine would only start later.
			check()
		} else {
			go check()
		}
	}
	_, err := res.LookupService(ctx, host, port, func(a resolver.Answer) {
		a2 := a
		switch a.Qtype {
		case dns.TypeA, dns.TypeAAAA:
			pendingAddr--
			var ips []netip.Addr
			for _, rr := range a.RRs {
				switch v := rr.(type) {
				case *dns.A:
					if ip, ok := netip.AddrFromSlice(v.A.To4()); ok {
						ips = append(ips, ip)
					}
				case *dns.AAAA:
					if ip, ok := netip.AddrFromSlice(v.AAAA); ok {
						ips = append(ips, ip)
					}
				}
			}
			if len(ips) > 0 && !sentAddr {
				sentAddr = true
				addrs <- ips
			} else if pendingAddr == 0 && !sentAddr {
				report(lookupErr, fmt.Errorf("dial: %s has no address (A/AAAA): %s", host, rcodeText(a)))
			}
		case dns.TypeTXT:
			txt = &a2
			if wantZ {
				prepared = &preparedShare{done: make(chan struct{})}
				rec, _ := sel.Likely(txtStrings(txt))
				go func(ps *preparedShare, rec *zdata.Record) {
					ks := <-keyShare
					if rec != nil {
						ps.p = ks.Prepare(rec.Group, rec.KeyShare, nil)
					}
					close(ps.done)
				}(prepared, rec)
			}
		case dns.TypeTLSA:
			tlsa = &a2
		case dns.TypeCERT:
			cert = &a2
		case dns.TypeHTTPS:
			httpsAns <- &a2
		}
		verify()
	})
	if err != nil && !sentAddr {
		report(lookupErr, fmt.Errorf("dial: looking up %s: %w", host, err))
	}
	if !verified && wantZ {
		zdone <- zresult{err: &zdata.Error{Reason: zdata.ReasonNoZData, Err: errors.New("the Z-data lookups did not complete")}}
	}
}

// report delivers the first lookup error; later ones are dropped, so the
// lookup goroutine never blocks after Connect has returned.
func report(ch chan<- error, err error) {
	select {
	case ch <- err:
	default:
	}
}

func rcodeText(a resolver.Answer) string {
	if a.Err != nil {
		return a.Err.Error()
	}
	return dns.RcodeToString[a.Rcode]
}

// verifyZData selects among the TXT records with chains and makes the
// offer the engine uses. prepared delivers the key share and ZS made for
// the likeliest record (or nil) meanwhile; the engine uses them only if
// that record is the one selected.
func verifyZData(txts [][]string, sel *zdata.Selector, trust *policy, prepared *preparedShare) (*tls13.ZDataOffer, error) {
	rec, leaf, err := sel.Select(txts)
	if err != nil {
		return nil, err
	}
	offer := trust.offer(leaf)
	if offer == nil {
		return nil, errors.New("dial: internal error: selected leaf without a policy verdict")
	}
	rec.FillOffer(offer)
	offer.Prepared = prepared.get()
	return offer, nil
}

// policy is the TLS client's certificate policy applied to Z-data leaves
// (tls13.Config.VerifyZDataOffer): each leaf's check leaves an offer that
// carries the verdict, so the handshake does not repeat the check.
type policy struct {
	cfg *tls13.Config
	mu  sync.Mutex
	ok  map[*x509.Certificate]*tls13.ZDataOffer
}

func newPolicy(cfg *tls13.Config) *policy {
	return &policy{cfg: cfg, ok: map[*x509.Certificate]*tls13.ZDataOffer{}}
}

func (p *policy) check(leaf *x509.Certificate, inter []*x509.Certificate) error {
	z := &tls13.ZDataOffer{Leaf: leaf, Intermediates: inter}
	if err := p.cfg.VerifyZDataOffer(z); err != nil {
		return err
	}
	p.mu.Lock()
	p.ok[leaf] = z
	p.mu.Unlock()
	return nil
}

func (p *policy) offer(leaf *x509.Certificate) *tls13.ZDataOffer {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ok[leaf]
}

// preparedShare is the key share and ZS made for the likeliest record
// (tls13.ZDataPrepared, single-use), for any number of readers: the
// verified offer and TurboTLS's early first flight share it.
type preparedShare struct {
	done chan struct{}
	p    *tls13.ZDataPrepared // nil: no likely record
}

func (s *preparedShare) get() *tls13.ZDataPrepared {
	<-s.done
	return s.p
}

// likelyOffer is the offer of the likeliest record, unverified, and its
// prepared share (see zdata.Selector.Likely).
type likelyOffer struct {
	offer    *tls13.ZDataOffer
	prepared *preparedShare
}

// sameOffer reports whether a and b offer the same Z-data with the same
// leaf (so a first flight made for one is the one the other would make).
func sameOffer(a, b *tls13.ZDataOffer) bool {
	return a.ID == b.ID && a.Hash == b.Hash && a.Group == b.Group && bytes.Equal(a.Share, b.Share) &&
		a.MaxEarlyData == b.MaxEarlyData && a.ALPN == b.ALPN && slices.Equal(a.NSC, b.NSC) &&
		a.Leaf != nil && b.Leaf != nil && bytes.Equal(a.Leaf.Raw, b.Leaf.Raw)
}

// rrsOf returns the records of type T in a.
func rrsOf[T dns.RR](a *resolver.Answer) []T {
	var out []T
	for _, rr := range a.RRs {
		if t, ok := rr.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// txtStrings returns the strings of each TXT record in a.
func txtStrings(a *resolver.Answer) [][]string {
	var txts [][]string
	for _, t := range rrsOf[*dns.TXT](a) {
		txts = append(txts, t.Txt)
	}
	return txts
}
