package bench

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"time"

	"github.com/ztls-project/ztls/testbed/hosts"
)

func init() {
	Register("gotls", func() Contender { return goTLS{} })
}

// goTLS is Go's crypto/tls: a full TLS 1.3 handshake over TCP with X25519,
// then the request (DNS + 3 RTT to the first byte).
type goTLS struct{}

func (goTLS) Name() string { return "gotls" }

func (goTLS) StartServer(ctx context.Context, h *hosts.Host, cfg ServerConfig) (io.Closer, error) {
	ln, err := h.Listen("tcp", cfg.Addr.String())
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		Certificates:     []tls.Certificate{cfg.Cert},
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}
	return serveTCP(ln, func(c net.Conn) {
		tlsConn := tls.Server(c, tc)
		if tlsConn.Handshake() == nil {
			cfg.Respond(tlsConn)
		}
		tlsConn.Close()
	}), nil
}

func (goTLS) RunClient(ctx context.Context, c *Client) (Sample, error) {
	var s Sample
	start := time.Now()
	addr, err := c.Resolve(ctx)
	if err != nil {
		return s, err
	}
	s.DNS = time.Since(start)
	conn, err := c.Host.DialContext(ctx, "tcp", c.ServerAddr(addr).String())
	if err != nil {
		return s, err
	}
	defer conn.Close()
	tlsConn := tls.Client(conn, &tls.Config{
		ServerName:       c.ServerName,
		RootCAs:          c.RootCAs,
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
	})
	if err := tlsConn.HandshakeContext(ctx); err != nil {
		return s, err
	}
	s.Handshake = time.Since(start) - s.DNS
	stopOnDone(ctx, conn)
	return s, c.Exchange(tlsConn, start, &s)
}

// stopOnDone closes conn when ctx ends, so no read outlives the sample.
func stopOnDone(ctx context.Context, conn io.Closer) {
	context.AfterFunc(ctx, func() { conn.Close() })
}

// tcpServer accepts connections and hands each to a goroutine.
type tcpServer struct {
	ln net.Listener
	wg sync.WaitGroup
	mu sync.Mutex
	cs map[net.Conn]bool
}

func serveTCP(ln net.Listener, handle func(net.Conn)) *tcpServer {
	s := &tcpServer{ln: ln, cs: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.cs[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				c.SetDeadline(time.Now().Add(time.Minute))
				handle(c)
				s.mu.Lock()
				delete(s.cs, c)
				s.mu.Unlock()
			}()
		}
	}()
	return s
}

// Close stops accepting, closes open connections and waits for handlers.
func (s *tcpServer) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.cs {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}
