package turbo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// The proxy pair (the TurboTLS paper, Section 4.3) gives unmodified TLS
// clients and servers TurboTLS's saving: the client proxy, near the
// client, takes the client's first flight off its TCP connection and
// races it over UDP to the server proxy, near the server, which hands it
// to the real server over TCP and returns the server's first flight over
// UDP. Neither proxy parses more of TLS than record framing: the bytes
// are carried, never changed, so the TLS session is end to end.

// maxFirstFlight bounds a client's first flight read by the client proxy.
const maxFirstFlight = 64 << 10

// readClientHello reads TLS records from r until they hold one whole
// handshake message (the ClientHello) and returns the records' bytes.
func readClientHello(r io.Reader) ([]byte, error) {
	var raw, hs []byte
	hdr := make([]byte, 5)
	for {
		if _, err := io.ReadFull(r, hdr); err != nil {
			return nil, fmt.Errorf("turbo: reading the client's first flight: %w", err)
		}
		if hdr[0] != 22 {
			return nil, fmt.Errorf("turbo: client's first record has content type %d, not handshake", hdr[0])
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 || n > 1<<14+256 || len(raw)+5+n > maxFirstFlight {
			return nil, errors.New("turbo: bad record length in the client's first flight")
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("turbo: reading the client's first flight: %w", err)
		}
		raw = append(append(raw, hdr...), body...)
		hs = append(hs, body...)
		if len(hs) >= 4 {
			if hs[0] != 1 {
				return nil, errors.New("turbo: the client's first message is not a ClientHello")
			}
			if need := 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3])); len(hs) >= need {
				if len(hs) > need {
					return nil, errors.New("turbo: bytes after the ClientHello in its records")
				}
				return raw, nil
			}
		}
	}
}

// proxySizes is the client proxies' flight-size cache when none is set.
var proxySizes = &SizeCache{}

// readMoreRecords appends to flight the whole records that arrive on c
// within grace of each other (a record once started is read to its end
// within timeout).
func readMoreRecords(c net.Conn, flight []byte, grace, timeout time.Duration) ([]byte, error) {
	hdr := make([]byte, 5)
	for len(flight) < maxFirstFlight {
		c.SetReadDeadline(time.Now().Add(grace))
		if _, err := io.ReadFull(c, hdr[:1]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return flight, nil
			}
			return nil, fmt.Errorf("turbo: reading the client's first flight: %w", err)
		}
		c.SetReadDeadline(time.Now().Add(timeout))
		if _, err := io.ReadFull(c, hdr[1:]); err != nil {
			return nil, fmt.Errorf("turbo: reading the client's first flight: %w", err)
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n > 1<<14+256 || len(flight)+5+n > maxFirstFlight {
			return nil, errors.New("turbo: bad record length in the client's first flight")
		}
		start := len(flight)
		flight = append(append(flight, hdr...), make([]byte, n)...)
		if _, err := io.ReadFull(c, flight[start+5:]); err != nil {
			return nil, fmt.Errorf("turbo: reading the client's first flight: %w", err)
		}
	}
	return flight, nil
}

// ClientProxy accepts TCP connections from TLS clients and carries each
// to the server proxy with TurboTLS.
type ClientProxy struct {
	// ServerTCP and ServerUDP are the server proxy's addresses.
	ServerTCP, ServerUDP netip.AddrPort
	// Client tunes the race (Wait, ExpectedFlight, Sizes, DialTCP,
	// DialUDP); its TLS fields are unused.
	Client ClientConfig
	// Logf, if set, gets one line per connection.
	Logf func(format string, args ...any)
	// Timeout bounds the first flight exchange; 0 means 10 s.
	Timeout time.Duration
	// EarlyGrace is how long, after the ClientHello, to collect records
	// the client already sent with it (0-RTT or ZTLS early data, a
	// ChangeCipherSpec), so they travel in the UDP flight too; 0 means
	// 1 ms.
	EarlyGrace time.Duration
}

// Serve accepts connections on ln until it fails.
func (p *ClientProxy) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go p.handle(c)
	}
}

func (p *ClientProxy) logf(format string, args ...any) {
	if p.Logf != nil {
		p.Logf(format, args...)
	}
}

