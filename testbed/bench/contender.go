package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/testbed/hosts"
)

// Contender is one protocol in the benchmark. Adding a protocol means
// writing one type that satisfies it and calling Register.
type Contender interface {
	// Name is the protocol's name on the command line and in results.
	Name() string
	// StartServer starts the protocol's server on host h, listening on
	// cfg.Addr (TCP, UDP or both, as the protocol needs). It answers each
	// request with ServerConfig.Respond. Closing the result stops it.
	StartServer(ctx context.Context, h *hosts.Host, cfg ServerConfig) (io.Closer, error)
	// RunClient makes one first visit from c.Host and measures it: the
	// clock starts before the DNS lookup (Client.Resolve) and stops at the
	// first response byte (Client.Exchange does both the same way for all).
	RunClient(ctx context.Context, c *Client) (Sample, error)
}

// Primer is implemented by contenders that need a previous visit, such as
// resumption with 0-RTT. The harness calls Prime, unmeasured, before every
// RunClient and before it sets the DNS caches for the scenario.
type Primer interface {
	Prime(ctx context.Context, c *Client) error
}

// Sample is one measured connection. Durations are from the start of the
// DNS lookup, except Handshake.
type Sample struct {
	// DNS is the time the lookup took.
	DNS time.Duration `json:"dns_ns"`
	// Handshake runs from the end of the lookup until the client considers
	// the handshake done (for TCP protocols including TCP's handshake).
	Handshake time.Duration `json:"handshake_ns"`
	// FirstByte is when the first response byte reached the client.
	FirstByte time.Duration `json:"first_byte_ns"`
	// Early reports that the request went as early data and was accepted.
	Early bool `json:"early"`
	// DNSQueries is how many queries the scenario's resolver got during
	// the visit, over UDP and TCP (each a query and an answer: twice as
	// many stub↔resolver packets). The harness counts them; in the stub
	// scenario they include the worker's filling of its own cache.
	DNSQueries int `json:"dns_queries"`
}

// ServerConfig is what every contender's server gets.
type ServerConfig struct {
	// Addr is the address to listen on (the server host's address and the
	// contender's port).
	Addr netip.AddrPort
	// Cert is the server's certificate for ServerName, signed by the
	// benchmark's CA; CertFile and KeyFile hold it as PEM for programs.
	Cert              tls.Certificate
	CertFile, KeyFile string
	// Dir is a scratch directory for the server; Files holds the response
	// bodies by request path ("5b" → "hello"), also written into Dir for
	// file-serving programs.
	Dir   string
	Files map[string][]byte
	// Publish replaces, in the scenario's authoritative DNS, the records
	// of each name and type in its argument (the ztls server publishes its
	// Z-data with it). Caches are flushed before every measured visit.
	Publish func(rrs []dns.RR)
}

// Respond reads one request ("GET /path HTTP/1.0", headers, blank line)
// from rw and writes the bytes stored for path. It is the common request
// handling of the Go servers.
func (cfg *ServerConfig) Respond(rw io.ReadWriter) error {
	req, err := readRequest(rw)
	if err != nil {
		return err
	}
	body, ok := cfg.Files[req]
	if !ok {
		body = []byte("HTTP/1.0 404 Not Found\r\n\r\n")
	}
	_, err = rw.Write(body)
	return err
}

// readRequest reads up to the blank line ending an HTTP/1.0 request and
// returns the path without its leading slash.
func readRequest(r io.Reader) (string, error) {
	var buf []byte
	one := make([]byte, 512)
	for !bytes.Contains(buf, []byte("\r\n\r\n")) {
		if len(buf) > 8192 {
			return "", errors.New("bench: request too long")
		}
		n, err := r.Read(one)
		buf = append(buf, one[:n]...)
		if err != nil && !bytes.Contains(buf, []byte("\r\n\r\n")) {
			return "", fmt.Errorf("bench: reading request: %w", err)
		}
	}
	line, _, _ := bytes.Cut(buf, []byte("\r\n"))
	f := bytes.Fields(line)
	// The target is one slash and the page's name ("//x" would name it
	// with a slash the pages never have).
	if len(f) != 3 || string(f[0]) != "GET" || !bytes.HasPrefix(f[1], []byte("/")) || bytes.HasPrefix(f[1], []byte("//")) {
		return "", fmt.Errorf("bench: bad request line %q", line)
	}
	return string(f[1][1:]), nil
}

