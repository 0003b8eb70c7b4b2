package authority

import (
	"encoding/binary"
	"net"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
)

// paddingBlock is the block size answers are padded to on TLS when the
// query was padded (RFC 8467, Section 4.1: responses pad to 468 bytes).
const paddingBlock = 468

// outlet is where a responder's packed answer goes: a UDP socket and
// client address, or a stream connection.
type outlet interface {
	send(b []byte) error
	localAddr() net.Addr
	remoteAddr() net.Addr
}

// responder is the ResponseWriter of one query; it finishes the handler's
// answer (EDNS, keepalive, padding, truncation), packs and sends it.
type responder struct {
	srv *Server
	t   Transport
	out outlet

	// What the query asked for.
	edns    bool   // it had an OPT record
	do      bool   // DNSSEC OK bit (RFC 3225)
	padded  bool   // it carried the padding option (RFC 7830)
	udpSize uint16 // the client's UDP buffer (512 without EDNS)

	written bool
}

func (rw *responder) RemoteAddr() net.Addr { return rw.out.remoteAddr() }
func (rw *responder) LocalAddr() net.Addr  { return rw.out.localAddr() }
func (rw *responder) Transport() Transport { return rw.t }

// readRequest notes what the query's EDNS asks of the answer.
func (rw *responder) readRequest(m *dns.Msg) {
	rw.udpSize = dns.MinMsgSize
	opt := m.IsEdns0()
	if opt == nil {
		return
	}
	rw.edns = true
	rw.do = opt.Do()
	rw.udpSize = max(opt.UDPSize(), dns.MinMsgSize) // RFC 6891, Section 6.2.5
	for _, o := range opt.Option {
		if o.Option() == dns.EDNS0PADDING {
			rw.padded = true
		}
	}
}

func (rw *responder) maxUDPSize() int {
	if rw.srv == nil {
		return DefaultMaxUDPSize
	}
	return orDefault(rw.srv.MaxUDPSize, DefaultMaxUDPSize)
}

// WriteMsg finishes, packs and sends m.
func (rw *responder) WriteMsg(m *dns.Msg) error {
	if rw.written {
		return errAlreadyWritten
	}
	rw.written = true
	rw.finish(m)
	bufp := rw.srv.getBuf()
	defer rw.srv.putBuf(bufp)
	buf := *bufp
	// Stream answers are packed after a two-byte gap for the length.
	start := 0
	if rw.t.Stream() {
		start = 2
	}
	packed, err := m.PackBuffer(buf[start:])
	if err != nil {
		// The handler built something unencodable: SERVFAIL rather than
		// silence, so the client does not wait for a timeout.
		fail := reply(m, dns.RcodeServerFailure)
		if packed, err = fail.PackBuffer(buf[start:]); err != nil {
			return err
		}
	}
	limit := dnsstream.MaxMessageSize
	if rw.t == TransportUDP {
		limit = min(int(rw.udpSize), rw.maxUDPSize())
	}
	if len(packed) > limit {
		// RFC 2181, Section 9: drop whole RRsets from the end and set TC.
		m.Truncate(limit)
		if packed, err = m.PackBuffer(buf[start:]); err != nil {
			return err
		}
		if len(packed) > limit {
			return errTooLarge
		}
	}
	if !rw.t.Stream() {
		return rw.out.send(packed)
	}
	if &packed[0] == &buf[start] {
		binary.BigEndian.PutUint16(buf, uint16(len(packed)))
		return rw.out.send(buf[:2+len(packed)])
	}
	frame, err := dnsstream.AppendFrame(nil, packed)
	if err != nil {
		return err
	}
	return rw.out.send(frame)
}

// finish adds what the transport and the query's EDNS ask for.
func (rw *responder) finish(m *dns.Msg) {
	m.Compress = true
	// RFC 6891, Section 7: no OPT in an answer to a query without one.
	if !rw.edns {
		if opt := m.IsEdns0(); opt != nil {
			removeOPT(m)
		}
		return
	}
	if m.IsEdns0() != nil {
		return // the handler built its own
	}
	opt := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
	opt.SetUDPSize(uint16(rw.maxUDPSize()))
	if rw.do {
		opt.SetDo()
	}
	if rw.t.Stream() {
		// RFC 7828, Section 3.3.2: tell the client how long the connection
		// may stay idle, in units of 100 ms.
		idle := DefaultIdleTimeout
		if rw.srv != nil {
			idle = orDefault(rw.srv.IdleTimeout, DefaultIdleTimeout)
		}
		opt.Option = append(opt.Option, &dns.EDNS0_TCP_KEEPALIVE{
			Code: dns.EDNS0TCPKEEPALIVE, Timeout: uint16(min(idle.Milliseconds()/100, 0xffff)),
		})
	}
	m.Extra = append(m.Extra, opt)
	if rw.t == TransportTLS && rw.padded {
		// The padding option costs four bytes of header plus its data.
		n := m.Len() + 4
		pad := &dns.EDNS0_PADDING{Padding: make([]byte, (paddingBlock-n%paddingBlock)%paddingBlock)}
		opt.Option = append(opt.Option, pad)
	}
}

func removeOPT(m *dns.Msg) {
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype != dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
}

// writeFormErr answers a query whose header parsed but whose body did
// not: the header alone, with the query's ID and opcode and FORMERR
// (RFC 1035, Section 4.1.1).
func (rw *responder) writeFormErr(raw []byte) error {
	var h [12]byte
	copy(h[:2], raw[:2])                    // ID
	h[2] = 0x80 | raw[2]&0x79               // QR, the query's opcode and RD
	h[3] = byte(dns.RcodeFormatError) & 0xF // RA=0, Z=0, RCODE
	rw.written = true
	if !rw.t.Stream() {
		return rw.out.send(h[:])
	}
	frame, _ := dnsstream.AppendFrame(make([]byte, 0, 14), h[:])
	return rw.out.send(frame)
}
