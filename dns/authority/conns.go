package authority

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Stream connection admission. Each connection holds a file descriptor
// and a goroutine, so they are the resource a client exhausts by opening
// connections and sending nothing. Three limits keep one client from
// locking the others out:
//
//   - per source address (MaxConnsPerAddr) and per client network, /24
//     for IPv4 and /56 for IPv6 (MaxConnsPerPrefix): a client over its
//     share is refused at once;
//   - a connection that has sent no query yet is closed after
//     FirstQueryTimeout, shorter than IdleTimeout (RFC 7766, Section 6.2.3;
//     T-DNS, Section 4.3: the server may reclaim idle connections early);
//   - at MaxConns, a new client is let in by closing an idle connection
//     (no query in progress): first one that never sent a query, then one
//     from the network holding the most connections, then the one idle
//     longest. Only when every connection is busy is the newcomer refused.

// Defaults for the zero fields of a Server's connection limits.
const (
	DefaultMaxConnsPerAddr   = 32
	DefaultMaxConnsPerPrefix = 128
	DefaultFirstQueryTimeout = 3 * time.Second
	connPrefixIPv4           = 24
	connPrefixIPv6           = 56
)

// admission is why a connection was refused, or admitted.
type admission uint8

const (
	admitted admission = iota
	refusedAddr
	refusedPrefix
	refusedFull
)

// connTable holds the open stream connections of a Server.
type connTable struct {
	max, perAddr, perPrefix int

	mu       sync.Mutex
	conns    map[*streamConn]struct{}
	byAddr   map[netip.Addr]int
	byPrefix map[netip.Prefix]int
	clock    atomic.Uint64 // orders activity: higher is more recent
}

func newConnTable(max, perAddr, perPrefix int) *connTable {
	return &connTable{
		max: max, perAddr: perAddr, perPrefix: perPrefix,
		conns:    make(map[*streamConn]struct{}),
		byAddr:   make(map[netip.Addr]int),
		byPrefix: make(map[netip.Prefix]int),
	}
}

// clientOf returns a connection's source address and network; ok is false
// for an address that is not IP (a pipe, a Unix socket), which only
// MaxConns limits.
func clientOf(a net.Addr) (netip.Addr, netip.Prefix, bool) {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	case *net.UDPAddr:
		ip, _ = netip.AddrFromSlice(a.IP)
	}
	if !ip.IsValid() {
		return ip, netip.Prefix{}, false
	}
	ip = ip.Unmap().WithZone("")
	bitsLen := connPrefixIPv6
	if ip.Is4() {
		bitsLen = connPrefixIPv4
	}
	p, _ := ip.Prefix(bitsLen)
	return ip, p, true
}

// admit registers sc, or says why not. When the table is full it
// unregisters an idle connection to make room and returns it: the caller
// closes it, and its serveConn then ends on the closed socket.
func (ct *connTable) admit(sc *streamConn) (admission, *streamConn) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if sc.hasIP {
		if ct.perAddr > 0 && ct.byAddr[sc.addr] >= ct.perAddr {
			return refusedAddr, nil
		}
		if ct.perPrefix > 0 && ct.byPrefix[sc.prefix] >= ct.perPrefix {
			return refusedPrefix, nil
		}
	}
	var victim *streamConn
	if len(ct.conns) >= ct.max {
		if victim = ct.pickVictim(); victim == nil {
			return refusedFull, nil
		}
		ct.removeLocked(victim)
	}
	sc.lastActive.Store(ct.clock.Add(1))
	ct.conns[sc] = struct{}{}
	if sc.hasIP {
		ct.byAddr[sc.addr]++
		ct.byPrefix[sc.prefix]++
	}
	return admitted, victim
}

// pickVictim chooses the idle connection to close for a newcomer: one
// that never sent a query before one that did, then one from the most
// crowded network, then the one idle longest. It scans the table, which
// is done only when it is full.
func (ct *connTable) pickVictim() *streamConn {
	var (
		best       *streamConn
		bestFresh  bool
		bestCrowd  int
		bestActive uint64
	)
	for c := range ct.conns {
		if c.busy.Load() > 0 {
			continue
		}
		fresh := !c.queried.Load()
		crowd := ct.byPrefix[c.prefix]
		active := c.lastActive.Load()
		better := best == nil ||
			fresh && !bestFresh ||
			fresh == bestFresh && (crowd > bestCrowd || crowd == bestCrowd && active < bestActive)
		if better {
			best, bestFresh, bestCrowd, bestActive = c, fresh, crowd, active
		}
	}
	return best
}

// release removes sc if it is still registered (an evicted one was
// removed by admit).
func (ct *connTable) release(sc *streamConn) {
	ct.mu.Lock()
	if _, ok := ct.conns[sc]; ok {
		ct.removeLocked(sc)
	}
	ct.mu.Unlock()
}

func (ct *connTable) removeLocked(sc *streamConn) {
	delete(ct.conns, sc)
	if !sc.hasIP {
		return
	}
	if ct.byAddr[sc.addr]--; ct.byAddr[sc.addr] <= 0 {
		delete(ct.byAddr, sc.addr)
	}
	if ct.byPrefix[sc.prefix]--; ct.byPrefix[sc.prefix] <= 0 {
		delete(ct.byPrefix, sc.prefix)
	}
}

// open returns the number of registered connections.
func (ct *connTable) open() int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return len(ct.conns)
}

// touch records activity on sc.
func (ct *connTable) touch(sc *streamConn) {
	sc.lastActive.Store(ct.clock.Add(1))
}
