package authority

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
)

// Stream connections kept open (RFC 7766, Section 6.2.1; T-DNS) are
// mostly idle: a resolver keeps one to each authority it talks to and
// sends a query now and then. An idle connection therefore holds no
// buffer of its own. Its goroutine waits for the socket to become
// readable with nothing but its stack (a few KB once the garbage
// collector has shrunk it); a read buffer is taken from a pool when
// bytes arrive and returned when they are all consumed. The wait is the
// runtime's poller itself (syscall.RawConn.Read), a shallow stack: on TCP
// the read is done in it; on TLS, the TLS layer may hold a whole record
// already read, so a read that may not wait (a deadline in the past)
// asks it first, and only when it needs bytes from the socket does the
// goroutine wait for the socket. A connection whose TLS is not a
// crypto/tls *tls.Conn or a ztls *tls13.Conn over TCP waits in a two-byte
// read instead.

// streamReadBuf is the size of a pooled read buffer: a burst of pipelined
// queries, or one query of up to that size. Larger frames get a buffer
// of their own for as long as they are read.
const streamReadBuf = 4096

var streamBufs = sync.Pool{New: func() any { b := make([]byte, streamReadBuf); return &b }}

// frameReader reads length-prefixed DNS messages (RFC 1035, Section
// 4.2.2) from a stream, holding a buffer only while bytes are buffered.
type frameReader struct {
	c   net.Conn
	rc  syscall.RawConn // set for a *net.TCPConn: waits hold no buffer
	max int             // largest frame accepted

	// For a tlsConn over TCP: the socket beneath, to wait on, once
	// the handshake is done (a read with a past deadline during the
	// handshake would fail it).
	tlsRC    syscall.RawConn
	tlsReady bool
	deadline time.Time // the read deadline serveConn set

	bufp *[]byte // pooled buffer, nil when idle
	r, w int     // unread bytes are (*bufp)[r:w]
	big  []byte  // the current frame, when larger than the pooled buffer
	err  error   // sticky read error
}

func newFrameReader(c net.Conn, max int) *frameReader {
	fr := &frameReader{c: c, max: max}
	switch c := c.(type) {
	case *net.TCPConn:
		fr.rc, _ = rawConn(c)
	case tlsConn:
		fr.tlsRC, _ = rawConn(c.NetConn())
	}
	return fr
}

// tlsConn is a TLS connection over a socket whose reads with a deadline
// in the past return what the TLS layer holds, or a timeout that leaves
// the connection usable: crypto/tls's *tls.Conn and ztls's *tls13.Conn.
type tlsConn interface {
	net.Conn
	NetConn() net.Conn
}

var errUnsupported = errors.New("authority: raw socket reads are not supported here")

// setDeadline sets the read deadline of the connection.
func (fr *frameReader) setDeadline(t time.Time) {
	fr.deadline = t
	fr.c.SetReadDeadline(t)
}

// buffered is the number of unread bytes held.
func (fr *frameReader) buffered() int { return fr.w - fr.r }

// hasFrame reports whether a whole frame is buffered, so the next call
// to next does not wait.
func (fr *frameReader) hasFrame() bool {
	if fr.buffered() < 2 {
		return false
	}
	n := int(binary.BigEndian.Uint16((*fr.bufp)[fr.r:]))
	return fr.buffered() >= 2+n
}

