package authority

import (
	"context"
	"encoding/binary"
	"testing"

	"github.com/miekg/dns"
)

// servePacket runs raw through the server's datagram path without sockets
// and returns what it sent.
func servePacket(t testing.TB, s *Server, tr Transport, raw []byte) [][]byte {
	t.Helper()
	out := &sliceOutlet{}
	s.serveMsg(context.Background(), raw, &responder{srv: s, t: tr, out: out})
	return out.sent
}

func packQuery(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ednsQuery(name string, qtype uint16, size uint16, do bool, opts ...dns.EDNS0) *dns.Msg {
	m := query(name, qtype)
	m.SetEdns0(size, do)
	m.IsEdns0().Option = opts
	return m
}

func unpackOne(t testing.TB, tr Transport, sent [][]byte) (*dns.Msg, int) {
	t.Helper()
	if len(sent) != 1 {
		t.Fatalf("sent %d packets, want 1", len(sent))
	}
	b := sent[0]
	if tr.Stream() {
		if len(b) < 2 || int(binary.BigEndian.Uint16(b)) != len(b)-2 {
			t.Fatalf("bad frame prefix on %d bytes", len(b))
		}
		b = b[2:]
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatalf("answer does not parse: %v", err)
	}
	return m, len(b)
}

func testServer(t testing.TB) *Server {
	return &Server{Handler: Chain(mustZones(t, mustZone(t, "example.org.", testZone)), CheckQuery)}
}

func TestResponderEDNS(t *testing.T) {
	s := testServer(t)
	s.MaxUDPAmplification = -1 // the buffer sizes are under test here (TestAmplificationCap)
	pad := &dns.EDNS0_PADDING{Padding: make([]byte, 20)}
	ka := &dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}
	tests := []struct {
		name      string
		tr        Transport
		q         *dns.Msg
		wantOPT   bool
		wantDO    bool
		keepalive bool
		padded    bool
		tc        bool
		maxLen    int
	}{
		{name: "no EDNS: no OPT, 512 bytes, TC", tr: TransportUDP, q: query("big.example.org.", dns.TypeTXT), tc: true, maxLen: 512},
		{name: "no EDNS small", tr: TransportUDP, q: query("www.example.org.", dns.TypeA), maxLen: 512},
		{name: "EDNS 1232: fits", tr: TransportUDP, q: ednsQuery("big.example.org.", dns.TypeTXT, 1232, false), wantOPT: true, maxLen: 1232},
		{name: "EDNS below 512 counts as 512", tr: TransportUDP, q: ednsQuery("big.example.org.", dns.TypeTXT, 100, false), wantOPT: true, tc: true, maxLen: 512},
		{name: "EDNS 600: TC", tr: TransportUDP, q: ednsQuery("big.example.org.", dns.TypeTXT, 600, false), wantOPT: true, tc: true, maxLen: 600},
		{name: "DO echoed", tr: TransportUDP, q: ednsQuery("www.example.org.", dns.TypeA, 1232, true), wantOPT: true, wantDO: true, maxLen: 1232},
		{name: "TCP: no truncation, keepalive", tr: TransportTCP, q: ednsQuery("big.example.org.", dns.TypeTXT, 512, false), wantOPT: true, keepalive: true, maxLen: 65535},
		{name: "TCP without EDNS: no OPT", tr: TransportTCP, q: query("big.example.org.", dns.TypeTXT), maxLen: 65535},
		{name: "UDP keepalive never sent", tr: TransportUDP, q: ednsQuery("www.example.org.", dns.TypeA, 1232, false, ka), wantOPT: true, maxLen: 1232},
		{name: "TLS padded", tr: TransportTLS, q: ednsQuery("www.example.org.", dns.TypeA, 1232, false, pad), wantOPT: true, keepalive: true, padded: true, maxLen: 65535},
		{name: "TLS padded big", tr: TransportTLS, q: ednsQuery("big.example.org.", dns.TypeTXT, 1232, false, pad), wantOPT: true, keepalive: true, padded: true, maxLen: 65535},
		{name: "TCP never padded", tr: TransportTCP, q: ednsQuery("www.example.org.", dns.TypeA, 1232, false, pad), wantOPT: true, keepalive: true, maxLen: 65535},
		{name: "BADVERS carries OPT", tr: TransportUDP, q: func() *dns.Msg {
			m := ednsQuery("www.example.org.", dns.TypeA, 1232, false)
			m.IsEdns0().SetVersion(2)
			return m
		}(), wantOPT: true, maxLen: 1232},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, n := unpackOne(t, tc.tr, servePacket(t, s, tc.tr, packQuery(t, tc.q)))
			if m.Id != tc.q.Id {
				t.Fatalf("id %d, want %d", m.Id, tc.q.Id)
			}
			if n > tc.maxLen {
				t.Errorf("answer of %d bytes, limit %d", n, tc.maxLen)
			}
			if m.Truncated != tc.tc {
				t.Errorf("TC = %v, want %v", m.Truncated, tc.tc)
			}
			if !tc.tc && m.Rcode == dns.RcodeSuccess && len(m.Answer) == 0 {
				t.Errorf("untruncated answer is empty")
			}
			opt := m.IsEdns0()
			if (opt != nil) != tc.wantOPT {
				t.Fatalf("OPT present = %v, want %v", opt != nil, tc.wantOPT)
			}
			if opt == nil {
				return
			}
			if opt.UDPSize() != DefaultMaxUDPSize || opt.Do() != tc.wantDO || opt.Version() != 0 {
				t.Errorf("OPT size %d do %v version %d", opt.UDPSize(), opt.Do(), opt.Version())
			}
			var gotKA, gotPad bool
			for _, o := range opt.Option {
				switch o := o.(type) {
				case *dns.EDNS0_TCP_KEEPALIVE:
					gotKA = true
					if o.Timeout != uint16(DefaultIdleTimeout.Milliseconds()/100) {
						t.Errorf("keepalive timeout %d", o.Timeout)
					}
				case *dns.EDNS0_PADDING:
					gotPad = true
				}
			}
			if gotKA != tc.keepalive || gotPad != tc.padded {
				t.Errorf("keepalive %v padding %v; want %v %v", gotKA, gotPad, tc.keepalive, tc.padded)
			}
			if tc.padded && n%paddingBlock != 0 {
				t.Errorf("padded answer of %d bytes is not a multiple of %d", n, paddingBlock)
			}
			if tc.q.IsEdns0().Version() != 0 && m.Rcode != dns.RcodeBadVers {
				t.Errorf("rcode %s, want BADVERS", dns.RcodeToString[m.Rcode])
			}
		})
	}
}

