package resolver

import (
	"errors"
	"fmt"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
)

// Reasons a datagram or frame is not the reply to a query. The resolver
// drops such packets and keeps waiting: an off-path attacker can send them
// at will, so none of them may end the query.
var (
	errShortReply     = errors.New("resolver: reply shorter than a DNS header")
	errNotResponse    = errors.New("resolver: packet is not a response")
	errIDMismatch     = errors.New("resolver: reply ID does not match the query")
	errQuestionDiffer = errors.New("resolver: reply question does not match the query")
)

// maxChain bounds the CNAME chain followed inside one answer.
const maxChain = 16

// checkReply parses raw as the reply to the wire query q (the message with
// the ID that was really sent) and returns it with its answer section
// restricted to the names on the CNAME chain from the question: records
// about other names are what cache poisoning uses and are never returned.
func checkReply(q *dns.Msg, raw []byte) (*dns.Msg, error) {
	if len(raw) < 12 {
		return nil, errShortReply
	}
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		return nil, fmt.Errorf("resolver: malformed reply: %w", err)
	}
	if !m.Response {
		return nil, errNotResponse
	}
	if m.Id != q.Id {
		return nil, errIDMismatch
	}
	if m.Opcode != q.Opcode || len(m.Question) != 1 || len(q.Question) != 1 {
		return nil, errQuestionDiffer
	}
	got, want := m.Question[0], q.Question[0]
	if got.Qtype != want.Qtype || got.Qclass != want.Qclass || !dnsname.Equal(got.Name, want.Name) {
		return nil, errQuestionDiffer
	}
	m.Answer = chainRecords(want.Name, m.Answer)
	return m, nil
}

// chainRecords keeps the records owned by qname or by a name its CNAME
// chain leads to within the same answer section.
func chainRecords(qname string, rrs []dns.RR) []dns.RR {
	if len(rrs) == 0 {
		return rrs
	}
	chain := []string{qname}
	cur := qname
	for hop := 0; hop < maxChain; hop++ {
		next := ""
		for _, rr := range rrs {
			if c, ok := rr.(*dns.CNAME); ok && dnsname.Equal(c.Hdr.Name, cur) {
				next = c.Target
				break
			}
		}
		if next == "" || onChain(chain, next) {
			break
		}
		chain = append(chain, next)
		cur = next
	}
	kept := rrs[:0:0]
	for _, rr := range rrs {
		if onChain(chain, rr.Header().Name) {
			kept = append(kept, rr)
		}
	}
	return kept
}

func onChain(chain []string, name string) bool {
	for _, c := range chain {
		if dnsname.Equal(c, name) {
			return true
		}
	}
	return false
}
