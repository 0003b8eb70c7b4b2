package ztlshttp

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// Proxy forwards the HTTP requests arriving on ztls connections to
// Backend: HTTP/2 when the connection negotiated ALPN "h2", else HTTP/1.1.
type Proxy struct {
	// Backend is the origin, e.g. http://127.0.0.1:8080.
	Backend *url.URL
	// Client forwards the requests; nil means a client with a 30 s timeout.
	Client *http.Client
	// Timeout bounds each connection's idle time; 0 means 60 s.
	Timeout time.Duration
	// HandshakeTimeout bounds the time from ServeConn's start until the
	// client's Finished has arrived (the early data, and an early
	// request's round trip to the backend, included), so that a client
	// that sends its ClientHello and then nothing holds the connection
	// that long, not Timeout; 0 means Timeout. A caller that already
	// spent some of a handshake bound (it ran HandshakeEarly itself)
	// passes what is left of it.
	HandshakeTimeout time.Duration
	// Logf, if set, receives one line per request.
	Logf func(format string, args ...any)
	// OnIdle, if set, is called with true when an HTTP/1.1 connection
	// waits for its next request and with false when one begins to
	// arrive: a server shutting down closes the idle ones at once.
	OnIdle func(c *tls13.Conn, idle bool)
	// OnEarlyData, if set, is called with the number of bytes of each
	// read of accepted early data (0-RTT or ZTLS), whether the request
	// they carry is forwarded as early or waits for the handshake.
	OnEarlyData func(n int)
}

// earlyReader reads a server connection's 0-RTT data, then ends; counted
// is Proxy.OnEarlyData.
type earlyReader struct {
	c       *tls13.Conn
	counted func(n int)
}

func (r earlyReader) Read(p []byte) (int, error) {
	n, err := r.c.ReadEarlyData(p)
	if n > 0 && r.counted != nil {
		r.counted(n)
	}
	return n, err
}

// ServeConn handles one connection until the client or the backend is done.
func (p *Proxy) ServeConn(c *tls13.Conn) error {
	return p.ServeConnContext(context.Background(), c)
}

// ServeConnContext is ServeConn whose backend requests end when base does
// (a server that cuts its connections at a shutdown deadline).
func (p *Proxy) ServeConnContext(base context.Context, c *tls13.Conn) error {
	defer c.Close()
	hsTimeout := p.HandshakeTimeout
	if hsTimeout <= 0 {
		hsTimeout = p.timeout()
	}
	// The handshake's calls take hs (tls13 bounds a handshake by its
	// context's deadline, and clears the socket's when it returns); the
	// early data between them is read under the same deadline.
	hsDeadline := time.Now().Add(hsTimeout) // real time: a deadline
	hs, hsCancel := context.WithDeadline(context.Background(), hsDeadline)
	defer hsCancel()
	ctx, cancel := context.WithTimeout(base, p.timeout())
	defer cancel()
	if err := c.HandshakeEarly(hs); err != nil {
		return err
	}
	c.SetDeadline(hsDeadline)
	st := c.ConnectionState()
	if st.NegotiatedProtocol == "h2" {
		return p.serveH2(hs, c)
	}
	var rest io.Reader = c
	if st.EarlyDataAccepted {
		r, done, err := p.serveEarly(ctx, hs, c)
		if err != nil || done {
			return err
		}
		rest = r
	}
	if err := p.completeHandshake(hs, c); err != nil {
		return err
	}
	br := bufio.NewReader(rest)
	for {
		c.SetDeadline(time.Now().Add(p.timeout()))
		if p.OnIdle != nil {
			p.OnIdle(c, true)
			br.Peek(1)
			p.OnIdle(c, false)
		}
		req, err := http.ReadRequest(br)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			return err
		}
		if err := p.checkHTTP1(c, req); err != nil {
			return err
		}
		resp, err := p.send(ctx, c, req, false)
		if err != nil {
			return err
		}
		if err := p.reply(c, req, resp, false); err != nil {
			return err
		}
		if req.Close {
			return nil
		}
	}
}

// timeout is Timeout or its default.
func (p *Proxy) timeout() time.Duration {
	if p.Timeout <= 0 {
		return 60 * time.Second
	}
	return p.Timeout
}

// completeHandshake waits for the client's Finished within the
// handshake's deadline (hs), then gives c its idle bound.
func (p *Proxy) completeHandshake(hs context.Context, c *tls13.Conn) error {
	if err := c.HandshakeContext(hs); err != nil {
		return err
	}
	return c.SetDeadline(time.Now().Add(p.timeout()))
}

