package authority

import (
	"errors"
	"net"
	"net/netip"

	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
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

// batchConn is what ipv4.PacketConn and ipv6.PacketConn have in common.
type batchConn interface {
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func newBatchConn(uc *net.UDPConn) batchConn {
	if a, ok := uc.LocalAddr().(*net.UDPAddr); ok && a.IP.To4() != nil {
		return ipv4.NewPacketConn(uc)
	}
	return ipv6.NewPacketConn(uc)
}

// udpBatchWorker holds one worker's buffers: allocated once, reused for
// every batch.
type udpBatchWorker struct {
	s    *Server
	uc   *net.UDPConn
	bc   batchConn
	in   []ipv4.Message
	out  []ipv4.Message
	outN int // answers queued in out
	obuf [][]byte
	rw   responder
	bo   batchOutlet
}

func (s *Server) newUDPBatchWorker(uc *net.UDPConn) *udpBatchWorker {
	w := &udpBatchWorker{s: s, uc: uc, bc: newBatchConn(uc)}
	w.in = make([]ipv4.Message, udpBatch)
	w.out = make([]ipv4.Message, udpBatch)
	w.obuf = make([][]byte, udpBatch)
	answerMax := max(min(orDefault(s.MaxUDPSize, DefaultMaxUDPSize), 65535), 512)
	inbufs := make([]byte, udpBatch*udpQueryBuf)
	outbufs := make([]byte, udpBatch*answerMax)
	for i := range w.in {
		w.in[i].Buffers = [][]byte{inbufs[i*udpQueryBuf : (i+1)*udpQueryBuf]}
		w.obuf[i] = outbufs[i*answerMax : (i+1)*answerMax]
		w.out[i].Buffers = [][]byte{nil}
	}
	w.bo = batchOutlet{w: w, local: uc.LocalAddr()}
	return w
}

// serve reads, answers and writes batches until the socket fails.
func (w *udpBatchWorker) serve() error {
	s := w.s
	for {
		n, err := w.bc.ReadBatch(w.in, 0)
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
			if m.Flags&msgTrunc != 0 {
				continue // longer than any query: not worth an answer
			}
			w.bo.addr = m.Addr
			w.rw = responder{srv: s, t: TransportUDP, out: &w.bo}
			s.serveMsg(s.ctx, m.Buffers[0][:m.N], &w.rw)
		}
		w.flush()
	}
}

// flush sends the queued answers; a datagram the kernel refuses (an
// unreachable client, say) is skipped, not retried.
func (w *udpBatchWorker) flush() {
	out := w.out[:w.outN]
	for len(out) > 0 {
		n, err := w.bc.WriteBatch(out, 0)
		if err != nil {
			if w.s.isClosed() {
				return
			}
			n = max(n, 0)
			w.s.logf("authority: udp %v: sending to %v: %v", w.uc.LocalAddr(), out[min(n, len(out)-1)].Addr, err)
			n++
		}
		n = min(n, len(out))
		out = out[n:]
	}
	for i := range w.outN {
		w.out[i].Addr = nil // do not keep clients' addresses alive
	}
	w.outN = 0
}

// batchOutlet queues the answer to one datagram of a batch.
type batchOutlet struct {
	w     *udpBatchWorker
	local net.Addr
	addr  net.Addr // as golang.org/x/net parsed it: *net.UDPAddr
}

func (o *batchOutlet) localAddr() net.Addr  { return o.local }
func (o *batchOutlet) remoteAddr() net.Addr { return o.addr }

func (o *batchOutlet) remoteIP() netip.Addr {
	if a, ok := o.addr.(*net.UDPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

func (o *batchOutlet) send(b []byte) error {
	w := o.w
	if w.outN == len(w.out) || len(b) > len(w.obuf[w.outN]) {
		// Not one answer per datagram, or larger than MaxUDPSize: a
		// handler of its own making; send it alone.
		_, err := w.uc.WriteTo(b, o.addr)
		return err
	}
	m := &w.out[w.outN]
	m.Buffers[0] = w.obuf[w.outN][:copy(w.obuf[w.outN], b)]
	m.Addr = o.addr
	w.outN++
	return nil
}