func (p *ClientProxy) handle(down net.Conn) {
	defer down.Close()
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	down.SetReadDeadline(time.Now().Add(timeout))
	hello, err := readClientHello(down)
	if err == nil {
		grace := p.EarlyGrace
		if grace <= 0 {
			grace = time.Millisecond
		}
		hello, err = readMoreRecords(down, hello, grace, timeout)
	}
	down.SetReadDeadline(time.Time{})
	if err != nil {
		p.logf("%s: %v", down.RemoteAddr(), err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cfg := p.Client
	if cfg.Sizes == nil {
		cfg.Sizes = proxySizes
	}
	h := newHello(p.ServerUDP, hello, nil, &cfg)
	rr, err := runRace(ctx, time.Now() /* real time: elapsed */, p.ServerTCP, h)
	if err != nil {
		p.logf("%s: %v", down.RemoteAddr(), err)
		return
	}
	up := rr.tcp
	defer up.Close()
	if rr.flight != nil {
		// The server's flight goes to the client now; the link record
		// tells the server proxy which backend connection to join.
		if _, err := up.Write(wire.AppendLink(nil, rr.id)); err != nil {
			return
		}
		if _, err := down.Write(rr.flight); err != nil {
			return
		}
		p.logf("%s: turbo, server flight %d bytes over UDP", down.RemoteAddr(), len(rr.flight))
	} else {
		if _, err := up.Write(hello); err != nil {
			return
		}
		p.logf("%s: TCP only (%s)", down.RemoteAddr(), rr.miss)
	}
	splice(down, up)
}

// splice copies both ways until both directions ended.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
	}
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// ServerProxy answers TurboTLS client flights by handing them to a TLS
// server over TCP, and joins the client proxy's TCP connection to that
// backend connection.
type ServerProxy struct {
	*Server
	// Backend is the TLS server's TCP address.
	Backend string
	// Quiet ends the server's first flight: the backend sent nothing more
	// for this long after at least one whole record; 0 means 3 ms. The
	// proxy cannot see inside encrypted records, so a pause is the only
	// boundary it has; bytes after it continue over TCP.
	Quiet time.Duration
	// DialBackend dials Backend; nil means a net.Dialer.
	DialBackend func(ctx context.Context, addr string) (net.Conn, error)
	// Logf, if set, gets one line per connection.
	Logf func(format string, args ...any)
}

// NewServerProxy returns a server proxy for the TLS server at backend;
// opt bounds its UDP table (Flight and Release are set here).
func NewServerProxy(backend string, opt Config) *ServerProxy {
	p := &ServerProxy{Backend: backend}
	opt.Flight = p.flight
	opt.Release = func(st any) { st.(net.Conn).Close() }
	p.Server = NewServer(opt)
	return p
}

func (p *ServerProxy) dial(ctx context.Context) (net.Conn, error) {
	if p.DialBackend != nil {
		return p.DialBackend(ctx, p.Backend)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", p.Backend)
}

func (p *ServerProxy) flight(ctx context.Context, _ netip.AddrPort, clientFlight []byte) ([]byte, any, error) {
	be, err := p.dial(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, err := be.Write(clientFlight); err != nil {
		be.Close()
		return nil, nil, err
	}
	flight, err := p.readFlight(ctx, be)
	if err != nil {
		be.Close()
		return nil, nil, err
	}
	return flight, be, nil
}

// readFlight reads whole TLS records from the backend until it pauses.
func (p *ServerProxy) readFlight(ctx context.Context, be net.Conn) ([]byte, error) {
	quiet := p.Quiet
	if quiet <= 0 {
		quiet = 3 * time.Millisecond
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(2 * time.Second) // real time: a deadline
	}
	var flight []byte
	hdr := make([]byte, 5)
	for {
		if len(flight) > 0 {
			be.SetReadDeadline(time.Now().Add(quiet))
		} else {
			be.SetReadDeadline(deadline)
		}
		_, err := io.ReadFull(be, hdr[:1])
		if err != nil {
			var ne net.Error
			if len(flight) > 0 && errors.As(err, &ne) && ne.Timeout() {
				be.SetReadDeadline(time.Time{})
				return flight, nil
			}
			return nil, fmt.Errorf("turbo: reading the backend's flight: %w", err)
		}
		be.SetReadDeadline(deadline) // the rest of a started record
		if _, err := io.ReadFull(be, hdr[1:]); err != nil {
			return nil, fmt.Errorf("turbo: reading the backend's flight: %w", err)
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if len(flight)+5+n > wire.MaxFlight || n > 1<<14+256 {
			return nil, errors.New("turbo: backend flight too long")
		}
		flight = append(flight, hdr...)
		start := len(flight)
		flight = append(flight, make([]byte, n)...)
		if _, err := io.ReadFull(be, flight[start:]); err != nil {
			return nil, fmt.Errorf("turbo: reading the backend's flight: %w", err)
		}
		if hdr[0] == 21 {
			// An alert ends the flight at once.
			be.SetReadDeadline(time.Time{})
			return flight, nil
		}
	}
}

// Serve accepts the client proxies' TCP connections on ln until it fails.
func (p *ServerProxy) Serve(ln net.Listener) error {
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		go p.handle(c)
	}
}

func (p *ServerProxy) handle(raw net.Conn) {
	defer raw.Close()
	id, linked, c, err := readLink(raw, 10*time.Second)
	if err != nil {
		return
	}
	var remote netip.Addr
	if ta, ok := raw.RemoteAddr().(*net.TCPAddr); ok {
		remote = ta.AddrPort().Addr()
	}
	if linked {
		if v, ok := p.Link(id, remote); ok {
			be := v.(net.Conn)
			be.SetReadDeadline(time.Time{})
			defer be.Close()
			if p.Logf != nil {
				p.Logf("%s: turbo %s", raw.RemoteAddr(), id)
			}
			splice(c, be)
			return
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	be, err := p.dial(ctx)
	cancel()
	if err != nil {
		return
	}
	defer be.Close()
	if p.Logf != nil {
		p.Logf("%s: TCP only", raw.RemoteAddr())
	}
	splice(c, be)
}
