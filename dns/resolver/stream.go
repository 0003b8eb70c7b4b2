package resolver

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
)

// errConnLost means the connection ended before the reply came; the query
// is retried on a new connection.
var errConnLost = errors.New("resolver: connection lost")

// maxReconnects bounds how often one query follows a dying connection.
const maxReconnects = 3

// dialError is why a stream connection to a server could not be opened
// (the connect, or the TLS handshake). queryError puts the package's
// prefix and the question in front of it.
type dialError struct {
	transport Transport
	addr      string
	err       error
}

func (e *dialError) Error() string {
	name := "DNS over TCP"
	if e.transport == TLS {
		name = "DNS over TLS"
	}
	return fmt.Sprintf("%s to %s: %v", name, e.addr, e.err)
}

func (e *dialError) Unwrap() error { return e.err }

// streamUpstream keeps one connection to a server open and replaces it
// when it dies (T-DNS: connection reuse). Concurrent queries share it.
// A server that fails (its connect or handshake fails, or its connections
// close before any reply) is connected to again only after a backoff, so
// that a lookup's retries cannot become a storm of connects.
type streamUpstream struct {
	addr       string
	transport  Transport
	padding    bool          // RFC 8467 block padding (DNS over TLS only)
	idle       time.Duration // idle timeout when the server announces none
	dial       func(context.Context) (net.Conn, error)
	backoff    time.Duration // the first wait after a failure
	maxBackoff time.Duration
	closedCh   chan struct{} // closed by close

	mu       sync.Mutex
	cur      *streamConn
	dialing  chan struct{} // non-nil while a dial is in progress
	closed   bool
	failures int       // in a row, since the last reply
	graced   bool      // a lost connection was replaced at once
	lastErr  error     // the last failure, for lookups that meet the wait
	retryAt  time.Time // no connect before
}

// exchange sends ms over the kept-open connection, in one write, and calls
// report once per query (from the calling goroutine) as the replies land,
// in whatever order the server sends them. Queries the connection lost
// before their reply are sent again on a new connection.
func (u *streamUpstream) exchange(ctx context.Context, ms []*dns.Msg, report reportFunc) {
	open := make([]int, len(ms))
	for j := range open {
		open[j] = j
	}
	sub := make([]*dns.Msg, 0, len(ms))
	var err error
	for try := 0; try <= maxReconnects && len(open) > 0; try++ {
		var c *streamConn
		c, err = u.conn(ctx)
		if err != nil {
			for _, j := range open {
				report(j, nil, err)
			}
			return
		}
		sub = sub[:0]
		for _, j := range open {
			sub = append(sub, ms[j])
		}
		cur := open
		lost := c.exchange(ctx, sub, func(n int, reply *dns.Msg, err error) {
			report(cur[n], reply, err)
		})
		next := make([]int, len(lost))
		for n, l := range lost {
			next[n] = cur[l]
		}
		open = next
		err = errConnLost
	}
	for _, j := range open {
		report(j, nil, fmt.Errorf("resolver: %s: %w", u.addr, err))
	}
}

// conn returns the live connection, dialling one if needed. Concurrent
// callers wait for a single dial. After a failure it waits out the
// backoff first, within ctx; when ctx ends first, the error is the
// failure's.
func (u *streamUpstream) conn(ctx context.Context) (*streamConn, error) {
	for {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil, ErrClosed
		}
		if c := u.cur; c != nil {
			if !c.isDead() {
				u.mu.Unlock()
				return c, nil
			}
			if !c.replied.Load() {
				u.noteFailureLocked(&dialError{u.transport, u.addr, c.deathErr()}, true)
			}
			u.cur = nil
		}
		if wait := u.dialing; wait != nil {
			u.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if wait := time.Until(u.retryAt); wait > 0 {
			last := u.lastErr
			u.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return nil, last
			case <-u.closedCh:
				t.Stop()
				return nil, ErrClosed
			}
		}
		done := make(chan struct{})
		u.dialing = done
		u.mu.Unlock()

		nc, err := u.dial(ctx)
		u.mu.Lock()
		u.dialing = nil
		close(done)
		if err != nil {
			derr := &dialError{u.transport, u.addr, err}
			if ctx.Err() == nil { // not our own deadline: the server's doing
				u.noteFailureLocked(derr, false)
			}
			u.mu.Unlock()
			return nil, derr
		}
		if u.closed {
			u.mu.Unlock()
			nc.Close()
			return nil, ErrClosed
		}
		c := newStreamConn(nc, u.padding, u.idle)
		c.onReply = u.noteReply
		u.cur = c
		u.mu.Unlock()
		return c, nil
	}
}