// next returns the next message; it stays valid until the next call. Its
// errors are dnsstream.ReadFrame's: io.EOF at a clean end between frames,
// io.ErrUnexpectedEOF inside one, dnsstream.ErrEmptyFrame,
// dnsstream.ErrFrameTooLarge, and the connection's errors (deadline).
func (fr *frameReader) next() ([]byte, error) {
	fr.big = nil
	if err := fr.fill(2); err != nil {
		return nil, err
	}
	defer func() { fr.tlsReady = fr.tlsRC != nil && fr.err == nil }() // a frame came: the handshake is done
	buf := *fr.bufp
	n := int(binary.BigEndian.Uint16(buf[fr.r:]))
	if n == 0 {
		return nil, dnsstream.ErrEmptyFrame
	}
	if n > fr.max {
		return nil, fmt.Errorf("%w: %d > %d", dnsstream.ErrFrameTooLarge, n, fr.max)
	}
	if 2+n <= len(buf) {
		if err := fr.fill(2 + n); err != nil {
			return nil, err
		}
		msg := (*fr.bufp)[fr.r+2 : fr.r+2+n]
		fr.r += 2 + n
		return msg, nil
	}
	// Longer than a pooled buffer: rare, read it into its own.
	fr.big = make([]byte, n)
	k := copy(fr.big, buf[fr.r+2:fr.w])
	fr.r += 2 + k
	fr.release()
	if _, err := io.ReadFull(fr.c, fr.big[k:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		fr.err = err
		return nil, err
	}
	return fr.big, nil
}

// fill reads until k bytes are buffered.
func (fr *frameReader) fill(k int) error {
	for fr.buffered() < k {
		if fr.err != nil {
			return fr.err
		}
		if fr.bufp != nil && len(*fr.bufp)-fr.r < k {
			// Move the start of the frame to the front.
			fr.w = copy(*fr.bufp, (*fr.bufp)[fr.r:fr.w])
			fr.r = 0
		}
		err := fr.read()
		if err != nil {
			if err == io.EOF && fr.buffered() > 0 {
				err = io.ErrUnexpectedEOF
			}
			fr.err = err
			return err
		}
	}
	return nil
}

// release returns the buffer to the pool when nothing is buffered.
func (fr *frameReader) release() {
	if fr.bufp != nil && fr.r == fr.w {
		streamBufs.Put(fr.bufp)
		fr.bufp, fr.r, fr.w = nil, 0, 0
	}
}

// close gives the buffer back whatever it holds.
func (fr *frameReader) close() {
	fr.r = fr.w
	fr.release()
}

// read reads once, waiting without a buffer when none is held.
func (fr *frameReader) read() error {
	if fr.rc != nil {
		return fr.readRaw()
	}
	if fr.bufp == nil {
		if fr.tlsReady {
			if err := fr.waitTLS(); err != nil || fr.bufp != nil {
				return err // or bytes that were buffered in the TLS layer
			}
		}
		// Wait in a two-byte read (the length prefix), then take a buffer.
		var head [2]byte
		n, err := fr.c.Read(head[:])
		if n > 0 {
			fr.bufp = streamBufs.Get().(*[]byte)
			fr.r, fr.w = 0, copy(*fr.bufp, head[:n])
			return nil
		}
		return orEOF(err)
	}
	n, err := fr.c.Read((*fr.bufp)[fr.w:])
	fr.w += n
	if n > 0 {
		return nil
	}
	return orEOF(err)
}

// waitTLS returns when the TLS layer has a record to read or the socket
// beneath is readable (or at the deadline, or on an error).
func (fr *frameReader) waitTLS() error {
	fr.c.SetReadDeadline(time.Unix(1, 0)) // no waiting: what is buffered, if anything
	var head [2]byte
	n, err := fr.c.Read(head[:])
	fr.c.SetReadDeadline(fr.deadline)
	if n > 0 {
		fr.bufp = streamBufs.Get().(*[]byte)
		fr.r, fr.w = 0, copy(*fr.bufp, head[:n])
		return nil
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return orEOF(err)
	}
	// The TLS layer needs more bytes: wait for the socket, holding nothing.
	return fr.tlsRC.Read(func(fd uintptr) bool { return !wouldBlock(fd) })
}

func orEOF(err error) error {
	if err == nil {
		return io.ErrNoProgress
	}
	return err
}

// readRaw reads from the socket directly: the buffer is taken when the
// socket is readable and given back when it would block with nothing
// buffered, so a waiting connection holds none.
func (fr *frameReader) readRaw() error {
	var (
		n    int
		rerr error
	)
	err := fr.rc.Read(func(fd uintptr) bool {
		if fr.bufp == nil {
			fr.bufp = streamBufs.Get().(*[]byte)
		}
		n, rerr = readFD(fd, (*fr.bufp)[fr.w:])
		if isEAGAIN(rerr) {
			fr.release()
			return false // wait for the poller
		}
		return true
	})
	if err != nil {
		return err // deadline, closed
	}
	if rerr != nil {
		return os.NewSyscallError("read", rerr)
	}
	if n <= 0 {
		return io.EOF
	}
	fr.w += n
	return nil
}

// serveConn reads queries from one stream connection. An answer in the
// cache is written by the reader itself, coalesced with the other cached
// answers to queries already buffered; any other query is handed to its
// own goroutine, which writes its answer when ready (out of order).
func (s *Server) serveConn(sc *streamConn) {
	c := sc.c
	pipeline := make(chan struct{}, orDefault(s.MaxPipelined, DefaultMaxPipelined))
	fr := newFrameReader(c, orDefault(min(s.MaxStreamMessageSize, dnsstream.MaxMessageSize), dnsstream.MaxMessageSize))
	q := &streamQueue{sc: sc}
	defer func() {
		q.flush()
		fr.close()
		sc.inflight.Wait() // answers still being computed are delivered
		c.Close()
		s.untrack(c)
		s.conns.release(sc)
		s.wg.Done()
	}()
	idle := orDefault(s.IdleTimeout, DefaultIdleTimeout)
	// Until its first query a connection has shown no use: it gets less
	// time than the idle timeout between queries (RFC 7766, Section 6.2.3).
	wait := min(orDefault(s.FirstQueryTimeout, DefaultFirstQueryTimeout), idle)
	var deadline time.Time
	for {
		if !fr.hasFrame() {
			q.flush() // the reader may wait now: answers go first
			fr.release()
		}
		// Moving the deadline costs a timer update: do it at most once
		// per tenth of the wait, not per query; the connection is then
		// closed between wait and 1.1 × wait after its last query.
		if now := time.Now(); deadline.Sub(now) < wait { // real time: a deadline
			deadline = now.Add(wait + wait/10)
			fr.setDeadline(deadline)
		}
		raw, err := fr.next()
		if err != nil {
			if !sc.queried.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
				s.counters.connsFirstQueryTimeout.Add(1)
			}
			return // EOF, idle timeout, oversized or empty frame: close
		}
		if !answerable(raw) {
			return
		}
		if !sc.queried.Load() {
			sc.queried.Store(true)
			wait, deadline = idle, time.Time{}
		}
		s.conns.touch(sc)
		rw := &responder{srv: s, t: sc.t, out: q}
		m := s.streamQuery(raw, rw)
		if m == nil {
			continue
		}
		select {
		case pipeline <- struct{}{}:
		case <-s.ctx.Done():
			return
		}
		sc.inflight.Add(1)
		sc.busy.Add(1)
		rw.out = sc
		go func() {
			defer func() {
				sc.busy.Add(-1)
				s.conns.touch(sc)
				<-pipeline
				sc.inflight.Done()
			}()
			s.serveParsed(s.ctx, rw, m)
		}()
	}
}

