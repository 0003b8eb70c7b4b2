// Package connlimit bounds the connections a server holds: in all, per
// source address, and how long each may take to become useful. A
// listener that accepts without bound is a slowloris target: one client
// that opens connections and sends nothing exhausts the process's file
// descriptors and memory, and every other client is refused.
package connlimit

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// Limits are a Listener's bounds; zero values mean no bound.
type Limits struct {
	// Max is the most connections held at once. When it is reached Accept
	// waits (new connections queue in the kernel's backlog) until one
	// closes.
	Max int
	// PerSource is the most connections held at once from one IP
	// address; a connection over it is closed at once.
	PerSource int
}

// Stats count what a Listener refused.
type Stats struct {
	Open          int64 // connections held now
	RefusedSource int64 // closed at accept: over PerSource
	PeakOpen      int64
}

// Listener is a net.Listener with Limits.
type Listener struct {
	net.Listener
	lim    Limits
	slots  chan struct{} // nil: no Max
	closed chan struct{}
	once   sync.Once

	mu     sync.Mutex
	bySrc  map[netip.Addr]int
	open   atomic.Int64
	peak   atomic.Int64
	refSrc atomic.Int64
}

// New wraps inner with lim.
func New(inner net.Listener, lim Limits) *Listener {
	l := &Listener{Listener: inner, lim: lim, bySrc: map[netip.Addr]int{}, closed: make(chan struct{})}
	if lim.Max > 0 {
		l.slots = make(chan struct{}, lim.Max)
	}
	return l
}

// Accept waits for a free slot, then for a connection from a source under
// its share.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		if l.slots != nil {
			select {
			case l.slots <- struct{}{}:
			case <-l.closed:
				return nil, net.ErrClosed
			}
		}
		c, err := l.Listener.Accept()
		if err != nil {
			l.release()
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		if !l.admit(src) {
			l.refSrc.Add(1)
			c.Close()
			l.release()
			continue
		}
		n := l.open.Add(1)
		for p := l.peak.Load(); n > p && !l.peak.CompareAndSwap(p, n); p = l.peak.Load() {
		}
		return &conn{Conn: c, l: l, src: src}, nil
	}
}

func (l *Listener) release() {
	if l.slots != nil {
		<-l.slots
	}
}

func (l *Listener) admit(src netip.Addr) bool {
	if l.lim.PerSource <= 0 || !src.IsValid() {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bySrc[src] >= l.lim.PerSource {
		return false
	}
	l.bySrc[src]++
	return true
}

func (l *Listener) done(src netip.Addr) {
	l.open.Add(-1)
	if l.lim.PerSource > 0 && src.IsValid() {
		l.mu.Lock()
		if l.bySrc[src]--; l.bySrc[src] <= 0 {
			delete(l.bySrc, src)
		}
		l.mu.Unlock()
	}
	l.release()
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Stats returns the counters.
func (l *Listener) Stats() Stats {
	return Stats{Open: l.open.Load(), RefusedSource: l.refSrc.Load(), PeakOpen: l.peak.Load()}
}

func sourceOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ap := ta.AddrPort(); ap.IsValid() {
			return ap.Addr().Unmap()
		}
	}
	return netip.Addr{}
}

// conn releases its slot once, on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	src  netip.Addr
	once sync.Once
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.done(c.src) })
	return err
}