// noteFailureLocked starts or lengthens the backoff after err. A
// connection lost before any reply is replaced at once the first time
// (a server may close a connection it kept idle just as a query left).
func (u *streamUpstream) noteFailureLocked(err error, lost bool) {
	u.lastErr = err
	if lost && u.failures == 0 && !u.graced {
		u.graced = true
		return
	}
	u.failures++
	// backoff × 2^(failures-1), capped; compared as maxBackoff >> shift
	// so that a long first wait cannot overflow into a negative one.
	d := u.maxBackoff
	if shift := u.failures - 1; shift < 63 && u.backoff < u.maxBackoff>>shift {
		d = u.backoff << shift
	}
	// Jitter down by up to half, so that clients that failed together do
	// not come back together.
	d -= rand.N(d/2 + 1)
	u.retryAt = time.Now().Add(d) // real time: a backoff deadline
}

// noteReply ends the backoff: the server answers.
func (u *streamUpstream) noteReply() {
	u.mu.Lock()
	u.failures, u.graced, u.lastErr, u.retryAt = 0, false, nil, time.Time{}
	u.mu.Unlock()
}

func (u *streamUpstream) close() {
	u.mu.Lock()
	if !u.closed {
		close(u.closedCh)
	}
	u.closed = true
	c := u.cur
	u.cur = nil
	u.mu.Unlock()
	if c != nil {
		c.fail(ErrClosed)
	}
}

// streamConn is one TCP or TLS connection carrying pipelined queries.
// Replies are matched to their queries by ID and question, in whatever
// order the server answers, by whichever waiting caller holds the read
// token. Writes are combined: queries that
// arrive while another goroutine is writing go out in its next write, so
// concurrent lookups share system calls and TCP segments (and TLS records).
type streamConn struct {
	conn    net.Conn
	padding bool

	wmu     sync.Mutex
	wbuf    []byte // frames waiting for the writer
	spare   []byte // the writer's last buffer, for reuse
	writing bool   // a goroutine is writing; it also sends wbuf

	// rtok holds the read token: the waiting goroutine that takes it reads
	// the connection for everyone (no reader goroutine, so no hand-off
	// between a reader and the caller) until its own replies are in, then
	// puts it back for the next waiter.
	rtok  chan struct{}
	br    *bufio.Reader // only with the token
	frame []byte        // only with the token

	replied atomic.Bool // a reply was dispatched
	onReply func()      // called after the first reply (may be nil)

	mu        sync.Mutex
	pending   map[uint16]*call
	dead      bool
	done      chan struct{} // closed when the connection is dead
	err       error         // why it died, for debugging
	idle      time.Duration
	idleTimer *time.Timer
}

// call is one query in flight; its reply goes to ch tagged with n, its
// index in the batch it belongs to.
type call struct {
	q  *dns.Msg // the query as sent, for matching
	n  int
	ch chan landed
}

type landed struct {
	n     int
	reply *dns.Msg
}

func newStreamConn(nc net.Conn, padding bool, idle time.Duration) *streamConn {
	c := &streamConn{
		conn:    nc,
		padding: padding,
		pending: make(map[uint16]*call),
		done:    make(chan struct{}),
		idle:    idle,
		rtok:    make(chan struct{}, 1),
		// Room for the largest frame, so that a frame is only consumed
		// once it is whole: a read deadline never cuts one in half.
		br: bufio.NewReaderSize(nc, 2+dnsstream.MaxMessageSize),
	}
	c.rtok <- struct{}{}
	return c
}

func (c *streamConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

// deathErr is why the connection died.
func (c *streamConn) deathErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		return errConnLost
	}
	return c.err
}

// exchange sends ms, framed back to back in one write, and calls report
// for each reply or for each query ctx ended before its reply. It returns
// the indexes of the queries the connection lost, to be sent again.
func (c *streamConn) exchange(ctx context.Context, ms []*dns.Msg, report reportFunc) (lost []int) {
	wires := make([]*dns.Msg, len(ms))
	for n, m := range ms {
		wires[n] = c.prepare(m)
	}
	ch := make(chan landed, len(ms))
	if !c.register(wires, ch) {
		return allIndexes(len(ms))
	}
	f := newInflight(wires, report)
	frames := c.frameQueries(f)
	if f.left == 0 {
		return nil
	}
	// Once written, a failed write has killed the connection: the wait
	// below sees done and hands the unanswered queries back.
	c.send(ctx, frames)
	switch err := f.drain(func() error { return c.await(ctx, ch, f) }); err {
	case nil:
		return nil
	case errConnLost:
		// The reader may have delivered just before the connection died.
		takeLanded(f, ch)
		return f.waiting()
	default: // ctx ended
		c.abandon(f, ch)
		takeLanded(f, ch)
		f.failWaiting(ctx.Err())
		return nil
	}
}