// streamQuery takes one query off a stream: answered from the cache or,
// if it does not parse, with FORMERR (nil is returned then); otherwise
// the parsed query, for the handler. rw may then be used on another
// goroutine: nothing in it refers to raw.
func (s *Server) streamQuery(raw []byte, rw *responder) *dns.Msg {
	if s.cache != nil {
		if s.answerCached(raw, rw) {
			return nil
		}
		rw.note.key, rw.note.version = append([]byte(nil), raw[2:]...), zoneVersion.Load()
	}
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		rw.writeFormErr(raw)
		return nil
	}
	return m
}

// serveFrame answers one stream frame on the calling goroutine.
func (s *Server) serveFrame(raw []byte, rw *responder) {
	if !answerable(raw) {
		return
	}
	if m := s.streamQuery(raw, rw); m != nil {
		s.serveParsed(s.ctx, rw, m)
	}
}

// streamQueue is the outlet of the reader's own answers: they are queued
// and written together when the reader has no whole query left to read.
type streamQueue struct {
	sc   *streamConn
	bufp *[]byte
	n    int
}

func (q *streamQueue) localAddr() net.Addr  { return q.sc.local }
func (q *streamQueue) remoteAddr() net.Addr { return q.sc.remote }
func (q *streamQueue) remoteIP() netip.Addr { return q.sc.addr }

func (q *streamQueue) send(frame []byte) error {
	if q.bufp != nil && q.n+len(frame) > len(*q.bufp) {
		if err := q.flush(); err != nil {
			return err
		}
	}
	if len(frame) > streamReadBuf {
		return q.sc.send(frame)
	}
	if q.bufp == nil {
		q.bufp = streamBufs.Get().(*[]byte)
	}
	q.n += copy((*q.bufp)[q.n:], frame)
	return nil
}

// flush writes what is queued and gives the buffer back.
func (q *streamQueue) flush() error {
	if q.bufp == nil {
		return nil
	}
	var err error
	if q.n > 0 {
		err = q.sc.send((*q.bufp)[:q.n])
	}
	streamBufs.Put(q.bufp)
	q.bufp, q.n = nil, 0
	return err
}
