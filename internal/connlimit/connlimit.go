// Package connlimit bounds the connections a server holds: in all, per
// source address, per source network, and how long each may take to
// become useful. A
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
	// PerNetwork is the most connections held at once from one client
	// network, a /24 for IPv4 and a /56 for IPv6 (a site's usual
	// allocation): a host with many addresses (an IPv6 host has a /64
	// at least) would otherwise take PerSource on each of them. A
	// connection over it is closed at once.
	PerNetwork int
}

// Prefix lengths of a client network (Limits.PerNetwork), as
// dns/authority and turbo count them.
const (
	networkBitsIPv4 = 24
	networkBitsIPv6 = 56
)

// Stats count what a Listener refused.
type Stats struct {
	Open           int64 // connections held now
	RefusedSource  int64 // closed at accept: over PerSource
	RefusedNetwork int64 // closed at accept: over PerNetwork
	PeakOpen       int64
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
	byNet  map[netip.Prefix]int
	open   atomic.Int64
	peak   atomic.Int64
	refSrc atomic.Int64
	refNet atomic.Int64
}

// New wraps inner with lim.
func New(inner net.Listener, lim Limits) *Listener {
	l := &Listener{Listener: inner, lim: lim, bySrc: map[netip.Addr]int{}, byNet: map[netip.Prefix]int{}, closed: make(chan struct{})}
	if lim.Max > 0 {
		l.slots = make(chan struct{}, lim.Max)
	}
	return l
}

// Accept waits for a free slot, then for a connection from a source (and
// its network) under its share.
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
		if refused := l.admit(src); refused != nil {
			refused.Add(1)
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

// admit counts a connection from src, or returns the counter of the
// share it is over. src is always counted (not only under a per-source
// limit), so done can uncount it whatever the limits.
func (l *Listener) admit(src netip.Addr) (refused *atomic.Int64) {
	if !src.IsValid() {
		return nil
	}
	nw := networkOf(src)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.PerSource > 0 && l.bySrc[src] >= l.lim.PerSource {
		return &l.refSrc
	}
	if l.lim.PerNetwork > 0 && l.byNet[nw] >= l.lim.PerNetwork {
		return &l.refNet
	}
	l.bySrc[src]++
	l.byNet[nw]++
	return nil
}

func (l *Listener) done(src netip.Addr) {
	l.open.Add(-1)
	if src.IsValid() {
		nw := networkOf(src)
		l.mu.Lock()
		if l.bySrc[src]--; l.bySrc[src] <= 0 {
			delete(l.bySrc, src)
		}
		if l.byNet[nw]--; l.byNet[nw] <= 0 {
			delete(l.byNet, nw)
		}
		l.mu.Unlock()
	}
	l.release()
}

// networkOf is the client network src is counted in (Limits.PerNetwork).
func networkOf(src netip.Addr) netip.Prefix {
	bits := networkBitsIPv6
	if src.Is4() {
		bits = networkBitsIPv4
	}
	p, _ := src.Prefix(bits)
	return p
}

// Close closes the listener; an Accept waiting for a slot returns.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// Stats returns the counters.
func (l *Listener) Stats() Stats {
	return Stats{Open: l.open.Load(), RefusedSource: l.refSrc.Load(), RefusedNetwork: l.refNet.Load(), PeakOpen: l.peak.Load()}
}

func sourceOf(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ap := ta.AddrPort(); ap.IsValid() {
			return ap.Addr().Unmap().WithZone("")
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