// serveEarly answers the request that came as early data, in the server's
// first flight, when the early data holds it whole. It returns what the
// connection's next requests are read from once the handshake is done,
// or done when the connection is over.
//
// Early data that ends inside a request (headers or body incomplete) is
// not forwarded as early: neither truncated nor stitched to what follows
// the handshake under Early-Data: 1. The whole request is read again
// after the handshake, which proves it is no replay, and forwarded as an
// ordinary one. Early bytes after a whole first request are likewise read
// after the handshake.
//
// ctx bounds the backend's answer, hs the handshake.
func (p *Proxy) serveEarly(ctx, hs context.Context, c *tls13.Conn) (rest io.Reader, done bool, err error) {
	src := &endReader{r: earlyReader{c, p.OnEarlyData}, record: true}
	br := bufio.NewReader(src)
	req, body, err := readWhole(br, src)
	if errors.Is(err, errCut) {
		if len(src.rec) > 0 {
			p.logf("early data ended inside a request (%d bytes): waiting for the handshake, then forwarding it as not early", len(src.rec))
		}
		// src ran dry: rec holds all of the early data.
		return io.MultiReader(bytes.NewReader(src.rec), c), false, nil
	}
	if err != nil {
		p.writeError(c, http.StatusBadRequest, "malformed early request")
		return nil, true, fmt.Errorf("ztlshttp: early request: %w", err)
	}
	src.record, src.rec = false, nil
	if err := p.checkHTTP1(c, req); err != nil {
		return nil, true, err
	}
	if err := p.forwardEarly(ctx, hs, c, req, body); err != nil {
		return nil, true, err
	}
	if req.Close {
		return nil, true, p.completeHandshake(hs, c)
	}
	return io.MultiReader(br, c), false, nil
}

// checkHTTP1 refuses what is not HTTP/1.x, notably an HTTP/2 client's
// preface ("PRI * HTTP/2.0") on a connection that did not negotiate h2.
func (p *Proxy) checkHTTP1(c *tls13.Conn, req *http.Request) error {
	if req.ProtoMajor == 1 {
		return nil
	}
	p.writeError(c, http.StatusHTTPVersionNotSupported, "HTTP/2 needs ALPN h2")
	return fmt.Errorf("ztlshttp: %s request without ALPN h2", req.Proto)
}

func (p *Proxy) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// forwardEarly sends a whole early request, its body in hand, marked
// Early-Data: 1. When the backend answers 425 (Too Early) it waits for
// the handshake and sends the request again, with the same body
// (RFC 8470, Section 5.2). The body is bounded by the early data limit
// the handshake enforced (max_early_data_size).
func (p *Proxy) forwardEarly(ctx, hs context.Context, c *tls13.Conn, req *http.Request, body []byte) error {
	setBody(req, body)
	req.Trailer = nil
	resp, err := p.send(ctx, c, req, true)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusTooEarly {
		return p.reply(c, req, resp, true)
	}
	resp.Body.Close()
	if err := p.completeHandshake(hs, c); err != nil {
		return err
	}
	p.logf("%s %s: backend said 425 Too Early; retrying after the handshake", req.Method, req.URL.Path)
	req.Body, _ = req.GetBody()
	if resp, err = p.send(ctx, c, req, false); err != nil {
		return err
	}
	return p.reply(c, req, resp, false)
}

// setBody makes body, read whole, req's body, one that can be sent again
// (GetBody) for the retry after a 425.
func setBody(req *http.Request, body []byte) {
	req.ContentLength, req.TransferEncoding = int64(len(body)), nil
	req.GetBody = func() (io.ReadCloser, error) {
		if len(body) == 0 {
			return http.NoBody, nil
		}
		return io.NopCloser(bytes.NewReader(body)), nil
	}
	req.Body, _ = req.GetBody()
}

// send forwards req to the backend; when it can't, it answers 502.
func (p *Proxy) send(ctx context.Context, c *tls13.Conn, req *http.Request, early bool) (*http.Response, error) {
	resp, err := p.client().Do(p.outbound(ctx, req, c.RemoteAddr(), early))
	if err != nil {
		p.writeError(c, http.StatusBadGateway, "backend unreachable")
		return nil, fmt.Errorf("ztlshttp: backend: %w", err)
	}
	return resp, nil
}

// outbound is req as it goes to the backend: marked Early-Data: 1 when
// early, and by no one else (RFC 8470, Section 5.1).
func (p *Proxy) outbound(ctx context.Context, req *http.Request, remote net.Addr, early bool) *http.Request {
	out := req.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.Backend.Scheme, p.Backend.Host
	out.URL.Path = singleJoin(p.Backend.Path, req.URL.Path)
	out.Header.Del("Early-Data") // only we may say it (RFC 8470, Section 5.1)
	out.Header.Del(earlyMarker)
	if early {
		out.Header.Set("Early-Data", "1")
	}
	out.Header.Set("X-Forwarded-Proto", "https")
	if host, _, err := net.SplitHostPort(remote.String()); err == nil {
		out.Header.Set("X-Forwarded-For", host)
	}
	return out
}

// reply writes the backend's response to c.
func (p *Proxy) reply(c *tls13.Conn, req *http.Request, resp *http.Response, early bool) error {
	defer resp.Body.Close()
	p.logf("%s %s -> %d (early=%v)", req.Method, req.URL.Path, resp.StatusCode, early)
	return resp.Write(c)
}

func (p *Proxy) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
	}
}

func (p *Proxy) writeError(w io.Writer, code int, msg string) {
	fmt.Fprintf(w, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		code, http.StatusText(code), len(msg)+1, msg+"\n")
}

func singleJoin(a, b string) string {
	switch {
	case a == "":
		return b
	case strings.HasSuffix(a, "/") && strings.HasPrefix(b, "/"):
		return a + b[1:]
	case !strings.HasSuffix(a, "/") && !strings.HasPrefix(b, "/"):
		return a + "/" + b
	}
	return a + b
}
