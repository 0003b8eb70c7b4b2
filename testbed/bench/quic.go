package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/ztls-project/ztls/testbed/hosts"
)

func init() {
	Register("quic", func() Contender { return &quicContender{} })
	Register("quic-0rtt", func() Contender { return &quicContender{early: true, cache: tls.NewLRUClientSessionCache(4)} })
}

const quicALPN = "ztls-bench"

// quicContender is QUIC with quic-go. Plain "quic" makes a 1-RTT handshake
// and sends the request after it (DNS + 2 RTT); "quic-0rtt" resumes a
// session from a previous visit and sends the request as 0-RTT data
// (DNS + 1 RTT).
type quicContender struct {
	early bool
	cache tls.ClientSessionCache
}

func (q *quicContender) Name() string {
	if q.early {
		return "quic-0rtt"
	}
	return "quic"
}

type quicServer struct {
	ln *quic.EarlyListener
	pc net.PacketConn
	wg sync.WaitGroup
}

func (s *quicServer) Close() error {
	err := s.ln.Close()
	s.pc.Close()
	s.wg.Wait()
	return err
}

func (q *quicContender) StartServer(ctx context.Context, h *hosts.Host, cfg ServerConfig) (io.Closer, error) {
	// The emulated hosts keep default socket buffers; quic-go would warn.
	if os.Getenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING") == "" {
		os.Setenv("QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING", "true")
	}
	pc, err := h.ListenPacket("udp4", cfg.Addr.String())
	if err != nil {
		return nil, err
	}
	tc := &tls.Config{
		Certificates:     []tls.Certificate{cfg.Cert},
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
		NextProtos:       []string{quicALPN},
	}
	ln, err := quic.ListenEarly(pc, tc, &quic.Config{Allow0RTT: true})
	if err != nil {
		pc.Close()
		return nil, err
	}
	s := &quicServer{ln: ln, pc: pc}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			conn, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				st, err := conn.AcceptStream(ctx)
				if err != nil {
					conn.CloseWithError(1, "no stream")
					return
				}
				cfg.Respond(st)
				st.Close()
				// Let the client close the connection once it has the answer.
				select {
				case <-conn.Context().Done():
				case <-ctx.Done():
					conn.CloseWithError(0, "")
				}
			}()
		}
	}()
	return s, nil
}

func (q *quicContender) tlsConfig(c *Client) *tls.Config {
	return &tls.Config{
		ServerName:         c.ServerName,
		RootCAs:            c.RootCAs,
		MinVersion:         tls.VersionTLS13,
		CurvePreferences:   []tls.CurveID{tls.X25519},
		NextProtos:         []string{quicALPN},
		ClientSessionCache: q.cache,
	}
}

// Prime makes the previous visit whose session ticket 0-RTT resumes.
func (q *quicContender) Prime(ctx context.Context, c *Client) error {
	if !q.early {
		return nil
	}
	var s Sample
	_, err := q.visit(ctx, c, &s, false)
	return err
}

func (q *quicContender) RunClient(ctx context.Context, c *Client) (Sample, error) {
	var s Sample
	used0RTT, err := q.visit(ctx, c, &s, q.early)
	s.Early = used0RTT
	if err == nil && q.early && !used0RTT {
		err = errors.New("bench: quic-0rtt: server did not accept 0-RTT")
	}
	return s, err
}

func (q *quicContender) visit(ctx context.Context, c *Client, s *Sample, early bool) (bool, error) {
	start := time.Now()
	addr, err := c.Resolve(ctx)
	if err != nil {
		return false, err
	}
	s.DNS = time.Since(start)
	pc, err := c.Host.ListenPacket("udp4", c.Host.Addr.String()+":0")
	if err != nil {
		return false, err
	}
	defer pc.Close()
	raddr := net.UDPAddrFromAddrPort(c.ServerAddr(addr))
	var conn *quic.Conn
	if early {
		conn, err = quic.DialEarly(ctx, pc, raddr, q.tlsConfig(c), &quic.Config{})
	} else {
		conn, err = quic.Dial(ctx, pc, raddr, q.tlsConfig(c), &quic.Config{})
	}
	if err != nil {
		return false, err
	}
	defer conn.CloseWithError(0, "")
	if !early {
		s.Handshake = time.Since(start) - s.DNS
	}
	st, err := conn.OpenStreamSync(ctx)
	if err != nil {
		return false, err
	}
	if _, err := st.Write(c.Request); err != nil {
		return false, err
	}
	st.Close()
	var hsDone chan time.Duration
	if early {
		// With 0-RTT the response may arrive before the handshake ends.
		hsDone = make(chan time.Duration, 1)
		go func() {
			select {
			case <-conn.HandshakeComplete():
				hsDone <- time.Since(start)
			case <-ctx.Done():
			}
		}()
	}
	if err := c.ReadResponse(st, start, s); err != nil {
		return false, err
	}
	if early {
		select {
		case t := <-hsDone:
			s.Handshake = t - s.DNS
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	return conn.ConnectionState().Used0RTT, nil
}
