package resolver

import (
	"errors"
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
