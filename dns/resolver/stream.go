package resolver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
)

// errConnLost means the connection ended before the reply came; the query
// is retried on a new connection.
var errConnLost = errors.New("resolver: connection lost")

// maxReconnects bounds how often one query follows a dying connection.
const maxReconnects = 3

// streamUpstream keeps one connection to a server open and replaces it
// when it dies (T-DNS: connection reuse). Concurrent queries share it.
type streamUpstream struct {
	addr    string
	padding bool          // RFC 8467 block padding (DNS over TLS only)
	idle    time.Duration // idle timeout when the server announces none
	dial    func(context.Context) (net.Conn, error)

	mu      sync.Mutex
	cur     *streamConn
	dialing chan struct{} // non-nil while a dial is in progress
	closed  bool
}

func (u *streamUpstream) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	var err error
	for try := 0; try <= maxReconnects; try++ {
		var c *streamConn
		c, err = u.conn(ctx)
		if err != nil {
			return nil, err
		}
		var reply *dns.Msg
		reply, err = c.exchange(ctx, m)
		if !errors.Is(err, errConnLost) {
			return reply, err
		}
	}
	return nil, fmt.Errorf("resolver: %s: %w", u.addr, err)
}

// conn returns the live connection, dialling one if needed. Concurrent
// callers wait for a single dial.
func (u *streamUpstream) conn(ctx context.Context) (*streamConn, error) {
	for {
		u.mu.Lock()
		if u.closed {
			u.mu.Unlock()
			return nil, ErrClosed
		}
		if u.cur != nil && !u.cur.isDead() {
			c := u.cur
			u.mu.Unlock()
			return c, nil
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
		done := make(chan struct{})
		u.dialing = done
		u.mu.Unlock()

		nc, err := u.dial(ctx)
		u.mu.Lock()
		u.dialing = nil
		close(done)
		if err != nil {
			u.mu.Unlock()
			return nil, fmt.Errorf("resolver: dial %s: %w", u.addr, err)
		}
		if u.closed {
			u.mu.Unlock()
			nc.Close()
			return nil, ErrClosed
		}
		c := newStreamConn(nc, u.padding, u.idle)
		u.cur = c
		u.mu.Unlock()
		return c, nil
	}
}

func (u *streamUpstream) close() {
	u.mu.Lock()
	u.closed = true
	c := u.cur
	u.cur = nil
	u.mu.Unlock()
	if c != nil {
		c.fail(ErrClosed)
	}
}

// streamConn is one TCP or TLS connection carrying pipelined queries. A
// reader goroutine matches each reply to its query by ID and question, in
// whatever order the server answers.
type streamConn struct {
	conn    net.Conn
	padding bool

	wmu sync.Mutex // serialises frame writes

	mu        sync.Mutex
	pending   map[uint16]*call
	dead      bool
	done      chan struct{} // closed when the connection is dead
	err       error         // why it died, for debugging
	idle      time.Duration
	idleTimer *time.Timer
}

type call struct {
	q     *dns.Msg // the query as sent, for matching
	reply chan *dns.Msg
}

func newStreamConn(nc net.Conn, padding bool, idle time.Duration) *streamConn {
	c := &streamConn{
		conn:    nc,
		padding: padding,
		pending: make(map[uint16]*call),
		done:    make(chan struct{}),
		idle:    idle,
	}
	go c.readLoop()
	return c
}

func (c *streamConn) isDead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dead
}

func (c *streamConn) exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, error) {
	wire, err := c.prepare(m)
	if err != nil {
		return nil, err
	}
	cl := &call{q: wire, reply: make(chan *dns.Msg, 1)}
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return nil, errConnLost
	}
	for {
		wire.Id = uint16(rand.Uint32())
		if _, busy := c.pending[wire.Id]; !busy {
			break
		}
	}
	c.pending[wire.Id] = cl
	if c.idleTimer != nil {
		c.idleTimer.Stop()
		c.idleTimer = nil
	}
	c.mu.Unlock()

	if err := c.write(ctx, wire); err != nil {
		c.forget(wire.Id)
		return nil, err
	}
	select {
	case reply := <-cl.reply:
		return reply, nil
	case <-c.done:
		// The reader may have delivered just before the connection died.
		select {
		case reply := <-cl.reply:
			return reply, nil
		default:
			return nil, errConnLost
		}
	case <-ctx.Done():
		c.forget(wire.Id)
		return nil, ctx.Err()
	}
}

// prepare copies m and adds the stream options: edns-tcp-keepalive with no
// timeout (RFC 7828, Section 3.2.1) and, over TLS, padding to a multiple of
// PaddingBlock octets (RFC 8467, Section 4.1).
func (c *streamConn) prepare(m *dns.Msg) (*dns.Msg, error) {
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
	return wire, nil
}

func (c *streamConn) write(ctx context.Context, wire *dns.Msg) error {
	packed, err := wire.Pack()
	if err != nil {
		return fmt.Errorf("resolver: packing query: %w", err)
	}
	frame, err := dnsstream.AppendFrame(make([]byte, 0, len(packed)+2), packed)
	if err != nil {
		return fmt.Errorf("resolver: %w", err)
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if d, ok := ctx.Deadline(); ok {
		c.conn.SetWriteDeadline(d)
	} else {
		c.conn.SetWriteDeadline(time.Time{})
	}
	if _, err := c.conn.Write(frame); err != nil {
		c.fail(err)
		return errConnLost
	}
	return nil
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

func (c *streamConn) readLoop() {
	buf := make([]byte, dnsstream.MaxMessageSize)
	for {
		frame, err := dnsstream.ReadFrame(c.conn, buf)
		if errors.Is(err, dnsstream.ErrEmptyFrame) {
			continue // still aligned on a frame boundary
		}
		if err != nil {
			if err == io.EOF {
				err = errConnLost
			}
			c.fail(err)
			return
		}
		if len(frame) < 12 {
			continue
		}
		id := binary.BigEndian.Uint16(frame)
		c.mu.Lock()
		cl := c.pending[id]
		c.mu.Unlock()
		if cl == nil {
			continue // unsolicited or late: drop
		}
		reply, err := checkReply(cl.q, frame)
		if err != nil {
			continue // the query keeps waiting and is retried on timeout
		}
		c.mu.Lock()
		if c.pending[id] == cl {
			delete(c.pending, id)
			c.noteKeepaliveLocked(reply)
			c.armIdleLocked()
			cl.reply <- reply
		}
		c.mu.Unlock()
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
