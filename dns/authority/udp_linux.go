package authority

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux a worker calls recvmmsg and sendmmsg itself, as raw system
// calls on the non-blocking socket, and waits in the runtime's poller
// only when recvmmsg finds nothing. Two costs of golang.org/x/net's
// ReadBatch and WriteBatch go with it (issue 33, perf under dnsperf with
// the server on one CPU):
//   - each call there enters the scheduler's system-call state; a
//     sendmmsg of a batch runs for longer than the runtime's monitor
//     waits before it hands the CPU's P to another thread, so with one
//     CPU the monitor woke every 20 µs and threads switched at each
//     batch: the monitor, futexes and the scheduler were some 15 % of the
//     server's CPU time. A raw call keeps the P; the system calls here do
//     not block (the socket is non-blocking), they only run the kernel's
//     UDP path.
//   - each datagram's sender became a new *net.UDPAddr (two allocations);
//     here it is read into a netip.AddrPort in place.

// mmsghdr is Linux's struct mmsghdr.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
}

// mmsgBatch is the recvmmsg and sendmmsg state of one worker: headers,
// iovecs and socket addresses for a whole batch, allocated once.
type mmsgBatch struct {
	rc    syscall.RawConn
	inet6 bool // the socket is AF_INET6 (IPv4 peers then come mapped)
	hdrs  []mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet6 // large enough for either family

	// The calls' results, and the functions rc.Read and rc.Write run,
	// made once so that no call allocates a closure.
	n, want int
	errno   syscall.Errno
	recv    func(fd uintptr) bool
	send    func(fd uintptr) bool
}

func newBatchIO(uc *net.UDPConn, size int) (batchIO, error) {
	rc, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	b := &mmsgBatch{rc: rc, hdrs: make([]mmsghdr, size), iovs: make([]unix.Iovec, size),
		names: make([]unix.RawSockaddrInet6, size)}
	var sa unix.Sockaddr
	cerr := rc.Control(func(fd uintptr) { sa, err = unix.Getsockname(int(fd)) })
	if cerr != nil || err != nil {
		return nil, fmt.Errorf("authority: udp %v: reading the socket's address family: %w", uc.LocalAddr(), errors.Join(cerr, err))
	}
	_, b.inet6 = sa.(*unix.SockaddrInet6)
	for i := range b.hdrs {
		h := &b.hdrs[i].hdr
		h.Name = (*byte)(unsafe.Pointer(&b.names[i]))
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
	}
	b.recv = func(fd uintptr) bool { return b.call(fd, unix.SYS_RECVMMSG) }
	b.send = func(fd uintptr) bool { return b.call(fd, unix.SYS_SENDMMSG) }
	return b, nil
}

// call makes one recvmmsg or sendmmsg of b.want messages; it returns
// false (wait, then call again) when the socket is not ready.
func (b *mmsgBatch) call(fd uintptr, trap uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall6(trap, fd, uintptr(unsafe.Pointer(&b.hdrs[0])), uintptr(b.want), 0, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e == unix.EAGAIN {
			return false
		}
		b.n, b.errno = int(r), e
		return true
	}
}

func (b *mmsgBatch) readBatch(slots []udpSlot) (int, error) {
	b.want = min(len(slots), len(b.hdrs))
	for i := range b.want {
		h := &b.hdrs[i].hdr
		h.Namelen = uint32(unsafe.Sizeof(b.names[i]))
		h.Flags = 0
		b.iovs[i].Base = unsafe.SliceData(slots[i].buf)
		b.iovs[i].SetLen(len(slots[i].buf))
	}
	if err := b.rc.Read(b.recv); err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, fmt.Errorf("recvmmsg: %w", b.errno)
	}
	for i := range b.n {
		sl := &slots[i]
		sl.n = int(b.hdrs[i].len)
		sl.trunc = b.hdrs[i].hdr.Flags&msgTrunc != 0
		sl.addr, sl.zone = b.peer(i)
	}
	return b.n, nil
}

// peer is the sender of datagram i (the zero AddrPort for a family
// other than IPv4 and IPv6, which no reply can reach).
func (b *mmsgBatch) peer(i int) (netip.AddrPort, uint32) {
	raw := (*[unsafe.Sizeof(unix.RawSockaddrInet6{})]byte)(unsafe.Pointer(&b.names[i]))
	port := binary.BigEndian.Uint16(raw[2:4])
	switch b.names[i].Family {
	case unix.AF_INET:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(raw[4:8])), port), 0
	case unix.AF_INET6:
		return netip.AddrPortFrom(netip.AddrFrom16(b.names[i].Addr), port), b.names[i].Scope_id
	}
	return netip.AddrPort{}, 0
}

func (b *mmsgBatch) writeBatch(slots []udpSlot) (int, error) {
	b.want = min(len(slots), len(b.hdrs))
	for i := range b.want {
		sl := &slots[i]
		h := &b.hdrs[i].hdr
		h.Namelen = b.putPeer(i, sl.addr, sl.zone)
		h.Flags = 0
		b.iovs[i].Base = unsafe.SliceData(sl.buf)
		b.iovs[i].SetLen(len(sl.buf))
	}
	if err := b.rc.Write(b.send); err != nil {
		return 0, err
	}
	if b.errno != 0 {
		return 0, fmt.Errorf("sendmmsg: %w", b.errno)
	}
	return b.n, nil
}

// putPeer writes a as message i's destination, in the socket's family,
// and returns its length.
func (b *mmsgBatch) putPeer(i int, a netip.AddrPort, zone uint32) uint32 {
	sa := &b.names[i]
	*sa = unix.RawSockaddrInet6{}
	raw := (*[unsafe.Sizeof(unix.RawSockaddrInet6{})]byte)(unsafe.Pointer(sa))
	binary.BigEndian.PutUint16(raw[2:4], a.Port())
	if !b.inet6 {
		sa.Family = unix.AF_INET
		ip4 := a.Addr().Unmap().As4()
		copy(raw[4:8], ip4[:])
		return unix.SizeofSockaddrInet4
	}
	sa.Family = unix.AF_INET6
	sa.Addr = a.Addr().As16()
	sa.Scope_id = zone
	return unix.SizeofSockaddrInet6
}
