package netem

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	bufSize    = 2048    // larger than the TUN MTU (1500); longer reads are dropped
	poolChunk  = 1024    // buffers allocated at once when the pool runs dry
	maxBuffers = 1 << 15 // 64 MiB of packets in flight at most
	readBatch  = 64      // packets read from one TUN before looking at the clock again
	minLead    = 20 * int64(time.Microsecond)
	maxLead    = 2 * int64(time.Millisecond)
)

// queued is one packet waiting on a link.
type queued struct {
	buf int32 // index into loop.bufs
	n   int32
	due int64
}

// ring is a FIFO of packets; it only allocates when it grows.
type ring struct {
	items      []queued
	head, size int
}

func (r *ring) push(q queued) {
	if r.size == len(r.items) {
		n := make([]queued, max(16, 2*len(r.items)))
		for i := 0; i < r.size; i++ {
			n[i] = r.items[(r.head+i)%len(r.items)]
		}
		r.items, r.head = n, 0
	}
	r.items[(r.head+r.size)%len(r.items)] = q
	r.size++
}

func (r *ring) peek() *queued { return &r.items[r.head] }

func (r *ring) pop() {
	r.head = (r.head + 1) % len(r.items)
	r.size--
}

// loop is the relay's state; it is used by one locked OS thread only.
type loop struct {
	fds     []int
	addrs   map[uint32]int
	links   []linkState // [src*n+dst]
	queues  []ring      // [src*n+dst]
	used    []bool      // link configured or carried traffic
	bufs    [][]byte
	free    []int32
	base    time.Time
	lead    int64 // learned wake-up lead
	devEW   int64 // smoothed mean deviation of oversleep
	meanEW  int64 // smoothed mean oversleep
	stats   Stats
	lateSum int64
	comp    int64 // compensation for the path's own latency, per hop

	ctl    []byte // partial control line
	ctlBuf []byte
	quit   bool
}

func (l *loop) now() int64 { return int64(time.Since(l.base)) }

func (l *loop) getBuf() (int32, bool) {
	if len(l.free) == 0 {
		if len(l.bufs) >= maxBuffers {
			return 0, false
		}
		chunk := make([]byte, poolChunk*bufSize)
		for i := 0; i < poolChunk; i++ {
			l.free = append(l.free, int32(len(l.bufs)))
			l.bufs = append(l.bufs, chunk[i*bufSize:(i+1)*bufSize:(i+1)*bufSize])
		}
	}
	b := l.free[len(l.free)-1]
	l.free = l.free[:len(l.free)-1]
	return b, true
}

// route returns the destination port of an IPv4 packet.
func (l *loop) route(p []byte) (int, bool) {
	if len(p) < 20 || p[0]>>4 != 4 {
		return 0, false
	}
	d, ok := l.addrs[binary.BigEndian.Uint32(p[16:20])]
	return d, ok
}

// readPort drains up to readBatch packets from port src.
func (l *loop) readPort(src int) {
	n := len(l.fds)
	for i := 0; i < readBatch; i++ {
		b, ok := l.getBuf()
		if !ok {
			// Out of buffers: read into a scratch buffer to drop the packet.
			l.stats.NoBuffer++
			if _, err := unix.Read(l.fds[src], l.ctlBuf); err != nil {
				return
			}
			continue
		}
		m, err := unix.Read(l.fds[src], l.bufs[b])
		if err != nil || m <= 0 || m >= bufSize {
			l.free = append(l.free, b)
			if err != nil {
				return
			}
			continue
		}
		now := l.now()
		dst, ok := l.route(l.bufs[b][:m])
		if !ok || dst == src {
			l.stats.Unroutable++
			l.free = append(l.free, b)
			continue
		}
		k := src*n + dst
		l.used[k] = true
		due, ok := l.links[k].schedule(now, m, l.comp)
		if !ok {
			l.free = append(l.free, b)
			continue
		}
		l.queues[k].push(queued{buf: b, n: int32(m), due: due})
	}
}

// deliver writes every packet due by now and returns the next due time
// (or -1 when nothing is queued).
func (l *loop) deliver() int64 {
	n := len(l.fds)
	next := int64(-1)
	now := l.now()
	for k := range l.queues {
		q := &l.queues[k]
		for q.size > 0 {
			p := q.peek()
			if p.due > now {
				if next < 0 || p.due < next {
					next = p.due
				}
				break
			}
			// A full TUN queue (EAGAIN) drops the packet, as a real link would.
			unix.Write(l.fds[k%n], l.bufs[p.buf][:p.n])
			late := l.now() - p.due
			l.noteLate(late)
			l.free = append(l.free, p.buf)
			q.pop()
		}
	}
	return next
}

func (l *loop) noteLate(late int64) {
	s := &l.stats.Late
	s.Packets++
	l.lateSum += late
	if late > s.MaxNs {
		s.MaxNs = late
	}
	if late > int64(100*time.Microsecond) {
		s.Over100u++
	}
	if late > int64(time.Millisecond) {
		s.Over1m++
	}
}

// learn updates the wake-up lead from how late epoll woke us.
func (l *loop) learn(over int64) {
	if over < 0 {
		over = 0
	}
	l.meanEW += (over - l.meanEW) / 8
	d := over - l.meanEW
	if d < 0 {
		d = -d
	}
	l.devEW += (d - l.devEW) / 8
	l.lead = min(max(l.meanEW+4*l.devEW+int64(5*time.Microsecond), minLead), maxLead)
}

