package main

// ztls get's curl flags: -H, -X, -d, -I, -o, --fail and --resolve, for
// both of its clients (the HTTP/1.1 request dial sends, and ztlshttp's
// transport with --http2).

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/pflag"
	"golang.org/x/net/http/httpguts"
)

// getFlags are get's flags that shape the request and where the response
// goes, named as curl names them.
type getFlags struct {
	headers []string // -H NAME: VALUE, repeatable
	method  string   // -X
	data    []string // -d, repeatable, joined by '&' as curl does
	head    bool     // -I
	output  string   // -o FILE
	fail    bool     // --fail
	resolve []string // --resolve HOST:PORT:ADDR
}

func (g *getFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVarP(&g.headers, "header", "H", nil, "add a request header 'NAME: VALUE' (repeatable); one named as a default (Host, User-Agent, Connection, Content-Type) replaces it, 'NAME:' with no value leaves it out")
	fs.StringVarP(&g.method, "request", "X", "", "the request method (default GET, POST with --data, HEAD with --head)")
	fs.StringArrayVarP(&g.data, "data", "d", nil, "send DATA as the request body (repeatable: joined with '&'); @FILE sends the file's bytes as they are, @- standard input; makes the request a POST (Content-Type: application/x-www-form-urlencoded unless -H gives one), sent after the handshake, never early")
	fs.BoolVarP(&g.head, "head", "I", false, "a HEAD request: print the status line and header only")
	fs.StringVarP(&g.output, "output", "o", "", "write the response body to FILE (the status line and header go to standard error), as curl -o")
	fs.BoolVar(&g.fail, "fail", false, "on an HTTP status of 400 or more print no response and exit 22, as curl --fail")
	fs.StringArrayVar(&g.resolve, "resolve", nil, "connect to ADDR for HOST:PORT, as curl --resolve HOST:PORT:ADDR (repeatable; ADDR an IP address): the URL's name is still sent as SNI and Host, verified in the certificate, and its Z-data looked up, so ZTLS works as with the address from DNS")
}

// getRequest is get's request: its method, its header lines after the
// defaults, and its body (nil: none).
type getRequest struct {
	method string
	header http.Header // what -H adds or replaces
	remove []string    // default headers -H leaves out (canonical names)
	body   []byte
}

// build turns the flags into the request, reading -d @FILE.
func (g *getFlags) build() (*getRequest, error) {
	r := &getRequest{method: g.method, header: http.Header{}}
	if g.head && len(g.data) > 0 {
		return nil, fmt.Errorf("--head (-I) asks for the header only and --data (-d) sends a body: choose one")
	}
	if r.method != "" && !httpguts.ValidHeaderFieldName(r.method) {
		return nil, fmt.Errorf("--request (-X) %q: want a method such as GET, POST, PUT, DELETE", r.method)
	}
	if r.method == "" {
		switch {
		case g.head:
			r.method = http.MethodHead
		case len(g.data) > 0:
			r.method = http.MethodPost
		default:
			r.method = http.MethodGet
		}
	}
	for _, h := range g.headers {
		name, value, ok := strings.Cut(h, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		if !ok || !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("--header (-H) %q: want 'NAME: VALUE', e.g. -H 'Accept: text/html'", h)
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			return nil, fmt.Errorf("--header (-H) %q: a value cannot hold a line break or control character", h)
		}
		name = textproto.CanonicalMIMEHeaderKey(name)
		if name == "Content-Length" || name == "Transfer-Encoding" {
			// A second framing header would make the request ambiguous
			// (RFC 9112, Section 6.3).
			return nil, fmt.Errorf("--header (-H) %q: get frames the body itself (Content-Length from --data)", h)
		}
		if value == "" {
			r.remove = append(r.remove, name)
			r.header.Del(name)
			continue
		}
		r.header.Add(name, value)
	}
	if len(g.data) > 0 {
		parts := make([][]byte, len(g.data))
		for i, d := range g.data {
			file, ok := strings.CutPrefix(d, "@")
			if !ok {
				parts[i] = []byte(d)
				continue
			}
			var b []byte
			var err error
			if file == "-" {
				b, err = io.ReadAll(os.Stdin)
			} else {
				b, err = os.ReadFile(file)
			}
			if err != nil {
				return nil, fmt.Errorf("--data (-d) %s: %w", d, err)
			}
			parts[i] = b
		}
		r.body = bytes.Join(parts, []byte("&"))
		if r.header.Get("Content-Type") == "" && !r.removed("Content-Type") {
			r.header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
	}
	return r, nil
}

// removed says whether -H 'NAME:' left the header out.
func (r *getRequest) removed(name string) bool {
	for _, n := range r.remove {
		if n == name {
			return true
		}
	}
	return false
}

// http11 writes the request as HTTP/1.1 for u: the defaults (Host,
// User-Agent, Connection: close) less those -H replaces or leaves out,
// then -H's headers, then the body with its Content-Length.
func (r *getRequest) http11(u *url.URL) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", r.method, u.RequestURI())
	for _, d := range [][2]string{{"Host", u.Host}, {"User-Agent", "ztls"}, {"Connection", "close"}} {
		if r.header.Get(d[0]) == "" && !r.removed(d[0]) {
			fmt.Fprintf(&b, "%s: %s\r\n", d[0], d[1])
		}
	}
	r.header.Write(&b)
	if r.body != nil || r.method == http.MethodPost || r.method == http.MethodPut || r.method == http.MethodPatch {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(r.body))
	}
	b.WriteString("\r\n")
	b.Write(r.body)
	return b.Bytes()
}

