package resolver

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func TestCheckReply(t *testing.T) {
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	q.Id = 0x1234
	good := func() *dns.Msg {
		return reply(t, q,
			"www.example.test. 60 IN CNAME edge.example.test.",
			"edge.example.test. 60 IN A 192.0.2.1",
			"evil.example.org. 60 IN A 6.6.6.6", // off the chain
		)
	}
	tests := []struct {
		name    string
		mutate  func(m *dns.Msg)
		raw     []byte
		wantErr error
	}{
		{name: "good"},
		{name: "case differs", mutate: func(m *dns.Msg) { m.Question[0].Name = "WWW.Example.TEST." }},
		{name: "wrong id", mutate: func(m *dns.Msg) { m.Id++ }, wantErr: errIDMismatch},
		{name: "not a response", mutate: func(m *dns.Msg) { m.Response = false }, wantErr: errNotResponse},
		{name: "wrong name", mutate: func(m *dns.Msg) { m.Question[0].Name = "evil.example.test." }, wantErr: errQuestionDiffer},
		{name: "wrong type", mutate: func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA }, wantErr: errQuestionDiffer},
		{name: "wrong class", mutate: func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }, wantErr: errQuestionDiffer},
		{name: "no question", mutate: func(m *dns.Msg) { m.Question = nil }, wantErr: errQuestionDiffer},
		{name: "wrong opcode", mutate: func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }, wantErr: errQuestionDiffer},
		{name: "short", raw: []byte{0x12, 0x34, 0x80}, wantErr: errShortReply},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				m := good()
				if tc.mutate != nil {
					tc.mutate(m)
				}
				raw = pack(t, m)
			}
			got, err := checkReply(q, raw)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Answer) != 2 {
				t.Fatalf("answer not restricted to the CNAME chain: %v", got.Answer)
			}
		})
	}
	t.Run("malformed", func(t *testing.T) {
		raw := pack(t, good())
		_, err := checkReply(q, raw[:len(raw)-3])
		if err == nil || !strings.HasPrefix(err.Error(), "resolver: malformed") {
			t.Fatalf("err = %v", err)
		}
	})
}

// TestReplyRuleRefusesSpoofs tries each rejection of the acceptance rule
// with a crafted reply (spoofed, or not matching the query it claims to
// answer) and checks that it is refused for that reason, while the true
// reply is accepted.
func TestReplyRuleRefusesSpoofs(t *testing.T) {
	server := netip.MustParseAddrPort("127.0.0.1:5353")
	udp := replyRule{datagram: true, server: server}
	var wires []*dns.Msg
	for i, name := range []string{"a.test.", "b.test.", "answered.test."} {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		q.Id = 0x1000 + uint16(i)
		wires = append(wires, q)
	}
	f := newInflight(wires, func(int, *dns.Msg, error) {})
	f.settle(2, nil, errors.New("answered")) // answered.test. waits no more
	good := func() *dns.Msg { return reply(t, wires[1], "b.test. 60 IN A 192.0.2.1") }
	big := good()
	for i := range 80 {
		big.Answer = append(big.Answer, &dns.A{Hdr: dns.RR_Header{Name: "b.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, byte(i))})
	}
	if n := len(pack(t, big)); n <= UDPBufferSize {
		t.Fatalf("test reply of %d octets is not oversized", n)
	}
	tests := []struct {
		name    string
		rule    replyRule
		from    netip.AddrPort
		mutate  func(m *dns.Msg)
		raw     []byte
		wantErr error // nil: accepted
	}{
		{name: "good", rule: udp, from: server},
		{name: "good, source as IPv4-mapped IPv6", rule: udp, from: netip.MustParseAddrPort("[::ffff:127.0.0.1]:5353")},
		{name: "good over a stream, source not checked", from: netip.MustParseAddrPort("192.0.2.66:1")},
		{name: "another address", rule: udp, from: netip.MustParseAddrPort("127.0.0.2:5353"), wantErr: errWrongSource},
		{name: "another port", rule: udp, from: netip.MustParseAddrPort("127.0.0.1:5354"), wantErr: errWrongSource},
		{name: "no source", rule: udp, wantErr: errWrongSource},
		{name: "oversized", rule: udp, from: server, raw: pack(t, big), wantErr: errOversized},
		{name: "short", rule: udp, from: server, raw: pack(t, good())[:headerLen-1], wantErr: errShortReply},
		{name: "short frame", raw: []byte{0x10, 0x01, 0x80}, wantErr: errShortReply},
		{name: "unknown ID", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Id = 0x4242 }, wantErr: errIDMismatch},
		{name: "ID of an answered query", rule: udp, from: server, mutate: func(m *dns.Msg) {
			m.Id = wires[2].Id
			m.Question[0].Name = "answered.test."
		}, wantErr: errIDMismatch},
		{name: "ID of another query", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Id = wires[0].Id }, wantErr: errQuestionDiffer},
		{name: "malformed", rule: udp, from: server, raw: pack(t, good())[:headerLen+3], wantErr: errMalformed},
		{name: "query echoed", rule: udp, from: server, raw: pack(t, wires[1]), wantErr: errNotResponse},
		{name: "another name", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Question[0].Name = "evil.test." }, wantErr: errQuestionDiffer},
		{name: "another type", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Question[0].Qtype = dns.TypeAAAA }, wantErr: errQuestionDiffer},
		{name: "another class", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Question[0].Qclass = dns.ClassCHAOS }, wantErr: errQuestionDiffer},
		{name: "another opcode", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Opcode = dns.OpcodeNotify }, wantErr: errQuestionDiffer},
		{name: "two questions", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Question = append(m.Question, m.Question[0]) }, wantErr: errQuestionDiffer},
		{name: "no question", mutate: func(m *dns.Msg) { m.Question = nil }, wantErr: errQuestionDiffer},
		{name: "truncated datagram", rule: udp, from: server, mutate: func(m *dns.Msg) { m.Truncated = true }, wantErr: errTruncated},
		{name: "truncated frame", mutate: func(m *dns.Msg) { m.Truncated = true }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			if raw == nil {
				m := good()
				if tc.mutate != nil {
					tc.mutate(m)
				}
				raw = pack(t, m)
			}
			got, err := tc.rule.accept(tc.from, raw, f.query)
			switch {
			case tc.wantErr == errTruncated:
				// Accepted without an answer: it settles its query, which
				// goes again over TCP.
				if err != errTruncated || got == nil || got.Id != wires[1].Id {
					t.Fatalf("accept = %v, %v; want the reply to query 1 and errTruncated", got, err)
				}
			case tc.wantErr != nil:
				if got != nil || !errors.Is(err, tc.wantErr) {
					t.Fatalf("accept = %v, %v; want it refused with %v", got, err, tc.wantErr)
				}
			case err != nil:
				t.Fatalf("true reply refused: %v", err)
			case got.Id != wires[1].Id || len(got.Answer) != 1:
				t.Fatalf("accept = %v", got)
			}
		})
	}
}