// epollWait waits up to timeout nanoseconds (negative: forever) with
// epoll_pwait2, which takes a timespec rather than milliseconds.
func epollWait(ep int, events []unix.EpollEvent, timeout int64) (int, error) {
	var tsp uintptr
	var ts unix.Timespec
	if timeout >= 0 {
		ts = unix.NsecToTimespec(timeout)
		tsp = uintptr(unsafe.Pointer(&ts))
	}
	n, _, errno := unix.Syscall6(unix.SYS_EPOLL_PWAIT2, uintptr(ep), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), tsp, 0, 0)
	runtime.KeepAlive(&ts)
	if errno != 0 {
		return 0, errno
	}
	return int(n), nil
}

// run is the event loop. Control arrives on ctlFD (the child's stdin) and
// replies go to out.
func (l *loop) run(ctlFD int, out *os.File) error {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("netem: epoll: %w", err)
	}
	defer unix.Close(ep)
	for i, fd := range l.fds {
		if err := unix.SetNonblock(fd, true); err != nil {
			return fmt.Errorf("netem: port %d: %w", i, err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(i)}
		if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
			return fmt.Errorf("netem: epoll add port %d: %w", i, err)
		}
	}
	if err := unix.SetNonblock(ctlFD, true); err != nil {
		return fmt.Errorf("netem: control: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: -1}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, ctlFD, &ev); err != nil {
		return fmt.Errorf("netem: epoll add control: %w", err)
	}
	events := make([]unix.EpollEvent, len(l.fds)+1)
	for !l.quit {
		next := l.deliver()
		timeout := int64(-1)
		if next >= 0 {
			timeout = max(next-l.now()-l.lead, 0)
		}
		wakeAt := l.now() + timeout
		n, err := epollWait(ep, events, timeout)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("netem: epoll_pwait2: %w", err)
		}
		if n == 0 && timeout > 0 {
			l.learn(l.now() - wakeAt)
		}
		l.handle(events[:n], ctlFD, out)
		if n == 0 && next >= 0 {
			// Woken early on purpose: spin the remaining lead away, still
			// taking packets in at once so their arrival time is exact.
			for l.now() < next && !l.quit {
				m, _ := epollWait(ep, events, 0)
				l.handle(events[:m], ctlFD, out)
			}
		}
	}
	return nil
}

func (l *loop) handle(events []unix.EpollEvent, ctlFD int, out *os.File) {
	for _, ev := range events {
		if ev.Fd < 0 {
			l.readControl(ctlFD, out)
			continue
		}
		l.readPort(int(ev.Fd))
	}
}

func (l *loop) readControl(fd int, out *os.File) {
	for {
		m, err := unix.Read(fd, l.ctlBuf)
		if m == 0 && err == nil {
			l.quit = true // parent went away
			return
		}
		if err != nil {
			return
		}
		l.ctl = append(l.ctl, l.ctlBuf[:m]...)
		for {
			i := indexByte(l.ctl, '\n')
			if i < 0 {
				break
			}
			line := l.ctl[:i]
			l.answer(line, out)
			l.ctl = l.ctl[i+1:]
		}
		if len(l.ctl) > 1<<20 {
			l.quit = true
			return
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

func (l *loop) answer(line []byte, out *os.File) {
	var rep reply
	c, err := parseCommand(line, len(l.fds))
	switch {
	case err != nil:
		rep.Error = err.Error()
	case c.Op == "link":
		k := c.Src*len(l.fds) + c.Dst
		l.links[k].cfg = *c.Link
		l.used[k] = true
	case c.Op == "compensate":
		l.comp = int64(c.Comp)
	case c.Op == "stats":
		rep.Stats = l.snapshot()
	case c.Op == "quit":
		l.quit = true
	}
	b, _ := json.Marshal(rep)
	out.Write(append(b, '\n'))
}

func (l *loop) snapshot() *Stats {
	s := l.stats
	s.Links = nil
	n := len(l.fds)
	for k, u := range l.used {
		if !u {
			continue
		}
		ls := &l.links[k]
		s.Links = append(s.Links, LinkStats{Src: k / n, Dst: k % n, Forward: ls.forward, Lost: ls.lost, Overflow: ls.overflow})
	}
	if s.Late.Packets > 0 {
		s.Late.MeanNs = l.lateSum / int64(s.Late.Packets)
	}
	s.LeadNs = l.lead
	s.CompNs = l.comp
	return &s
}

func newLoop(fds []int, ports []string, seed uint64) (*loop, error) {
	n := len(fds)
	l := &loop{
		fds:    fds,
		addrs:  map[uint32]int{},
		links:  make([]linkState, n*n),
		queues: make([]ring, n*n),
		used:   make([]bool, n*n),
		base:   time.Now(),
		lead:   int64(100 * time.Microsecond),
		ctlBuf: make([]byte, 64<<10),
	}
	for i, p := range ports {
		a, err := netip.ParseAddr(p)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("netem: port address %q is not IPv4", p)
		}
		b := a.As4()
		l.addrs[binary.BigEndian.Uint32(b[:])] = i
	}
	for k := range l.links {
		l.links[k].rng = rand.New(rand.NewPCG(seed, uint64(k)))
	}
	return l, nil
}

// setRealtime puts the calling thread under SCHED_FIFO at prio.
func setRealtime(prio int) error {
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_FIFO, Priority: uint32(prio)}
	return unix.SchedSetAttr(0, &attr, 0)
}
