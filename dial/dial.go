// Package dial establishes ztls connections and measures them: DNS, TCP,
// the TLS 1.3 handshake and the first response byte, reported as a
// Report. The ZTLS and TurboTLS paths plug in here.
package dial

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// Options configures one connection.
type Options struct {
	// Mode: "tls" (plain TLS 1.3) or "auto"; "ztls" is for Z-data servers.
	Mode string
	// TLS is the client configuration; ServerName defaults to the host.
	TLS *tls13.Config
	// Session, if set, is offered for resumption (and 0-RTT).
	Session *tls13.ClientSession
	// EarlyData is sent as 0-RTT data when the session allows, otherwise
	// (or when rejected) as the first application data.
	EarlyData []byte
	// Request is sent after the handshake when there is no EarlyData.
	Request []byte
	// Resolver looks the host up; nil means net.DefaultResolver.
	Resolver *net.Resolver
	// ReadResponse reads until the server closes, up to this many bytes
	// (0: do not read).
	ReadResponse int
	// Out receives the response bytes as they arrive (may be nil).
	Out io.Writer
}

// Result is a finished connection.
type Result struct {
	Report  Report
	Conn    *tls13.Conn
	Session *tls13.ClientSession // the newest ticket, if the server sent one
}

// Connect looks addr up, connects, runs the handshake, sends the request
// and reads the response, timing each step.
func Connect(ctx context.Context, addr string, o Options) (*Result, error) {
	start := time.Now()
	res := &Result{Report: Report{Mode: "tls", Transport: "tcp"}}
	r := &res.Report
	switch o.Mode {
	case "", "tls", "auto":
	case "ztls":
		return nil, errors.New("dial: --mode ztls needs a server publishing Z-data; this build speaks TLS 1.3 only (use --mode tls)")
	default:
		return nil, fmt.Errorf("dial: unknown mode %q (want auto, ztls or tls)", o.Mode)
	}
	if o.Mode == "auto" {
		r.FallbackReason = "no Z-data support in this build"
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("dial: %q is not HOST:PORT: %w", addr, err)
	}
	resolver := o.Resolver
	if resolver == nil {
		resolver = net.DefaultResolver
	}
	ips, err := resolver.LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("dial: looking up %s: %w", host, err)
	}
	r.Timing.DNS = ms(time.Since(start))
	step := func(name string) { r.Trace = append(r.Trace, TraceStep{Step: name, AtMS: ms(time.Since(start))}) }
	step("dns_done")

	var d net.Dialer
	tcpStart := time.Now()
	var raw net.Conn
	for _, ip := range ips {
		raw, err = d.DialContext(ctx, "tcp", net.JoinHostPort(ip.IP.String(), port))
		if err == nil {
			break
		}
	}
	if raw == nil {
		return nil, fmt.Errorf("dial: connecting to %s: %w", addr, err)
	}
	r.Address = raw.RemoteAddr().String()
	r.Timing.TCPConnect = ms(time.Since(tcpStart))
	step("tcp_connected")

	cfg := o.TLS
	if cfg == nil {
		cfg = &tls13.Config{}
	}
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	c := tls13.Client(raw, cfg)
	res.Conn = c
	if o.Session != nil {
		c.SetSession(o.Session)
	}
	if len(o.EarlyData) > 0 && o.Session != nil && o.Session.MaxEarlyData > 0 {
		c.SetEarlyData(o.EarlyData, true)
		r.EarlyData.Bytes = len(o.EarlyData)
	}
	hsStart := time.Now()
	if err := c.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, err
	}
	r.Timing.Handshake = ms(time.Since(hsStart))
	for _, ev := range c.Trace() {
		r.Trace = append(r.Trace, TraceStep{Step: ev.Event.String(), AtMS: ms(ev.At.Sub(start))})
	}
	st := c.ConnectionState()
	r.fillTLS(st)
	if len(o.EarlyData) > 0 && !r.EarlyData.Offered {
		if _, err := c.Write(o.EarlyData); err != nil {
			return nil, err
		}
	}
	if len(o.Request) > 0 {
		if _, err := c.Write(o.Request); err != nil {
			return nil, err
		}
	}
	if o.ReadResponse > 0 {
		buf := make([]byte, 32*1024)
		first := true
		for r.ResponseBytes < o.ReadResponse {
			n, err := c.Read(buf)
			if n > 0 {
				if first {
					r.Timing.FirstByte = ms(time.Since(start))
					step("first_byte")
					first = false
				}
				r.ResponseBytes += n
				if o.Out != nil {
					o.Out.Write(buf[:n])
				}
			}
			if err != nil {
				if err != io.EOF {
					r.Error = err.Error()
				}
				break
			}
		}
	}
	res.Session = c.Session()
	r.Timing.Total = ms(time.Since(start))
	return res, nil
}
