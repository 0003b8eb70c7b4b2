package resolver

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// maxUDPBatch bounds the queries one UDP socket carries. Every query in
// flight on a socket is one more ID an off-path spoofer may hit with a
// forged datagram aimed at its port, so a socket holds a handful (a
// service lookup has six); larger batches use one socket per chunk.
const maxUDPBatch = 8

// udpSlot is the room for one received datagram: one octet more than the
// advertised buffer shows an oversized reply (the kernel truncates it to
// fit).
const udpSlot = UDPBufferSize + 1

// udpBufs recycles receive buffers, one slot per query of a chunk.
var udpBufs = sync.Pool{New: func() any { b := make([]byte, maxUDPBatch*udpSlot); return &b }}

// exchangeUDP sends the queries ms to server and calls report once per
// query: with its reply, with errTruncated, or with an error when ctx ends
// (or the socket fails) first. The queries of a chunk leave back to back
// from one fresh socket (a fresh random source port) with distinct random
// IDs; a datagram is accepted only if it comes from server, fits the
// advertised buffer and carries the ID and exactly the question of a query
// still waiting (replyRule.accept). Everything else is dropped and the wait
// goes on.
func exchangeUDP(ctx context.Context, server *net.UDPAddr, ms []*dns.Msg, report reportFunc) {
	for lo := 0; lo < len(ms); lo += maxUDPBatch {
		hi := min(lo+maxUDPBatch, len(ms))
		exchangeUDPChunk(ctx, server, ms[lo:hi], func(j int, reply *dns.Msg, err error) {
			report(lo+j, reply, err)
		})
	}
}

func exchangeUDPChunk(ctx context.Context, server *net.UDPAddr, ms []*dns.Msg, report reportFunc) {
	f := newInflight(withFreshIDs(ms), report)
	network := "udp4"
	if server.IP.To4() == nil {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, nil)
	if err != nil {
		f.failWaiting(fmt.Errorf("resolver: %w", err))
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(d)
	}
	bc := batchConnOf(conn)
	sendDatagrams(bc, server, f)
	rd := newDatagramReader(bc, server, f.left)
	defer rd.release()
	if err := f.drain(func() error { return rd.next(f) }); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		} else {
			err = fmt.Errorf("resolver: %w", err)
		}
		f.failWaiting(err)
	}
}

// withFreshIDs returns copies of ms, each with a random ID that no other
// query of ms carries: the IDs really sent.
func withFreshIDs(ms []*dns.Msg) []*dns.Msg {
	wires := make([]*dns.Msg, len(ms))
	for j, m := range ms {
		w := *m // shallow: only the ID changes
		w.Id = freshID(wires[:j])
		wires[j] = &w
	}
	return wires
}

// sendDatagrams sends the queries of f to server. They all leave in one
// sendmmsg(2), and the replies already there come in with one recvmmsg(2)
// (datagramReader): fewer system calls, and the server is woken once for
// the whole batch. A query that cannot be packed or sent is settled with
// the error.
func sendDatagrams(bc batchConn, server *net.UDPAddr, f *inflight) {
	out := make([]ipv4.Message, 0, len(f.wires))
	sent := make([]int, 0, len(f.wires)) // out[n] carries f.wires[sent[n]]
	for j, w := range f.wires {
		packed, err := w.Pack()
		if err != nil {
			f.settle(j, nil, fmt.Errorf("resolver: packing query: %w", err))
			continue
		}
		out = append(out, ipv4.Message{Buffers: [][]byte{packed}, Addr: server})
		sent = append(sent, j)
	}
	for done := 0; done < len(out); {
		n, err := bc.WriteBatch(out[done:], 0)
		if err != nil {
			err = fmt.Errorf("resolver: %w", err)
			for _, j := range sent[done:] {
				f.settle(j, nil, err)
			}
			return
		}
		done += n
	}
}

// datagramReader receives the replies to a chunk, several datagrams per
// system call, and settles the queries they answer.
type datagramReader struct {
	bc   batchConn
	rule replyRule
	bp   *[]byte // from udpBufs
	in   []ipv4.Message
}

// newDatagramReader returns a reader for the replies from server to the
// waiting queries.
func newDatagramReader(bc batchConn, server *net.UDPAddr, waiting int) *datagramReader {
	rd := &datagramReader{
		bc:   bc,
		rule: replyRule{datagram: true, server: server.AddrPort()},
		bp:   udpBufs.Get().(*[]byte),
		in:   make([]ipv4.Message, min(waiting, maxUDPBatch)),
	}
	for n := range rd.in {
		rd.in[n].Buffers = [][]byte{(*rd.bp)[n*udpSlot : (n+1)*udpSlot]}
	}
	return rd
}

func (rd *datagramReader) release() { udpBufs.Put(rd.bp) }

// next waits for the next datagrams (up to one per waiting query) and
// settles the queries they answer; datagrams the rule refuses are dropped.
// Its error is the socket's: ctx ended or the socket failed.
func (rd *datagramReader) next(f *inflight) error {
	got, err := rd.bc.ReadBatch(rd.in[:min(f.left, len(rd.in))], 0)
	if err != nil {
		return err
	}
	for _, msg := range rd.in[:got] {
		from, _ := msg.Addr.(*net.UDPAddr) // nil: refused as errWrongSource
		reply, err := rd.rule.accept(from.AddrPort(), msg.Buffers[0][:msg.N], f.query)
		if reply == nil {
			continue // refused (err says why): keep waiting
		}
		f.settle(f.index(reply.Id), reply, err)
	}
	return nil
}

// batchConn sends and receives several datagrams per system call
// (sendmmsg and recvmmsg on Linux, one at a time elsewhere).
type batchConn interface {
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
	ReadBatch(ms []ipv4.Message, flags int) (int, error)
}

func batchConnOf(c *net.UDPConn) batchConn {
	if c.LocalAddr().(*net.UDPAddr).IP.To4() != nil {
		return ipv4.NewPacketConn(c)
	}
	return ipv6.NewPacketConn(c)
}

// freshID returns a random ID that none of the queries in use carries.
func freshID(inUse []*dns.Msg) uint16 {
	for {
		id := uint16(rand.Uint32())
		taken := false
		for _, w := range inUse {
			if w != nil && w.Id == id {
				taken = true
				break
			}
		}
		if !taken {
			return id
		}
	}
}
