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
)

// maxUDPBatch bounds the queries one UDP socket carries. Every query in
// flight on a socket is one more ID an off-path spoofer may hit with a
// forged datagram aimed at its port, so a socket holds a handful (a
// service lookup has six); larger batches use one socket per chunk.
const maxUDPBatch = 8

// udpBufs recycles receive buffers: one octet more than the advertised
// buffer shows an oversized reply (the kernel truncates it to fit).
var udpBufs = sync.Pool{New: func() any { b := make([]byte, UDPBufferSize+1); return &b }}

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
	for j, w := range wires {
		packed, err := w.Pack()
		if err != nil {
			wires[j] = nil
			report(j, nil, fmt.Errorf("resolver: packing query: %w", err))
			continue
		}
		if _, err := conn.WriteToUDP(packed, server); err != nil {
			err = fmt.Errorf("resolver: %w", err)
			for k := j; k < len(wires); k++ {
				if wires[k] != nil {
					wires[k] = nil
					report(k, nil, err)
				}
			}
			break
		}
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
	buf := *bp
	for waiting > 0 {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
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
		if from.Addr().Unmap() != want.Addr().Unmap() || from.Port() != want.Port() {
			continue // errWrongSource
		}
		if n > UDPBufferSize || n < 12 {
			continue // errOversized, errShortReply
		}
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
		reply, err := checkReply(wires[j], buf[:n])
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