// register gives each of wires a random ID that no query in flight on c
// carries and enters it as waiting, its reply to go to ch. It reports
// false, registering nothing, when c is dead.
func (c *streamConn) register(wires []*dns.Msg, ch chan landed) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return false
	}
	for n, w := range wires {
		for {
			w.Id = uint16(rand.Uint32())
			if _, busy := c.pending[w.Id]; !busy {
				break
			}
		}
		c.pending[w.Id] = &call{q: w, n: n, ch: ch}
	}
	if c.idleTimer != nil {
		c.idleTimer.Stop()
		c.idleTimer = nil
	}
	return true
}

// frameQueries packs the queries of f into frames, back to back. A query
// that cannot be packed is withdrawn and settled with the error.
func (c *streamConn) frameQueries(f *inflight) []byte {
	var frames []byte
	for n, w := range f.wires {
		packed, err := w.Pack()
		if err == nil {
			frames, err = dnsstream.AppendFrame(frames, packed)
		}
		if err != nil {
			c.forget(w.Id)
			f.settle(n, nil, fmt.Errorf("resolver: packing query: %w", err))
		}
	}
	return frames
}

// await waits for what comes next to the exchange of f (the next step of
// its drain): a reply that another goroutine read, or the read token (then
// it reads the connection for everyone until its own replies are in). It
// returns errConnLost when the connection died, ctx's error when ctx ended.
func (c *streamConn) await(ctx context.Context, ch chan landed, f *inflight) error {
	select {
	case l := <-ch:
		f.settle(l.n, l.reply, nil)
	case <-c.rtok:
		c.readFor(ctx, ch, f)
	case <-c.done:
		return errConnLost
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// abandon withdraws the queries of f still waiting, so that their replies,
// should they come, are dropped.
func (c *streamConn) abandon(f *inflight, ch chan landed) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, w := range f.wires {
		if !f.settled[n] && c.pending[w.Id] != nil && c.pending[w.Id].ch == ch {
			delete(c.pending, w.Id)
		}
	}
	c.armIdleLocked()
}

// takeLanded settles the queries of f whose replies are already in ch.
func takeLanded(f *inflight, ch chan landed) {
	for {
		select {
		case l := <-ch:
			f.settle(l.n, l.reply, nil)
		default:
			return
		}
	}
}

func allIndexes(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// prepare copies m and adds the stream options: edns-tcp-keepalive with no
// timeout (RFC 7828, Section 3.2.1) and, over TLS, padding to a multiple of
// PaddingBlock octets (RFC 8467, Section 4.1).
func (c *streamConn) prepare(m *dns.Msg) *dns.Msg {
	wire := m.Copy()
	wire.Compress = false
	opt := wire.IsEdns0()
	if opt == nil {
		wire.SetEdns0(UDPBufferSize, false)
		opt = wire.IsEdns0()
	}
	kept := opt.Option[:0:0]
	for _, o := range opt.Option {
		switch o.Option() {
		case dns.EDNS0TCPKEEPALIVE, dns.EDNS0PADDING:
		default:
			kept = append(kept, o)
		}
	}
	opt.Option = append(kept, &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
	if c.padding {
		pad := &dns.EDNS0_PADDING{}
		opt.Option = append(opt.Option, pad)
		n := wire.Len()
		pad.Padding = make([]byte, (PaddingBlock-n%PaddingBlock)%PaddingBlock)
	}
	return wire
}

// send writes frames. If another goroutine is writing, the frames are
// queued and that goroutine writes them, with whatever else queued, right
// after its current write: a burst of queries costs one or two writes
// instead of one each. A failed write kills the connection, which every
// query waiting on it sees.
func (c *streamConn) send(ctx context.Context, frames []byte) {
	c.wmu.Lock()
	c.wbuf = append(c.wbuf, frames...)
	if c.writing {
		c.wmu.Unlock()
		return
	}
	c.writing = true
	for len(c.wbuf) > 0 {
		buf := c.wbuf
		c.wbuf = c.spare[:0]
		c.wmu.Unlock()
		if d, ok := ctx.Deadline(); ok {
			c.conn.SetWriteDeadline(d)
		} else {
			c.conn.SetWriteDeadline(time.Time{})
		}
		_, err := c.conn.Write(buf)
		c.wmu.Lock()
		c.spare = buf
		if err != nil {
			c.wbuf = nil
			c.writing = false
			c.wmu.Unlock()
			c.fail(err)
			return
		}
	}
	c.writing = false
	c.wmu.Unlock()
}

// forget drops a query that gave up waiting.
func (c *streamConn) forget(id uint16) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, id)
	c.armIdleLocked()
}

// armIdleLocked starts the idle timer when nothing is in flight.
func (c *streamConn) armIdleLocked() {
	if c.dead || len(c.pending) > 0 || c.idleTimer != nil {
		return
	}
	c.idleTimer = time.AfterFunc(c.idle, func() {
		c.mu.Lock()
		idle := !c.dead && len(c.pending) == 0
		c.mu.Unlock()
		if idle {
			c.fail(errors.New("resolver: idle"))
		}
	})
}

// readFor reads and dispatches replies, holding the read token, until the
// replies of f are in, ctx ends or the connection fails; then it puts the
// token back.
func (c *streamConn) readFor(ctx context.Context, ch chan landed, f *inflight) {
	defer func() { c.rtok <- struct{}{} }()
	stop := context.AfterFunc(ctx, func() { c.conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	takeLanded(f, ch)
	f.drain(func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := c.readOne(ctx)
		takeLanded(f, ch)
		return err
	})
}

// readOne reads one frame, within ctx, and dispatches it. A timeout is not
// an error: ctx ended (the caller sees it), or a former reader's wake-up
// came late. Any other error kills the connection and is returned.
func (c *streamConn) readOne(ctx context.Context) error {
	d, _ := ctx.Deadline() // zero (no deadline) when ctx has none
	c.conn.SetReadDeadline(d)
	frame, err := c.readFrame()
	if err != nil {
		if isTimeout(err) {
			return nil
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			err = errConnLost
		}
		c.fail(err)
		return err
	}
	c.dispatch(frame)
	return nil
}

// readFrame returns the next non-empty frame. A frame is consumed only
// once it is whole, so an error (such as a timeout) leaves the stream on a
// frame boundary. The frame is valid until the next call.
func (c *streamConn) readFrame() ([]byte, error) {
	for {
		hdr, err := c.br.Peek(2)
		if err != nil {
			return nil, err
		}
		n := int(binary.BigEndian.Uint16(hdr))
		if n == 0 {
			c.br.Discard(2) // an empty frame: still aligned
			continue
		}
		b, err := c.br.Peek(2 + n)
		if err != nil {
			return nil, err
		}
		c.frame = append(c.frame[:0], b[2:]...)
		c.br.Discard(2 + n)
		return c.frame, nil
	}
}

// dispatch hands a frame to the query it answers. A frame the rule
// refuses (short, unknown ID, another question, malformed) is dropped, and
// the query keeps waiting.
func (c *streamConn) dispatch(frame []byte) {
	var cl *call
	reply, err := replyRule{}.accept(netip.AddrPort{}, frame, func(id uint16) *dns.Msg {
		c.mu.Lock()
		cl = c.pending[id]
		c.mu.Unlock()
		if cl == nil {
			return nil // unsolicited or late
		}
		return cl.q
	})
	if err != nil {
		return
	}
	c.mu.Lock()
	if c.pending[reply.Id] == cl {
		delete(c.pending, reply.Id)
		c.noteKeepaliveLocked(reply)
		c.armIdleLocked()
		cl.ch <- landed{cl.n, reply} // buffered for the whole batch
	}
	c.mu.Unlock()
	if !c.replied.Load() && c.replied.CompareAndSwap(false, true) && c.onReply != nil {
		c.onReply()
	}
}

// noteKeepaliveLocked adopts the idle timeout a server announces in
// edns-tcp-keepalive, in units of 100 ms (RFC 7828, Section 3.3.2).
func (c *streamConn) noteKeepaliveLocked(reply *dns.Msg) {
	opt := reply.IsEdns0()
	if opt == nil {
		return
	}
	for _, o := range opt.Option {
		if ka, ok := o.(*dns.EDNS0_TCP_KEEPALIVE); ok {
			c.idle = time.Duration(ka.Timeout) * 100 * time.Millisecond
			if c.idleTimer != nil {
				c.idleTimer.Stop()
				c.idleTimer = nil
			}
			return
		}
	}
}

// fail marks the connection dead, closes it and wakes every waiting query,
// which then retries on a new connection.
func (c *streamConn) fail(err error) {
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.dead = true
	if c.idleTimer != nil {
		c.idleTimer.Stop()
	}
	close(c.done)
	c.err = err
	c.mu.Unlock()
	c.conn.Close()
}
