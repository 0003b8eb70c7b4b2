package authority

import (
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"

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
	remoteIP() netip.Addr // the client's address, or the zero Addr
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

	querySize int          // bytes of the query, 0 when unknown
	hasCookie bool         // it carried a well-formed COOKIE option
	cookie    cookieOption // that option
	cookieOK  bool         // with a valid server cookie (RFC 7873, Section 5.2.4)

	written bool

	// rrlPreset is RRL's verdict when the cache path already counted
	// the answer (rrlDrop or rrlSlip), else rrlSend.
	rrlPreset rrlVerdict
	// note is set while the query may be stored in the answer cache.
	note cacheNote
}

func (rw *responder) RemoteAddr() net.Addr { return rw.out.remoteAddr() }
func (rw *responder) LocalAddr() net.Addr  { return rw.out.localAddr() }
func (rw *responder) Transport() Transport { return rw.t }

// readRequest notes what the query's EDNS asks of the answer and checks
// its cookie; it returns FORMERR for a malformed COOKIE option
// (RFC 7873, Section 5.2.2), else RcodeSuccess.
func (rw *responder) readRequest(m *dns.Msg) int {
	rw.udpSize = dns.MinMsgSize
	opt := m.IsEdns0()
	if opt == nil {
		return dns.RcodeSuccess
	}
	rw.edns = true
	rw.do = opt.Do()
	rw.udpSize = max(opt.UDPSize(), dns.MinMsgSize) // RFC 6891, Section 6.2.5
	for _, o := range opt.Option {
		if o.Option() == dns.EDNS0PADDING {
			rw.padded = true
		}
	}
	return rw.readCookie(opt)
}

// readCookie checks the query's COOKIE option (RFC 7873, Section 5.2).
func (rw *responder) readCookie(opt *dns.OPT) int {
	s := rw.srv
	if s == nil || s.DisableCookies {
		return dns.RcodeSuccess
	}
	c, present, err := findCookie(opt)
	if err != nil {
		s.counters.cookiesMalformed.Add(1)
		return dns.RcodeFormatError
	}
	ip := rw.out.remoteIP()
	if !present || !ip.IsValid() {
		return dns.RcodeSuccess
	}
	s.init()
	rw.hasCookie, rw.cookie = true, c
	if len(c.server) > 0 && s.cookies.check(c.client, c.server, ip, uint32(s.now().Unix())) {
		rw.cookieOK = true
		s.counters.cookiesValid.Add(1)
	} else {
		// Only a client cookie, or a server cookie that is not ours (any
		// more): answer as without one, with a fresh server cookie
		// (Sections 5.2.3 and 5.2.4).
		s.counters.cookiesIssued.Add(1)
	}
	return dns.RcodeSuccess
}

// amplificationCap is the largest UDP answer the query may get under
// MaxUDPAmplification and AmplificationFloor, or 0 for no cap.
func (rw *responder) amplificationCap() int {
	s := rw.srv
	if s == nil || rw.t != TransportUDP || rw.cookieOK || rw.querySize == 0 || s.MaxUDPAmplification < 0 {
		return 0
	}
	floor := s.AmplificationFloor
	if floor == 0 {
		floor = DefaultAmplificationFloor
	}
	return max(max(orDefault(s.MaxUDPAmplification, DefaultMaxUDPAmplification), 2)*rw.querySize, floor)
}

// limit runs a UDP answer past Response Rate Limiting: it reports
// whether to send m, which it may have turned into an empty TC=1 reply.
func (rw *responder) limit(m *dns.Msg) bool {
	switch rw.rateLimit(m) {
	case rrlDrop:
		return false
	case rrlSlip:
		stripToTC(m)
		rw.note.key = nil // a slipped reply is not the answer
	}
	return true
}

// rateLimit counts the answer m (only its header and sections matter) in
// Response Rate Limiting and Stats. Answers over a stream, to a client
// with a valid server cookie or without an IP address are always sent.
func (rw *responder) rateLimit(m *dns.Msg) rrlVerdict {
	s := rw.srv
	if rw.rrlPreset != rrlSend {
		return rw.rrlPreset // counted by answerCached
	}
	if s == nil || rw.t != TransportUDP || rw.cookieOK || s.rrl == nil {
		return rrlSend
	}
	ip := rw.out.remoteIP()
	if !ip.IsValid() {
		return rrlSend
	}
	v := s.rrl.decide(s.rrl.key(ip, m), s.now().UnixNano())
	s.countRRL(v)
	return v
}

func (s *Server) countRRL(v rrlVerdict) {
	switch v {
	case rrlDrop:
		s.counters.rrlDropped.Add(1)
	case rrlSlip:
		s.counters.rrlSlipped.Add(1)
	}
}

// stripToTC leaves the header, the question and the OPT record, with TC
// set: the client learns to retry over TCP, and the answer is no larger
// than the query (plus a server cookie).
func stripToTC(m *dns.Msg) {
	m.Truncated = true
	m.Answer, m.Ns = nil, nil
	extra := m.Extra[:0]
	for _, rr := range m.Extra {
		if rr.Header().Rrtype == dns.TypeOPT {
			extra = append(extra, rr)
		}
	}
	m.Extra = extra
}

// send sends an answer and counts it.
func (rw *responder) send(b []byte) error {
	if rw.srv != nil && rw.t == TransportUDP {
		rw.srv.counters.udpResponses.Add(1)
		rw.srv.counters.udpBytesOut.Add(uint64(len(b)))
	}
	return rw.out.send(b)
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
	spelled := foldQuestion(m)
	err := rw.writeFolded(m, spelled)
	if spelled != "" {
		m.Question[0].Name = spelled
	}
	return err
}

