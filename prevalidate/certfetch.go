package prevalidate

// The truncated handshake: Stark et al.'s fourth way to prefetch a
// certificate, for hosts that publish no Z-data.

import (
	"context"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/ztls-project/ztls/tls13"
)

// fetchChain runs a truncated TLS 1.3 handshake with the server: the
// ClientHello a connection with cfg would send (its SNI, groups and
// ALPN; no ztls, no PSK, no early data), the server's flight read up to
// its Certificate, and the TCP connection closed there, without an alert
// (the server has already sent its whole flight: it sees a client that
// went away before its Finished). The chain is returned unverified, with
// the address that served it.
func (c *Cache) fetchChain(ctx context.Context, addrs []netip.Addr, port int, cfg *tls13.Config) ([]*x509.Certificate, string, error) {
	hc := cfg.Clone()
	// The caller verifies the chain under the connection's policy;
	// nothing else of the handshake is used.
	hc.InsecureSkipVerify = true
	hc.VerifyPeerCertificate, hc.VerifiedChains, hc.KeyLogWriter, hc.ClientSessionCache = nil, nil, nil, nil
	raw, err := c.dialTCP(ctx, addrs, port)
	if err != nil {
		return nil, "", err
	}
	defer raw.Close()
	addr := raw.RemoteAddr().String()
	if dl, ok := ctx.Deadline(); ok {
		raw.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	fail := func(err error) ([]*x509.Certificate, string, error) {
		return nil, addr, fmt.Errorf("prevalidate: truncated handshake with %s: %w", addr, err)
	}
	e := tls13.NewClientEngine(hc)
	if err := e.Start(nil, nil, nil); err != nil {
		return fail(err)
	}
	if _, err := raw.Write(e.Output()); err != nil {
		return fail(err)
	}
	var buf []byte
	rd := make([]byte, 16<<10)
	for {
		// One record at a time: stop at the one that completes the
		// Certificate, whatever follows it.
		for len(buf) >= 5 {
			n := 5 + int(binary.BigEndian.Uint16(buf[3:5]))
			if len(buf) < n {
				break
			}
			if err := e.Feed(buf[:n]); err != nil {
				return fail(err)
			}
			buf = buf[n:]
			if certs := e.ConnectionState().PeerCertificates; len(certs) > 0 {
				return certs, addr, nil
			}
			if out := e.Output(); len(out) > 0 { // a second ClientHello after HelloRetryRequest
				if _, err := raw.Write(out); err != nil {
					return fail(err)
				}
			}
		}
		n, err := raw.Read(rd)
		buf = append(buf, rd[:n]...)
		if err != nil && n == 0 {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return fail(fmt.Errorf("the server's flight ended before its Certificate: %w", err))
		}
	}
}

// dialTCP connects to the first of addrs that answers, through the
// cache's dialer.
func (c *Cache) dialTCP(ctx context.Context, addrs []netip.Addr, port int) (net.Conn, error) {
	dial := c.dialer
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	err := errors.New("no address")
	for _, ip := range addrs {
		var conn net.Conn
		if conn, err = dial(ctx, "tcp", netip.AddrPortFrom(ip, uint16(port)).String()); err == nil {
			return conn, nil
		}
	}
	return nil, fmt.Errorf("prevalidate: connecting to port %d: %w", port, err)
}