func TestChainRecordsLoop(t *testing.T) {
	var rrs []dns.RR
	for _, s := range []string{"a.test. 1 IN CNAME b.test.", "b.test. 1 IN CNAME a.test.", "c.test. 1 IN A 192.0.2.1"} {
		rr, _ := dns.NewRR(s)
		rrs = append(rrs, rr)
	}
	if got := chainRecords("a.test.", rrs); len(got) != 2 {
		t.Fatalf("loop: got %v", got)
	}
}

// FuzzAnswerValidation feeds arbitrary bytes as the reply to a fixed
// query: checkReply must never panic, and whatever it accepts must answer
// exactly the question with the query's ID and only records on the chain.
func FuzzAnswerValidation(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("www.example.test.", dns.TypeA)
	q.Id = 0xbeef
	seed := func(m *dns.Msg) {
		b, err := m.Pack()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(reply(f, q, "www.example.test. 60 IN A 192.0.2.1"))
	seed(reply(f, q, "www.example.test. 60 IN CNAME x.test.", "x.test. 5 IN A 192.0.2.2", "y.test. 5 IN A 6.6.6.6"))
	nx := new(dns.Msg)
	nx.SetRcode(q, dns.RcodeNameError)
	seed(nx)
	seed(q)
	f.Add([]byte{0xbe, 0xef, 0x80, 0, 0, 1, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := checkReply(q, raw)
		if err != nil {
			return
		}
		if m.Id != q.Id || !m.Response || len(m.Question) != 1 ||
			!strings.EqualFold(m.Question[0].Name, q.Question[0].Name) ||
			m.Question[0].Qtype != dns.TypeA || m.Question[0].Qclass != dns.ClassINET {
			t.Fatalf("accepted a reply to another question: %v", m)
		}
		chain := map[string]bool{"www.example.test.": true}
		for range maxChain + 1 {
			for _, rr := range m.Answer {
				if c, ok := rr.(*dns.CNAME); ok && chain[strings.ToLower(c.Hdr.Name)] {
					chain[strings.ToLower(c.Target)] = true
				}
			}
		}
		for _, rr := range m.Answer {
			if !chain[strings.ToLower(rr.Header().Name)] {
				t.Fatalf("kept an off-chain record %v", rr)
			}
		}
	})
}