// resolveAddr is the address --resolve gives for the URL's host and port
// (the port 443 when the URL names none), or the zero Addr when none of
// them is for it.
func (g *getFlags) resolveAddr(u *url.URL) (netip.Addr, error) {
	port := u.Port()
	if port == "" {
		port = "443"
	}
	for _, r := range g.resolve {
		// HOST:PORT:ADDR, ADDR an IPv4 address or an IPv6 one, bracketed
		// or not.
		host, rest, ok1 := strings.Cut(r, ":")
		p, addr, ok2 := strings.Cut(rest, ":")
		ip, err := netip.ParseAddr(strings.Trim(addr, "[]"))
		if !ok1 || !ok2 || err != nil {
			return netip.Addr{}, fmt.Errorf("--resolve %q: want HOST:PORT:ADDR, ADDR an IP address, e.g. --resolve www.example.test:443:127.0.0.1", r)
		}
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return netip.Addr{}, fmt.Errorf("--resolve %q: the port %q is not a number from 1 to 65535", r, p)
		}
		if strings.EqualFold(host, u.Hostname()) && p == port {
			return ip, nil
		}
	}
	if len(g.resolve) > 0 {
		fmt.Fprintf(os.Stderr, "ztls: no --resolve for %s: looking it up\n", net.JoinHostPort(u.Hostname(), port))
	}
	return netip.Addr{}, nil
}

// responseSplit takes an HTTP/1.x response as dial writes it (status
// line and header as received, then the body) and sends the header to
// head and the body to body; with fail, a final status of 400 or more
// sends neither. A response that does not start as HTTP is all body.
type responseSplit struct {
	head, body io.Writer
	fail       bool

	mu     sync.Mutex
	buf    []byte // the header so far
	inBody bool
	status int // the final response's
}

func (s *responseSplit) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		if s.inBody {
			if !s.failed() {
				s.body.Write(p)
			}
			return n, nil
		}
		s.buf = append(s.buf, p...)
		p = nil
		if len(s.buf) >= 5 && !bytes.HasPrefix(s.buf, []byte("HTTP/")) {
			s.inBody, p, s.buf = true, s.buf, nil // not HTTP
			continue
		}
		end := bytes.Index(s.buf, []byte("\r\n\r\n"))
		if end < 0 {
			continue
		}
		header, rest := s.buf[:end+4], s.buf[end+4:]
		s.buf = nil
		code := statusCode(header)
		if code >= 200 || code == 0 { // else an interim response: another header follows
			s.status, s.inBody = code, true
		}
		if !s.failed() {
			s.head.Write(header)
		}
		p = rest
	}
	return n, nil
}

// failed says whether --fail drops the response.
func (s *responseSplit) failed() bool { return s.fail && s.status >= 400 }

// Status is the final response's status code (0 before it, or for an
// answer that is not HTTP).
func (s *responseSplit) Status() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

// statusCode reads the status code of an HTTP/1.x status line.
func statusCode(header []byte) int {
	line, _, _ := bytes.Cut(header, []byte("\r\n"))
	f := strings.Fields(string(line))
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// errHTTPStatus is --fail's error for a status of 400 or more: exit 22,
// as curl's.
func errHTTPStatus(code int) error {
	return &exitError{code: 22, err: fmt.Errorf("the server answered %d %s (--fail: no response printed, exit status 22)", code, http.StatusText(code))}
}

// openOutput opens -o's file (nil: none).
func (g *getFlags) openOutput() (*os.File, error) {
	if g.output == "" || g.output == "-" {
		return nil, nil
	}
	f, err := os.Create(g.output)
	if err != nil {
		return nil, fmt.Errorf("--output (-o): %w", err)
	}
	return f, nil
}
