package resolver

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsname"
)

// Reasons a datagram or frame is not the reply to a query. The resolver
// drops such packets and keeps waiting: an off-path attacker can send them
// at will, so none of them may end the query.
var (
	errWrongSource    = errors.New("resolver: reply from another address than the server's")
	errOversized      = errors.New("resolver: reply larger than the advertised buffer")
	errShortReply     = errors.New("resolver: reply shorter than a DNS header")
	errIDMismatch     = errors.New("resolver: reply ID does not match the query")
	errMalformed      = errors.New("resolver: malformed reply")
	errNotResponse    = errors.New("resolver: packet is not a response")
	errQuestionDiffer = errors.New("resolver: reply question does not match the query")
)

// headerLen is the length of the DNS header (RFC 1035, Section 4.1.1).
const headerLen = 12

// replyRule is what a reply must match besides its query. A datagram must
// come from the server's address and port and fit the buffer the query
// advertised (a larger one arrives cut short by the kernel). Over a stream
// the connection already fixes the peer and the frame its length, so the
// zero replyRule checks neither.
type replyRule struct {
	datagram bool
	server   netip.AddrPort // with datagram: the only source accepted
}

// accept is the acceptance rule for replies. It decides whether raw,
// received from `from`, answers one of the queries still waiting; waiting
// returns the query sent with an ID (as sent, with that ID), or nil. It
// returns the reply, with its answer section restricted as checkReply does,
// or nil and the reason raw is refused: one of the errors above.
//
// A truncated datagram that passes every check is accepted without an
// answer: accept returns it together with errTruncated, which settles its
// query, to be asked again over TCP. (A spoofer gains nothing by forging
// TC: it must guess the ID and port all the same, and TCP is harder to
// spoof.)
func (r replyRule) accept(from netip.AddrPort, raw []byte, waiting func(id uint16) *dns.Msg) (*dns.Msg, error) {
	if r.datagram {
		if from.Addr().Unmap() != r.server.Addr().Unmap() || from.Port() != r.server.Port() {
			return nil, errWrongSource
		}
		if len(raw) > UDPBufferSize {
			return nil, errOversized
		}
	}
	if len(raw) < headerLen {
		return nil, errShortReply
	}
	q := waiting(binary.BigEndian.Uint16(raw))
	if q == nil {
		return nil, errIDMismatch
	}
	reply, err := checkReply(q, raw)
	if err != nil {
		return nil, err
	}
	if r.datagram && reply.Truncated {
		return reply, errTruncated
	}
	return reply, nil
}

// maxChain bounds the CNAME chain followed inside one answer.
const maxChain = 16

// checkReply parses raw as the reply to the wire query q (the message with
// the ID that was really sent) and returns it with its answer section
// restricted to the names on the CNAME chain from the question: records
// about other names are what cache poisoning uses and are never returned.
// It is the part of replyRule.accept that reads the message itself.
func checkReply(q *dns.Msg, raw []byte) (*dns.Msg, error) {
	if len(raw) < headerLen {
		return nil, errShortReply
	}
	m := new(dns.Msg)
	if err := m.Unpack(raw); err != nil {
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
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