// Packets that no server should answer, and packets that deserve FORMERR.
func TestMalformedPackets(t *testing.T) {
	s := testServer(t)
	good := packQuery(t, query("www.example.org.", dns.TypeA))
	asResponse := append([]byte(nil), good...)
	asResponse[2] |= 0x80
	// A question whose name points at itself: a compression loop.
	loop := []byte{0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}
	// A pointer forward past the end of the message.
	pastEnd := []byte{0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 200, 0, 1, 0, 1}
	// Header claims a question but there is none.
	missingQ := []byte{0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0}
	// Claims 65535 answers it does not carry.
	hugeCounts := append(append([]byte(nil), good...), 0)
	hugeCounts[6], hugeCounts[7] = 0xff, 0xff
	// A label longer than 63 bytes.
	longLabel := append([]byte{0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 64}, make([]byte, 70)...)
	noQ := []byte{0xbe, 0xef, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0}
	twoQ := packQuery(t, func() *dns.Msg {
		m := query("www.example.org.", dns.TypeA)
		m.Id = 0xbeef
		m.Question = append(m.Question, dns.Question{Name: "x.example.org.", Qtype: dns.TypeA, Qclass: dns.ClassINET})
		return m
	}())
	tests := []struct {
		name  string
		raw   []byte
		rcode int // -1: no reply at all
	}{
		{"empty", nil, -1},
		{"one byte", []byte{0}, -1},
		{"truncated header", good[:11], -1},
		{"a response", asResponse, -1},
		{"garbage", []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"), -1},
		{"compression loop", loop, dns.RcodeFormatError},
		{"pointer past end", pastEnd, dns.RcodeFormatError},
		{"missing question", missingQ, dns.RcodeFormatError},
		{"huge counts", hugeCounts, dns.RcodeFormatError},
		{"label too long", longLabel, dns.RcodeFormatError},
		{"qdcount 0", noQ, dns.RcodeFormatError},
		{"qdcount 2", twoQ, dns.RcodeFormatError},
	}
	for _, tc := range tests {
		for _, tr := range []Transport{TransportUDP, TransportTCP} {
			t.Run(tc.name+"/"+tr.String(), func(t *testing.T) {
				sent := servePacket(t, s, tr, tc.raw)
				if tc.rcode < 0 {
					if len(sent) != 0 {
						t.Fatalf("answered %x", sent)
					}
					return
				}
				m, n := unpackOne(t, tr, sent)
				if m.Id != 0xbeef && m.Id != binary.BigEndian.Uint16(tc.raw) {
					t.Fatalf("id %x", m.Id)
				}
				if m.Rcode != tc.rcode || !m.Response || len(m.Answer) != 0 {
					t.Fatalf("rcode %s qr %v answers %d", dns.RcodeToString[m.Rcode], m.Response, len(m.Answer))
				}
				if n > max(len(tc.raw), 12+len(tc.raw)) {
					t.Fatalf("reply of %d bytes to %d bytes", n, len(tc.raw))
				}
			})
		}
	}
}

func TestWriteMsgTwice(t *testing.T) {
	out := &sliceOutlet{}
	rw := &responder{t: TransportUDP, out: out}
	q := query("www.example.org.", dns.TypeA)
	rw.readRequest(q)
	if err := rw.WriteMsg(reply(q, dns.RcodeSuccess)); err != nil {
		t.Fatal(err)
	}
	if err := rw.WriteMsg(reply(q, dns.RcodeSuccess)); err == nil {
		t.Fatal("second WriteMsg succeeded")
	}
	if len(out.sent) != 1 {
		t.Fatalf("sent %d", len(out.sent))
	}
}

// An answer that cannot be packed becomes SERVFAIL, not silence.
func TestUnencodableAnswerIsServfail(t *testing.T) {
	out := &sliceOutlet{}
	rw := &responder{t: TransportUDP, out: out}
	q := query("www.example.org.", dns.TypeDS)
	rw.readRequest(q)
	m := reply(q, dns.RcodeSuccess)
	m.Answer = []dns.RR{&dns.DS{Hdr: dns.RR_Header{Name: "www.example.org.", Rrtype: dns.TypeDS, Class: dns.ClassINET}, Digest: "0"}}
	rw.WriteMsg(m)
	got, _ := unpackOne(t, TransportUDP, out.sent)
	if got.Rcode != dns.RcodeServerFailure || got.Id != q.Id || len(got.Answer) != 0 {
		t.Fatalf("got %v", got)
	}
}

// A handler that adds an OPT to an answer for a query without one does
// not get it sent (RFC 6891, Section 7).
func TestNoOPTWithoutEDNS(t *testing.T) {
	out := &sliceOutlet{}
	rw := &responder{t: TransportUDP, out: out}
	q := query("www.example.org.", dns.TypeA)
	rw.readRequest(q)
	m := reply(q, dns.RcodeSuccess)
	m.SetEdns0(4096, false)
	if err := rw.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	got, _ := unpackOne(t, TransportUDP, out.sent)
	if got.IsEdns0() != nil {
		t.Fatal("OPT sent to a client without EDNS")
	}
}

// FuzzServePacket drives arbitrary bytes through the whole datagram path
// (header check, parse, CheckQuery, zone lookup, finishing, packing):
// it must never panic, never answer a packet without a parsable query
// header, and every answer must parse, carry the query's ID and fit.
func FuzzServePacket(f *testing.F) {
	s := testServer(f)
	for _, m := range []*dns.Msg{
		query("www.example.org.", dns.TypeA),
		query("big.example.org.", dns.TypeTXT),
		query("chain.example.org.", dns.TypeA),
		query("host.sub.example.org.", dns.TypeA),
		query("nope.example.org.", dns.TypeA),
		query("www.example.net.", dns.TypeA),
		ednsQuery("big.example.org.", dns.TypeTXT, 600, true),
		ednsQuery("www.example.org.", dns.TypeA, 1232, false, &dns.EDNS0_PADDING{Padding: make([]byte, 8)},
			&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE}),
	} {
		f.Add(packQuery(f, m), uint8(0))
		f.Add(packQuery(f, m), uint8(2))
	}
	f.Add([]byte{0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}, uint8(1))
	f.Add([]byte{0, 0, 0x28, 0, 0, 1, 0, 0, 0, 0, 0, 0}, uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, tsel uint8) {
		tr := []Transport{TransportUDP, TransportTCP, TransportTLS}[tsel%3]
		in := append([]byte(nil), raw...)
		sent := servePacket(t, s, tr, in)
		if len(sent) == 0 {
			return
		}
		if len(raw) < 12 || raw[2]&0x80 != 0 {
			t.Fatalf("answered an unanswerable packet %x", raw)
		}
		m, n := unpackOne(t, tr, sent)
		if m.Id != binary.BigEndian.Uint16(raw) || !m.Response {
			t.Fatalf("answer id %d qr %v for query id %d", m.Id, m.Response, binary.BigEndian.Uint16(raw))
		}
		if tr == TransportUDP && n > DefaultMaxUDPSize {
			t.Fatalf("UDP answer of %d bytes", n)
		}
	})
}

func BenchmarkServePacket(b *testing.B) {
	s := testServer(b)
	raw := packQuery(b, ednsQuery("www.example.org.", dns.TypeA, 1232, false))
	out := &discardOutlet{}
	rw := &responder{}
	b.ReportAllocs()
	for b.Loop() {
		*rw = responder{srv: s, t: TransportUDP, out: out}
		s.serveMsg(context.Background(), raw, rw)
	}
}

type discardOutlet struct{ sliceOutlet }

func (discardOutlet) send([]byte) error { return nil }
