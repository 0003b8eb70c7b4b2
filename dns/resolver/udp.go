package resolver

import (
	"context"
	"encoding/binary"
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
// still waiting. Everything else is dropped and the wait goes on.
func exchangeUDP(ctx context.Context, server *net.UDPAddr, ms []*dns.Msg, report func(j int, reply *dns.Msg, err error)) {
	for lo := 0; lo < len(ms); lo += maxUDPBatch {
		hi := min(lo+maxUDPBatch, len(ms))
		exchangeUDPChunk(ctx, server, ms[lo:hi], func(j int, reply *dns.Msg, err error) {
			report(lo+j, reply, err)
		})
	}
}

func exchangeUDPChunk(ctx context.Context, server *net.UDPAddr, ms []*dns.Msg, report func(j int, reply *dns.Msg, err error)) {
	failAll := func(err error) {
		for j := range ms {
			report(j, nil, err)
		}
	}
	network := "udp4"
	if server.IP.To4() == nil {
		network = "udp6"
	}
	conn, err := net.ListenUDP(network, nil)
	if err != nil {
		failAll(fmt.Errorf("resolver: %w", err))
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	if d, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(d)
	}

	// wires[j] is ms[j] with the ID really sent; nil once answered.
	wires := make([]*dns.Msg, len(ms))
	for j, m := range ms {
		w := *m // shallow: only the ID changes
		w.Id = freshID(wires[:j])
		wires[j] = &w
	}
	// All queries leave in one sendmmsg(2) and the replies already there
	// come in with one recvmmsg(2): fewer system calls, and the server is
	// woken once for the whole batch.
	bc := batchConnOf(conn)
	out := make([]ipv4.Message, 0, len(ms))
	sent := make([]int, 0, len(ms)) // out[n] carries wires[sent[n]]
	for j, w := range wires {
		packed, err := w.Pack()
		if err != nil {
			wires[j] = nil
			report(j, nil, fmt.Errorf("resolver: packing query: %w", err))
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
				wires[j] = nil
				report(j, nil, err)
			}
			break
		}
		done += n
	}
	waiting := 0
	for _, w := range wires {
		if w != nil {
			waiting++
		}
	}
	want := server.AddrPort()
	bp := udpBufs.Get().(*[]byte)
	defer udpBufs.Put(bp)
	in := make([]ipv4.Message, min(waiting, maxUDPBatch))
	for n := range in {
		in[n].Buffers = [][]byte{(*bp)[n*udpSlot : (n+1)*udpSlot]}
	}
	for waiting > 0 {
		got, err := bc.ReadBatch(in[:min(waiting, len(in))], 0)
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			} else {
				err = fmt.Errorf("resolver: %w", err)
			}
			for j, w := range wires {
				if w != nil {
					report(j, nil, err)
				}
			}
			return
		}
		for _, msg := range in[:got] {
			from, ok := msg.Addr.(*net.UDPAddr)
			if !ok {
				continue
			}
			if fp := from.AddrPort(); fp.Addr().Unmap() != want.Addr().Unmap() || fp.Port() != want.Port() {
				continue // errWrongSource
			}
			n := msg.N
			if n > UDPBufferSize || n < 12 {
				continue // errOversized, errShortReply
			}
			buf := msg.Buffers[0][:n]
			id := binary.BigEndian.Uint16(buf)
			j := -1
			for k, w := range wires {
				if w != nil && w.Id == id {
					j = k
					break
				}
			}
			if j < 0 {
				continue // errIDMismatch
			}
			reply, err := checkReply(wires[j], buf)
			if err != nil {
				continue
			}
			wires[j] = nil
			waiting--
			if reply.Truncated {
				report(j, nil, errTruncated)
			} else {
				report(j, reply, nil)
			}
		}
	}
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
