package server

// Split-mode ECH (RFC 9849, Section 3.1): the client-facing server
// holds the ECH keys, opens each ClientHelloOuter, and forwards the
// ClientHelloInner over TCP to the backend that serves the inner name
// (a tls13 server with Config.ECHBackend), then relays the bytes both
// ways. It never holds a key of the connection: the early data (ZTLS
// inside ECH) and all that follows are under the backend's keys. A
// ClientHello it cannot open (a stale config, GREASE, no ECH) is served
// by Public, as the public name, which sends the retry configs.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// Split is a client-facing ECH server in split mode.
type Split struct {
	// ECH holds the keys (the configs published for the inner names).
	ECH *tls13.ECHKeySet
	// Backends maps an inner server name (lower case) to its backend's
	// TCP address. A name not in it closes the connection.
	Backends map[string]string
	// Public serves a connection whose ClientHello was not forwarded, as
	// the public name: c replays the bytes already read. A tls13 server
	// with the public name's certificate and the same ECH keys completes
	// the handshake and sends the retry configs. Nil closes it.
	Public func(c net.Conn)
	// Timeout bounds reading the ClientHello and connecting the backend;
	// 0 means 10 s.
	Timeout time.Duration
	// Log receives a line per connection not forwarded; nil: none.
	Log *slog.Logger
}

// maxHello bounds a ClientHello the front reads (RFC 8446 allows 2^24;
// no client sends more than a few KiB).
const maxHello = 64 << 10

// Serve accepts connections on ln and serves each on its own goroutine
// until ln is closed; it then waits for them and returns ln's error.
func (s *Split) Serve(ln net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.ServeConn(c) }()
	}
}

// ServeConn serves one client connection and closes it.
func (s *Split) ServeConn(c net.Conn) {
	timeout := s.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	c.SetDeadline(time.Now().Add(timeout)) // real time: a deadline
	msg, raw, err := readHello(c)
	if err != nil {
		s.logf("split: reading the ClientHello", c, err)
		c.Close()
		return
	}
	f, err := s.ECH.OpenECHClientHello(msg)
	if errors.Is(err, tls13.ErrECHNotOpened) && s.Public != nil {
		c.SetDeadline(time.Time{})
		s.Public(&replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(raw), c)})
		return
	}
	if err != nil {
		s.logf("split: not forwarded", c, err)
		c.Close()
		return
	}
	s.forward(c, f, timeout)
}

// forward connects the backend of f's inner name, sends it the
// ClientHelloInner and relays the connection.
func (s *Split) forward(c net.Conn, f *tls13.ECHForward, timeout time.Duration) {
	defer c.Close()
	addr, ok := s.Backends[strings.ToLower(f.ServerName)]
	if !ok {
		s.logf("split: no backend", c, fmt.Errorf("inner server name %q", f.ServerName))
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	b, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		s.logf("split: backend", c, err)
		return
	}
	defer b.Close()
	if _, err := b.Write(handshakeRecords(f.Inner)); err != nil {
		return
	}
	if err := relayRetry(c, b, f); err != nil {
		s.logf("split: after a HelloRetryRequest", c, err)
		return
	}
	c.SetDeadline(time.Time{})
	splice(c, b)
}

func (s *Split) logf(msg string, c net.Conn, err error) {
	if s.Log != nil {
		s.Log.Info(msg, "remote", c.RemoteAddr().String(), "err", err)
	}
}

// helloRetryRandom is the random of a HelloRetryRequest (RFC 8446,
// Section 4.1.3).
var helloRetryRandom = []byte{0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
	0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C}

// relayRetry passes the backend's first record to the client. When it is
// a HelloRetryRequest, the client's records up to its second
// ClientHelloOuter go to the backend unchanged (a ChangeCipherSpec,
// early data the backend skips), and that ClientHello is opened with the
// first's HPKE context and forwarded as the second ClientHelloInner (RFC
// 9849, Section 7.1.1).
func relayRetry(c, b net.Conn, f *tls13.ECHForward) error {
	rec, err := readRecord(b)
	if err != nil {
		return err
	}
	if _, err := c.Write(rec); err != nil {
		return err
	}
	if len(rec) < 5+4+2+32 || rec[0] != 22 || rec[5] != 2 || !bytes.Equal(rec[5+4+2:5+4+2+32], helloRetryRandom) {
		return nil
	}
	for {
		rec, err := readRecord(c)
		if err != nil {
			return err
		}
		if rec[0] != 22 {
			if _, err := b.Write(rec); err != nil {
				return err
			}
			continue
		}
		msg, _, err := readHelloFrom(c, rec)
		if err != nil {
			return err
		}
		if err := f.OpenSecond(msg); err != nil {
			return err
		}
		_, err = b.Write(handshakeRecords(f.Inner))
		return err
	}
}

// readRecord reads one TLS record (header included).
func readRecord(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(hdr[3])<<8 | int(hdr[4])
	if n > 1<<14+256 {
		return nil, fmt.Errorf("a record of %d bytes", n)
	}
	rec := make([]byte, 5+n)
	copy(rec, hdr)
	_, err := io.ReadFull(r, rec[5:])
	return rec, err
}

// readHello reads the ClientHello opening a connection: the handshake
// message (type and length included) and every byte read.
func readHello(r io.Reader) (msg, raw []byte, err error) {
	rec, err := readRecord(r)
	if err != nil {
		return nil, nil, err
	}
	if rec[0] != 22 {
		return nil, nil, fmt.Errorf("the first record has content type %d, not a handshake", rec[0])
	}
	return readHelloFrom(r, rec)
}

// readHelloFrom reads the rest of the ClientHello whose first handshake
// record is rec.
func readHelloFrom(r io.Reader, rec []byte) (msg, raw []byte, err error) {
	raw = rec
	msg = append([]byte(nil), rec[5:]...)
	for len(msg) < 4 || len(msg) < 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
		if len(msg) > maxHello {
			return nil, nil, errors.New("a ClientHello over 64 KiB")
		}
		next, err := readRecord(r)
		if err != nil {
			return nil, nil, err
		}
		if next[0] != 22 {
			return nil, nil, errors.New("the ClientHello is interrupted by another record")
		}
		raw = append(raw, next...)
		msg = append(msg, next[5:]...)
	}
	if msg[0] != 1 {
		return nil, nil, fmt.Errorf("handshake message %d, not a ClientHello", msg[0])
	}
	n := 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
	if len(msg) != n {
		return nil, nil, errors.New("a record holds more than the ClientHello")
	}
	return msg, raw, nil
}

// handshakeRecords frames a handshake message in records of at most
// 2^14 bytes.
func handshakeRecords(msg []byte) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(len(msg), 1<<14)
		out = append(out, 22, 3, 3, byte(n>>8), byte(n))
		out = append(out, msg[:n]...)
		msg = msg[n:]
	}
	return out
}

// splice copies both ways until both directions end.
func splice(c, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(c, b)
		closeWrite(c)
	}()
	io.Copy(b, c)
	closeWrite(b)
	wg.Wait()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// replayConn is a connection whose first reads return bytes already read.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