// writeFolded is WriteMsg with m's question in lower case if spelled (the
// name as asked) is not "": every length the answer is cut or padded to
// is then the same for every spelling. The name as asked is written over
// the packed question.
func (rw *responder) writeFolded(m *dns.Msg, spelled string) error {
	rw.finish(m)
	var (
		rrlKey rrlKey
		hasRRL bool
	)
	if rw.note.key != nil && rw.t == TransportUDP && rw.srv.rrl != nil {
		// The count this answer falls in, for the cache's hits; the
		// client's network is filled in at each hit.
		rrlKey, hasRRL = rw.srv.rrl.key(netip.Addr{}, m), true
	}
	if !rw.limit(m) {
		return nil
	}
	bufp := rw.srv.getBuf()
	defer rw.srv.putBuf(bufp)
	buf := *bufp
	// Stream answers are packed after a two-byte gap for the length.
	start := 0
	if rw.t.Stream() {
		start = 2
	}
	packed, wasCapped, err := rw.pack(m, buf[start:])
	if err != nil {
		return err
	}
	if spelled != "" {
		restoreCase(packed[12:], spelled)
	}
	if rw.note.key != nil {
		rw.storeAnswer(m, packed, rrlKey, hasRRL, wasCapped)
	}
	if !rw.t.Stream() {
		return rw.send(packed)
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

// pack packs m into buf, truncated to what the transport and the
// amplification cap allow; wasCapped reports a cut by the cap.
func (rw *responder) pack(m *dns.Msg, buf []byte) (packed []byte, wasCapped bool, err error) {
	packed, err = m.PackBuffer(buf)
	if err != nil {
		// The handler built something unencodable: SERVFAIL rather than
		// silence, so the client does not wait for a timeout.
		fail := reply(m, dns.RcodeServerFailure)
		rw.note.key = nil
		if packed, err = fail.PackBuffer(buf); err != nil {
			return nil, false, err
		}
	}
	limit := dnsstream.MaxMessageSize
	capped := false
	if rw.t == TransportUDP {
		limit = min(int(rw.udpSize), rw.maxUDPSize())
		if c := rw.amplificationCap(); c > 0 && c < limit {
			limit, capped = c, true
		}
	}
	if len(packed) > limit {
		if capped {
			wasCapped = true
			rw.srv.counters.amplificationTruncated.Add(1)
		}
		if packed, err = truncate(m, buf, limit); err != nil {
			return nil, false, err
		}
	}
	return packed, wasCapped, nil
}

// foldQuestion puts the name of m's one question in lower case for
// packing, so that names compressed against it point at it whatever its
// spelling, and returns the name as asked ("" if nothing changed; a name
// with escapes is left as it is).
func foldQuestion(m *dns.Msg) string {
	if len(m.Question) != 1 {
		return ""
	}
	name := m.Question[0].Name
	upper := false
	for i := range len(name) {
		switch c := name[i]; {
		case c == '\\':
			return ""
		case 'A' <= c && c <= 'Z':
			upper = true
		}
	}
	if !upper {
		return ""
	}
	m.Question[0].Name = strings.ToLower(name)
	return name
}

// restoreCase writes the letters of name (without escapes, as
// foldQuestion allows) over wire, the same name packed in lower case.
func restoreCase(wire []byte, name string) {
	i := 0
	for p := 0; p < len(wire); {
		l := int(wire[p])
		if l == 0 || l&0xc0 != 0 || p+1+l > len(wire) {
			return
		}
		p++
		for end := p + l; p < end && i < len(name); p, i = p+1, i+1 {
			wire[p] = name[i]
		}
		i++ // the dot after the label
	}
}

// truncate packs m cut to limit bytes with TC=1 into buf: whole RRsets
// dropped from the end (RFC 2181, Section 9), or, below 512 bytes, where
// miekg/dns does not cut, everything but the question and the OPT record.
func truncate(m *dns.Msg, buf []byte, limit int) ([]byte, error) {
	if limit >= dns.MinMsgSize {
		m.Truncate(limit)
		if packed, err := m.PackBuffer(buf); err != nil || len(packed) <= limit {
			return packed, err
		}
	}
	stripToTC(m)
	packed, err := m.PackBuffer(buf)
	if err != nil {
		return nil, err
	}
	if len(packed) > limit {
		return nil, errTooLarge
	}
	return packed, nil
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
	if rw.hasCookie {
		// RFC 7873, Section 5.2: echo the client cookie with a fresh
		// server cookie, valid or not the one presented.
		sc := rw.srv.cookies.make(rw.cookie.client, rw.out.remoteIP(), uint32(rw.srv.now().Unix()))
		opt.Option = append(opt.Option, &dns.EDNS0_COOKIE{
			Code: dns.EDNS0COOKIE, Cookie: hex.EncodeToString(rw.cookie.client[:]) + hex.EncodeToString(sc[:]),
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
		// Counted with the other FORMERR answers to the client's network.
		switch rw.rateLimit(&dns.Msg{MsgHdr: dns.MsgHdr{Rcode: dns.RcodeFormatError}}) {
		case rrlDrop:
			return nil
		case rrlSlip:
			h[2] |= 0x02 // TC: the header is all there is anyway
		}
		return rw.send(h[:])
	}
	frame, _ := dnsstream.AppendFrame(make([]byte, 0, 14), h[:])
	return rw.out.send(frame)
}
