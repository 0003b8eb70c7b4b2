// Package ztlshttp carries HTTP over ztls: a terminating reverse proxy
// that answers requests received as early data in its first flight, and a
// net/http dialer so Go clients get ZTLS by changing one line.
//
// Early data is replayable, so both follow RFC 8470: the proxy marks
// forwarded early requests with "Early-Data: 1" and, when the backend
// answers 425 (Too Early), waits for the handshake to complete and sends
// the request again; the client sends only idempotent requests early.
package ztlshttp

import (
	"bufio"
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

// Proxy forwards HTTP/1.1 requests arriving on ztls connections to Backend.
type Proxy struct {
	// Backend is the origin, e.g. http://127.0.0.1:8080.
	Backend *url.URL
	// Client forwards the requests; nil means a client with a 30 s timeout.
	Client *http.Client
	// Timeout bounds each connection's idle time; 0 means 60 s.
	Timeout time.Duration
	// Logf, if set, receives one line per request.
	Logf func(format string, args ...any)
}

// earlyReader reads a server connection's 0-RTT data, then ends.
type earlyReader struct{ c *tls13.Conn }

func (r earlyReader) Read(p []byte) (int, error) { return r.c.ReadEarlyData(p) }

// ServeConn handles one connection until the client or the backend is done.
func (p *Proxy) ServeConn(c *tls13.Conn) error {
	defer c.Close()
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	c.SetDeadline(time.Now().Add(timeout))
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.HandshakeEarly(ctx); err != nil {
		return err
	}
	// A request that came as early data is answered now, in the server's
	// first flight, marked Early-Data: 1 for the backend.
	if st := c.ConnectionState(); st.EarlyDataAccepted {
		br := bufio.NewReader(earlyReader{c})
		req, err := http.ReadRequest(br)
		if err == nil {
			if err := p.forward(ctx, c, req, true); err != nil {
				return err
			}
		} else if !errors.Is(err, io.EOF) {
			p.writeError(c, http.StatusBadRequest, "malformed early request")
			return err
		}
	}
	if err := c.HandshakeContext(ctx); err != nil {
		return err
	}
	br := bufio.NewReader(c)
	for {
		c.SetDeadline(time.Now().Add(timeout))
		req, err := http.ReadRequest(br)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return nil
			}
			return err
		}
		if err := p.forward(ctx, c, req, false); err != nil {
			return err
		}
		if req.Close {
			return nil
		}
	}
}

func (p *Proxy) client() *http.Client {
	if p.Client != nil {
		return p.Client
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// forward sends req to the backend and writes the response to c.
func (p *Proxy) forward(ctx context.Context, c *tls13.Conn, req *http.Request, early bool) error {
	out := req.Clone(ctx)
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.Backend.Scheme, p.Backend.Host
	out.URL.Path = singleJoin(p.Backend.Path, req.URL.Path)
	out.Header.Del("Early-Data") // only we may say it (RFC 8470, Section 5.1)
	if early {
		out.Header.Set("Early-Data", "1")
	}
	out.Header.Set("X-Forwarded-Proto", "https")
	if host, _, err := net.SplitHostPort(c.RemoteAddr().String()); err == nil {
		out.Header.Set("X-Forwarded-For", host)
	}
	resp, err := p.client().Do(out)
	if err != nil {
		p.writeError(c, http.StatusBadGateway, "backend unreachable")
		return fmt.Errorf("ztlshttp: backend: %w", err)
	}
	if early && resp.StatusCode == http.StatusTooEarly {
		// RFC 8470, Section 5.2: wait until the request can't be a replay.
		resp.Body.Close()
		if err := c.HandshakeContext(ctx); err != nil {
			return err
		}
		p.logf("%s %s: backend said 425 Too Early; retrying after the handshake", req.Method, req.URL.Path)
		return p.forward(ctx, c, req, false)
	}
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
