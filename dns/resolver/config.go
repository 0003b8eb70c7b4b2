package resolver

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"
)

// Transport names the protocol the resolver speaks to its upstream servers.
type Transport string

// The transports. UDP falls back to TCP for truncated answers; TCP and TLS
// keep one pipelined connection per upstream (T-DNS).
const (
	UDP Transport = "udp"
	TCP Transport = "tcp"
	TLS Transport = "tls" // DNS over TLS, RFC 7858
)

// Defaults used when a Config field is zero.
const (
	DefaultTimeout   = 5 * time.Second
	DefaultCacheSize = 4096
	// UDPBufferSize is the EDNS0 buffer size advertised over UDP, the value
	// DNS Flag Day 2020 settled on to avoid IP fragmentation.
	UDPBufferSize = 1232
	// PaddingBlock is the block size queries are padded to over DNS over
	// TLS (RFC 8467, Section 4.1).
	PaddingBlock = 128
	// DefaultIdleTimeout closes a stream connection that has been idle this
	// long when the server announced no edns-tcp-keepalive timeout.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultReconnectBackoff and DefaultMaxReconnectBackoff bound how
	// often a stream transport reconnects to a server that fails.
	DefaultReconnectBackoff    = 250 * time.Millisecond
	DefaultMaxReconnectBackoff = 10 * time.Second
)

// Dialer opens the byte stream a stream transport speaks over. For TLS the
// returned connection must already be (or lazily become) a TLS client
// connection; *tls.Dialer satisfies it, and so will the project's own TLS
// engine. For TCP a *net.Dialer satisfies it.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Config configures a Resolver. The zero value queries nothing: Servers is
// required. Other zero fields take the documented defaults.
type Config struct {
	// Servers are the upstream servers as "host:port" or a bare IP address
	// (port 53, or 853 for TLS). They are tried in order.
	Servers []string
	// Transport defaults to UDP.
	Transport Transport
	// TLSConfig is used for TLS when Dialer is nil. A nil TLSConfig uses the
	// system roots. When ServerName is empty it is set to each server's
	// host. When ClientSessionCache is nil the resolver adds one so that a
	// reconnect resumes the TLS session. The resolver clones it.
	TLSConfig *tls.Config
	// Dialer, if set, opens stream connections (TCP and TLS) instead of the
	// built-in net.Dialer / tls.Dialer. TLSConfig is then not used.
	Dialer Dialer
	// Timeout is the time budget of one query, retries included.
	// Default DefaultTimeout.
	Timeout time.Duration
	// CacheSize bounds the number of cached answers (LRU). Zero means
	// DefaultCacheSize; a negative value disables the cache.
	CacheSize int
	// Prefetch refreshes, in the background, a cached answer that is used
	// within the last 10 % of its TTL, so that popular names never expire.
	Prefetch bool
	// IdleTimeout closes an idle stream connection when the server did not
	// announce its own keepalive (RFC 7828). Default DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ReconnectBackoff is the wait before a stream transport (TCP, TLS)
	// connects again to a server whose connect or handshake failed, or
	// whose connections keep closing before any reply; it doubles with
	// each failure in a row up to MaxReconnectBackoff, jittered down by up
	// to half, and a reply resets it. A lookup that meets the wait waits
	// within its time budget and, if the budget ends first, fails with the
	// server's last error (such as the certificate's). Defaults
	// DefaultReconnectBackoff and DefaultMaxReconnectBackoff.
	ReconnectBackoff    time.Duration
	MaxReconnectBackoff time.Duration
	// Now returns the current time for the cache; tests use a fake clock.
	// Default: the ztls clock (internal/clock).
	Now func() time.Time
}

// FromResolvConf reads a resolv.conf(5) file and returns a Config with its
// name servers (port 53), UDP (or TCP with "options use-vc") and a Timeout
// of timeout×attempts seconds (defaults 5 and 2, as glibc). With no
// nameserver line it falls back to the local host, as glibc does.
func FromResolvConf(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("resolver: %w", err)
	}
	return parseResolvConf(data)
}

func parseResolvConf(data []byte) (Config, error) {
	cfg := Config{Transport: UDP}
	timeout, attempts := 5, 2
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexAny(text, "#;"); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "nameserver":
			if len(fields) < 2 {
				return Config{}, fmt.Errorf("resolver: resolv.conf line %d: nameserver without address", line)
			}
			addr, err := netip.ParseAddr(fields[1])
			if err != nil {
				return Config{}, fmt.Errorf("resolver: resolv.conf line %d: bad nameserver %q", line, fields[1])
			}
			cfg.Servers = append(cfg.Servers, netip.AddrPortFrom(addr, 53).String())
		case "options":
			for _, opt := range fields[1:] {
				name, val, _ := strings.Cut(opt, ":")
				switch name {
				case "timeout", "attempts":
					n, err := strconv.Atoi(val)
					if err != nil || n < 1 || n > 30 {
						return Config{}, fmt.Errorf("resolver: resolv.conf line %d: bad option %q", line, opt)
					}
					if name == "timeout" {
						timeout = n
					} else {
						attempts = n
					}
				case "use-vc", "usevc":
					cfg.Transport = TCP
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return Config{}, fmt.Errorf("resolver: resolv.conf: %w", err)
	}
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{"127.0.0.1:53", "[::1]:53"}
	}
	cfg.Timeout = time.Duration(timeout*attempts) * time.Second
	return cfg, nil
}

// normalizeServer adds the transport's default port to a bare host.
func normalizeServer(s string, t Transport) (string, error) {
	port := "53"
	if t == TLS {
		port = "853"
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		if ap.Port() == 0 {
			return "", fmt.Errorf("resolver: bad server address %q", s)
		}
		return ap.String(), nil
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return net.JoinHostPort(a.String(), port), nil
	}
	host, p, err := net.SplitHostPort(s)
	if err != nil {
		if s == "" || strings.ContainsAny(s, " /[]") {
			return "", fmt.Errorf("resolver: bad server address %q", s)
		}
		return net.JoinHostPort(s, port), nil
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 || host == "" {
		return "", fmt.Errorf("resolver: bad server address %q", s)
	}
	return s, nil
}