// Client is what a contender's client gets for one visit.
type Client struct {
	// Host is the client's host: dial and listen through it.
	Host *hosts.Host
	// ServerName is the DNS name of the server (and its certificate name).
	ServerName string
	// Port is the contender's server port.
	Port uint16
	// Request is the request to send; Expect is the complete response.
	Request, Expect []byte
	// RootCAs trusts the benchmark's CA; CAFile is the same as PEM.
	RootCAs *x509.CertPool
	CAFile  string
	// Dir is a scratch directory for client-side programs.
	Dir string
	// Scenario is the DNS scenario of this visit; clients with their own
	// DNS stub (the ztls dialer) keep their cache warm when it says
	// StubCache, and empty otherwise.
	Scenario Scenario
	// TurboWait is how long TurboTLS clients wait for the server's UDP
	// flight after TCP connects; 0 keeps dial's default (half the TCP
	// connect time, at least 2 ms). Tests on a loaded machine raise it so
	// that a slow scheduler does not turn a turbo visit into a fallback.
	TurboWait time.Duration

	dns *stub
	dot *dotServer // the resolver's DoT listener (dot.go); nil without one
}

// Resolve looks up the server's IPv4 address through the scenario's DNS
// path (stub cache, then the resolver).
func (c *Client) Resolve(ctx context.Context) (netip.Addr, error) {
	return c.dns.lookupA(ctx, c.ServerName)
}

// ServerAddr is the address to connect to once addr is resolved.
func (c *Client) ServerAddr(addr netip.Addr) netip.AddrPort {
	return netip.AddrPortFrom(addr, c.Port)
}

// Exchange sends the request on rw, records the first response byte in
// s.FirstByte (measured from start) and reads the rest of the response,
// which must equal c.Expect. The server ends the response by closing.
func (c *Client) Exchange(rw io.ReadWriter, start time.Time, s *Sample) error {
	if _, err := rw.Write(c.Request); err != nil {
		return fmt.Errorf("bench: sending request: %w", err)
	}
	return c.ReadResponse(rw, start, s)
}

// ReadResponse is the reading half of Exchange, for clients that send the
// request themselves (as early data, or through another program).
func (c *Client) ReadResponse(r io.Reader, start time.Time, s *Sample) error {
	buf := make([]byte, 4096)
	n, err := r.Read(buf)
	for n == 0 && err == nil {
		n, err = r.Read(buf)
	}
	if n > 0 {
		s.FirstByte = time.Since(start)
	}
	got := append([]byte(nil), buf[:n]...)
	for err == nil && len(got) < len(c.Expect)+1 {
		n, err = r.Read(buf)
		got = append(got, buf[:n]...)
	}
	if err != nil && !errors.Is(err, io.EOF) && !isClosed(err) && !bytes.Equal(got, c.Expect) {
		return fmt.Errorf("bench: reading response: %w", err)
	}
	if !bytes.Equal(got, c.Expect) {
		return fmt.Errorf("bench: response %q, want %q", trim(got), trim(c.Expect))
	}
	return nil
}

func isClosed(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

func trim(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}

var registry = struct {
	sync.Mutex
	m map[string]func() Contender
}{m: map[string]func() Contender{}}

// Register makes a contender available by name; new is called once per
// benchmark so contenders may keep state (session caches). It panics on a
// duplicate name, a programming error.
func Register(name string, new func() Contender) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.m[name]; dup {
		panic("bench: contender " + name + " registered twice")
	}
	registry.m[name] = new
}

// Contenders returns the registered names, sorted.
func Contenders() []string {
	registry.Lock()
	defer registry.Unlock()
	var names []string
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// NewContender returns a fresh contender by name.
func NewContender(name string) (Contender, error) {
	registry.Lock()
	defer registry.Unlock()
	f, ok := registry.m[name]
	if !ok {
		return nil, fmt.Errorf("bench: unknown protocol %q (have %v)", name, keys(registry.m))
	}
	return f(), nil
}

func keys(m map[string]func() Contender) []string {
	var s []string
	for k := range m {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
