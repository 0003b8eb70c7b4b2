//go:build !linux

package authority

import (
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// batchConn is what ipv4.PacketConn and ipv6.PacketConn have in common.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

// xnetBatch moves batches with golang.org/x/net, which reads and writes
// one datagram per system call outside Linux.
type xnetBatch struct {
	bc batchConn
	ms []ipv4.Message
}

func newBatchIO(uc *net.UDPConn, size int) (batchIO, error) {
	x := &xnetBatch{ms: make([]ipv4.Message, size)}
	if a, ok := uc.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil {
		x.bc = ipv4.NewPacketConn(uc)
	} else {
		x.bc = ipv6.NewPacketConn(uc)
	}
	for i := range x.ms {
		x.ms[i].Buffers = [][]byte{nil}
	}
	return x, nil
}

func (x *xnetBatch) readBatch(slots []udpSlot) (int, error) {
	ms := x.ms[:min(len(slots), len(x.ms))]
	for i := range ms {
		ms[i].Buffers[0] = slots[i].buf
	}
	n, err := x.bc.ReadBatch(ms, 0)
	for i := range max(n, 0) {
		sl, m := &slots[i], &ms[i]
		sl.n, sl.trunc, sl.addr, sl.zone = m.N, m.Flags&msgTrunc != 0, netipAddrPort(m.Addr), 0
		m.Addr = nil
	}
	return n, err
}

func (x *xnetBatch) writeBatch(slots []udpSlot) (int, error) {
	ms := x.ms[:min(len(slots), len(x.ms))]
	for i := range ms {
		ms[i].Buffers[0] = slots[i].buf
		ms[i].Addr = net.UDPAddrFromAddrPort(slots[i].addr)
	}
	n, err := x.bc.WriteBatch(ms, 0)
	for i := range ms {
		ms[i].Addr = nil // do not keep clients' addresses alive
	}
	return n, err
}

func netipAddrPort(a net.Addr) (ap netip.AddrPort) {
	if u, ok := a.(*net.UDPAddr); ok {
		ap = u.AddrPort()
	}
	return ap
}
