// Command goecho is the Go counterpart of echo.c: it answers each UDP
// datagram with its own bytes and the QR bit set, in batches, so that
// dnsperf against it measures what serving UDP costs before any DNS work.
// The modes are the ways a Go server can move the batches:
//
//	xnet   golang.org/x/net's ipv4.PacketConn ReadBatch and WriteBatch (what
//	       the authority did before issue 33): the runtime's poller waits,
//	       each call enters the scheduler's system-call state, and each
//	       datagram's address becomes a *net.UDPAddr
//	raw    recvmmsg and sendmmsg as raw system calls on the non-blocking
//	       socket, the poller waiting when recvmmsg finds nothing
//	block  one blocking recvmmsg (MSG_WAITFORONE) and one sendmmsg per
//	       batch through the scheduler's system-call state, as echo.c does
//
// Usage: goecho -mode raw -listen 127.0.0.1:5353 [-batch 32]
//
// It is a separate module so the project's build and tests do not see it;
// ../README.md says how the floor is measured.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

const bufSize = 4096

func main() {
	mode := flag.String("mode", "raw", "xnet, raw or block")
	listen := flag.String("listen", "127.0.0.1:5353", "UDP address to answer on")
	batch := flag.Int("batch", 32, "datagrams per system call")
	flag.Parse()
	uc, err := net.ListenUDP("udp4", mustResolve(*listen))
	if err != nil {
		fail(err)
	}
	switch *mode {
	case "xnet":
		err = serveXNet(uc, *batch)
	case "raw", "block":
		err = serveMMsg(uc, *batch, *mode == "block")
	default:
		err = fmt.Errorf("unknown mode %q (xnet, raw or block)", *mode)
	}
	fail(err)
}

func mustResolve(s string) *net.UDPAddr {
	a, err := net.ResolveUDPAddr("udp4", s)
	if err != nil {
		fail(err)
	}
	return a
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "goecho:", err)
	os.Exit(1)
}

func serveXNet(uc *net.UDPConn, batch int) error {
	pc := ipv4.NewPacketConn(uc)
	in := make([]ipv4.Message, batch)
	out := make([]ipv4.Message, batch)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, bufSize)}
		out[i].Buffers = [][]byte{nil}
	}
	for {
		n, err := pc.ReadBatch(in, 0)
		if err != nil {
			return err
		}
		m := 0
		for _, msg := range in[:n] {
			if msg.N < 12 {
				continue
			}
			b := msg.Buffers[0][:msg.N]
			b[2] |= 0x80
			out[m].Buffers[0], out[m].Addr = b, msg.Addr
			m++
		}
		for sent := 0; sent < m; {
			k, err := pc.WriteBatch(out[sent:m], 0)
			if err != nil {
				return err
			}
			sent += k
		}
	}
}

// mmsghdr is struct mmsghdr of Linux.
type mmsghdr struct {
	hdr unix.Msghdr
	len uint32
	_   [4]byte
}

func serveMMsg(uc *net.UDPConn, batch int, blocking bool) error {
	rc, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var fd int
	rc.Control(func(f uintptr) { fd = int(f) })
	if blocking {
		if err := unix.SetNonblock(fd, false); err != nil {
			return err
		}
	}
	bufs := make([]byte, batch*bufSize)
	addrs := make([]unix.RawSockaddrInet4, batch)
	iovs := make([]unix.Iovec, batch)
	in := make([]mmsghdr, batch)
	out := make([]mmsghdr, batch)
	for {
		for i := range in {
			iovs[i].Base = &bufs[i*bufSize]
			iovs[i].SetLen(bufSize)
			in[i].hdr = unix.Msghdr{Name: (*byte)(unsafe.Pointer(&addrs[i])), Namelen: uint32(unsafe.Sizeof(addrs[i])), Iov: &iovs[i]}
			in[i].hdr.SetIovlen(1)
		}
		var n int
		if blocking {
			r, _, e := syscall.Syscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&in[0])), uintptr(batch), unix.MSG_WAITFORONE, 0, 0)
			if e != 0 {
				if e == unix.EINTR {
					continue
				}
				return e
			}
			n = int(r)
		} else {
			var e syscall.Errno
			err := rc.Read(func(uintptr) bool {
				r, _, errno := syscall.RawSyscall6(unix.SYS_RECVMMSG, uintptr(fd), uintptr(unsafe.Pointer(&in[0])), uintptr(batch), 0, 0, 0)
				e, n = errno, int(r)
				return e != unix.EAGAIN
			})
			if err != nil {
				return err
			}
			if e != 0 {
				return e
			}
		}
		m := 0
		for i := range in[:n] {
			if in[i].len < 12 {
				continue
			}
			bufs[i*bufSize+2] |= 0x80
			iovs[i].SetLen(int(in[i].len))
			out[m] = in[i]
			m++
		}
		for sent := 0; sent < m; {
			call := syscall.RawSyscall6
			if blocking {
				call = syscall.Syscall6
			}
			r, _, e := call(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&out[sent])), uintptr(m-sent), 0, 0, 0)
			if e != 0 {
				return e
			}
			sent += int(r)
		}
	}
}
