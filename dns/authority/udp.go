package authority

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
)

// UDP in batches: each worker reads up to udpBatch datagrams with one
// recvmmsg and sends their answers with one sendmmsg (Linux; elsewhere
// golang.org/x/net reads and writes one datagram per call). At a few
// hundred bytes per query the system calls, not the answers, are most of
// the cost of serving UDP: one recvfrom and one sendto per query was 55 %
// of the server's CPU time in a profile under dnsperf.

const (
	// udpBatch is the number of datagrams one system call moves at most.
	udpBatch = 32
	// udpQueryBuf is the largest UDP query read; a longer datagram
	// (MSG_TRUNC) is dropped unanswered. Queries are tens of bytes; RFC
	// 6891 clients do not send more than their own buffer size.
	udpQueryBuf = 4096
)

// udpSlot is one datagram of a batch, read or to be written.
type udpSlot struct {
	buf   []byte // read: the whole buffer; write: the datagram
	n     int    // read: bytes of the datagram in buf
	trunc bool   // read: the datagram was longer than buf
	addr  netip.AddrPort
	// zone is the scope of a link-local IPv6 peer (the interface index),
	// kept apart from addr so reading allocates no zone name.
	zone uint32
}

// batchIO moves batches of datagrams on one socket. readBatch waits for
// at least one datagram and fills slots from the start (into each slot's
// buf); writeBatch sends slots[i].buf to slots[i].addr and returns how
// many left. Both return an error once the socket is closed.
type batchIO interface {
	readBatch(slots []udpSlot) (int, error)
	writeBatch(slots []udpSlot) (int, error)
}

// udpBatchWorker holds one worker's buffers: allocated once, reused for
// every batch.
type udpBatchWorker struct {
	s    *Server
	uc   *net.UDPConn
	io   batchIO
	in   []udpSlot
	out  []udpSlot
	outN int // answers queued in out
	obuf [][]byte
	rw   responder
	bo   batchOutlet
}

func (s *Server) newUDPBatchWorker(uc *net.UDPConn) (*udpBatchWorker, error) {
	bio, err := newBatchIO(uc, udpBatch)
	if err != nil {
		return nil, err
	}
	w := &udpBatchWorker{s: s, uc: uc, io: bio}
	w.in = make([]udpSlot, udpBatch)
	w.out = make([]udpSlot, udpBatch)
	w.obuf = make([][]byte, udpBatch)
	answerMax := max(min(orDefault(s.MaxUDPSize, DefaultMaxUDPSize), 65535), 512)
	inbufs := make([]byte, udpBatch*udpQueryBuf)
	outbufs := make([]byte, udpBatch*answerMax)
	for i := range w.in {
		w.in[i].buf = inbufs[i*udpQueryBuf : (i+1)*udpQueryBuf]
		w.obuf[i] = outbufs[i*answerMax : (i+1)*answerMax]
	}
	w.bo = batchOutlet{w: w, local: uc.LocalAddr()}
	return w, nil
}

// serve reads, answers and writes batches until the socket fails.
func (w *udpBatchWorker) serve() error {
	s := w.s
	for {
		n, err := w.io.readBatch(w.in)
		if err != nil {
			if s.isClosed() {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			w.uc.Close()
			s.logf("authority: udp %v: %v", w.uc.LocalAddr(), err)
			return err
		}
		w.outN = 0
		for i := range n {
			m := &w.in[i]
			if m.trunc || !m.addr.IsValid() {
				continue // longer than any query, or from nowhere to reply to
			}
			w.bo.slot = m
			w.bo.addr = nil
			w.rw = responder{srv: s, t: TransportUDP, out: &w.bo}
			s.serveMsg(s.ctx, m.buf[:m.n], &w.rw)
		}
		w.flush()
	}
}

// flush sends the queued answers; a datagram the kernel refuses (an
// unreachable client, say) is skipped, not retried.
func (w *udpBatchWorker) flush() {
	out := w.out[:w.outN]
	for len(out) > 0 {
		n, err := w.io.writeBatch(out)
		if err != nil {
			if w.s.isClosed() {
				return
			}
			n = max(n, 0)
			w.s.logf("authority: udp %v: sending to %v: %v", w.uc.LocalAddr(), out[min(n, len(out)-1)].addr, err)
			n++
		}
		n = min(n, len(out))
		out = out[n:]
	}
	w.outN = 0
}

// batchOutlet queues the answer to one datagram of a batch.
type batchOutlet struct {
	w     *udpBatchWorker
	local net.Addr
	slot  *udpSlot // the datagram being answered
	addr  net.Addr // its sender as a net.Addr, made when first asked for
}

func (o *batchOutlet) localAddr() net.Addr { return o.local }

func (o *batchOutlet) remoteAddr() net.Addr {
	if o.addr == nil {
		a := net.UDPAddrFromAddrPort(o.slot.addr)
		if o.slot.zone != 0 {
			a.Zone = strconv.FormatUint(uint64(o.slot.zone), 10)
		}
		o.addr = a
	}
	return o.addr
}

func (o *batchOutlet) remoteIP() netip.Addr { return o.slot.addr.Addr().Unmap() }

func (o *batchOutlet) send(b []byte) error {
	w := o.w
	if w.outN == len(w.out) || len(b) > len(w.obuf[w.outN]) {
		// Not one answer per datagram, or larger than MaxUDPSize: a
		// handler of its own making; send it alone.
		_, err := w.uc.WriteTo(b, o.remoteAddr())
		return err
	}
	m := &w.out[w.outN]
	m.buf = w.obuf[w.outN][:copy(w.obuf[w.outN], b)]
	m.addr, m.zone = o.slot.addr, o.slot.zone
	w.outN++
	return nil
}
