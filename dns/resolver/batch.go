package resolver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Question is one question of a LookupBatch: a name and a record type
// (class IN, recursion desired).
type Question struct {
	Name  string
	Qtype uint16
	// Stream asks a resolver whose transport is UDP to send this question
	// over TCP at once, beside the others' datagrams, rather than after a
	// truncated UDP answer: for an answer known to exceed a UDP answer
	// (Z-data with post-quantum v3 records, docs/ztls-spec.md, Section
	// 9.7), which saves the truncated round trip. Over TCP and TLS it
	// changes nothing.
	Stream bool
}

// LookupBatch asks all of qs at once and returns their answers in the
// order of qs; no Answer is nil. Cached answers land at once; the others
// travel together: over UDP from one socket with a fresh random source port
// and a distinct random ID per question, over TCP and TLS in one write on
// the kept-open connection. Each answer is checked exactly as Lookup checks
// it (source, ID, question) and is passed to each (if non-nil) the moment
// it lands, from the calling goroutine. An Answer whose question is not a
// valid domain name, or that got no reply within the time budget, carries
// its own Err. When ctx ends first, the error is ctx's and the answers that
// had not landed carry it too.
func (r *Resolver) LookupBatch(ctx context.Context, qs []Question, each func(Answer)) ([]*Answer, error) {
	start := time.Now() // real time: elapsed
	answers := make([]*Answer, len(qs))
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	var (
		msgs   []*dns.Msg // the questions that go upstream
		idx    []int      // their index in qs
		stream []bool     // Question.Stream of each
	)
	land := func(i int, a *Answer) {
		a.Took = time.Since(start)
		answers[i] = a
		if each != nil {
			each(*a)
		}
	}
	for i, q := range qs {
		fqdn := dns.Fqdn(q.Name)
		a := &Answer{Qtype: q.Qtype, Name: fqdn}
		if _, ok := dns.IsDomainName(fqdn); !ok || q.Name == "" {
			a.Err = fmt.Errorf("resolver: bad domain name %q", q.Name)
			land(i, a)
			continue
		}
		if closed {
			a.Err = ErrClosed
			land(i, a)
			continue
		}
		m := new(dns.Msg)
		m.SetQuestion(fqdn, q.Qtype)
		if r.cache != nil {
			key := keyOf(m.Question[0])
			if hit, ok := r.cache.get(key); ok {
				if hit.prefetch {
					r.startPrefetch(key, m)
				}
				a.Rcode, a.RRs, a.Reply = hit.msg.Rcode, hit.msg.Answer, hit.msg
				a.Transport, a.FromCache = hit.transport, true
				land(i, a)
				continue
			}
		}
		msgs = append(msgs, m)
		idx = append(idx, i)
		stream = append(stream, q.Stream)
	}
	if len(msgs) > 0 {
		r.queryBatchStream(ctx, msgs, stream, func(k int, reply *dns.Msg, transport string, err error) {
			i := idx[k]
			a := &Answer{Qtype: qs[i].Qtype, Name: msgs[k].Question[0].Name, Transport: transport, Err: err}
			if err == nil {
				if r.cache != nil {
					r.cache.put(keyOf(msgs[k].Question[0]), reply, transport)
				}
				reply.Id = msgs[k].Id
				a.Rcode, a.RRs, a.Reply = reply.Rcode, reply.Answer, reply
			}
			land(i, a)
		})
	}
	if err := ctx.Err(); err != nil {
		for i, a := range answers {
			if a == nil {
				answers[i] = &Answer{Qtype: qs[i].Qtype, Name: dns.Fqdn(qs[i].Name), Err: err, Took: time.Since(start)}
			}
		}
		return answers, err
	}
	return answers, nil
}

// landFunc receives the outcome of question k of a batch: a usable reply
// and the transport it came over, or an error.
type landFunc func(k int, reply *dns.Msg, transport string, err error)

// queryBatch sends the questions qs upstream together and calls land
// exactly once per question, from the calling goroutine, as each answer
// lands. Each question has the time budget Config.Timeout. The servers are
// tried in order with the questions still open; a SERVFAIL or REFUSED
// reply moves a question on to the next server, and if every server gives
// one, the last is its answer.
func (r *Resolver) queryBatch(ctx context.Context, qs []*dns.Msg, land landFunc) {
	r.queryBatchStream(ctx, qs, nil, land)
}

// queryBatchStream is queryBatch with the questions whose stream is set
// sent over TCP at once when the transport is UDP (Question.Stream).
func (r *Resolver) queryBatchStream(ctx context.Context, qs []*dns.Msg, stream []bool, land landFunc) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	b := newOpenQuestions(qs, stream, land)
	attempt := r.cfg.Timeout / time.Duration(2*len(r.servers))
	attempt = min(max(attempt, 50*time.Millisecond), 2*time.Second)
	// A server whose certificate failed verification is not asked again
	// within this budget: that is not transient, and a lookup that only
	// has such servers fails at once.
	badCert := make([]bool, len(r.servers))
	for len(b.open) > 0 && slices.Contains(badCert, false) {
		for i := range r.servers {
			if badCert[i] {
				continue
			}
			ms, streamed, note := b.round()
			actx, acancel := context.WithTimeout(ctx, attempt)
			r.tryBatch(actx, i, ms, streamed, func(j int, reply *dns.Msg, transport string, err error) {
				badCert[i] = badCert[i] || isCertificateError(err)
				note(j, reply, transport, err)
			})
			acancel()
			b.closeLanded()
			if len(b.open) == 0 || ctx.Err() != nil {
				break
			}
		}
		b.landLastReplies()
		if ctx.Err() != nil {
			break
		}
	}
	for _, k := range b.open {
		land(k, nil, "", queryError(ctx, r.cfg.Timeout, r.servers, qs[k].Question[0], b.items[k].lastErr))
	}
}

// openQuestions is the state of queryBatch: each question, what the
// servers said to it so far, and which are still open.
type openQuestions struct {
	items []openQuestion
	open  []int // indexes of the items still open
	land  landFunc
}

type openQuestion struct {
	m         *dns.Msg // as sent (without the wire ID)
	stream    bool     // Question.Stream
	done      bool
	lastErr   error
	lastReply *dns.Msg // a SERVFAIL or REFUSED, the answer if nothing better comes
	lastTrans string
}

func newOpenQuestions(qs []*dns.Msg, stream []bool, land landFunc) *openQuestions {
	b := &openQuestions{items: make([]openQuestion, len(qs)), open: make([]int, len(qs)), land: land}
	for k, q := range qs {
		m := q.Copy()
		m.Compress = false
		if m.IsEdns0() == nil {
			m.SetEdns0(UDPBufferSize, false)
		}
		b.items[k].m = m
		b.items[k].stream = k < len(stream) && stream[k]
		b.open[k] = k
	}
	return b
}

// round returns the questions still open, for one attempt at a server,
// and the function that takes the attempt's outcome for each of them.
func (b *openQuestions) round() ([]*dns.Msg, []bool, landFunc) {
	cur := b.open
	ms := make([]*dns.Msg, len(cur))
	stream := make([]bool, len(cur))
	for j, k := range cur {
		ms[j], stream[j] = b.items[k].m, b.items[k].stream
	}
	return ms, stream, func(j int, reply *dns.Msg, transport string, err error) {
		b.note(cur[j], reply, transport, err)
	}
}

// note takes the outcome of one attempt for question k: a usable reply
// lands it, a SERVFAIL or REFUSED is kept in case no server does better,
// an error is kept for the question's own error.
func (b *openQuestions) note(k int, reply *dns.Msg, transport string, err error) {
	it := &b.items[k]
	switch {
	case errors.Is(err, ErrClosed):
		it.done = true
		b.land(k, nil, "", ErrClosed)
	case err != nil:
		// A timeout says less than what came before it (the
		// certificate that failed, the refused connect).
		if it.lastErr == nil || !isDeadline(err) {
			it.lastErr = err
		}
	case reply.Rcode == dns.RcodeServerFailure || reply.Rcode == dns.RcodeRefused:
		it.lastReply, it.lastTrans = reply, transport
	default:
		it.done = true
		b.land(k, reply, transport, nil)
	}
}

// landLastReplies lands, as their answer, the SERVFAIL or REFUSED that the
// open questions got when every server gave one.
func (b *openQuestions) landLastReplies() {
	for _, k := range b.open {
		if it := &b.items[k]; it.lastReply != nil {
			it.done = true
			b.land(k, it.lastReply, it.lastTrans, nil)
		}
	}
	b.closeLanded()
}

// closeLanded drops the questions that landed from open.
func (b *openQuestions) closeLanded() {
	kept := b.open[:0]
	for _, k := range b.open {
		if !b.items[k].done {
			kept = append(kept, k)
		}
	}
	b.open = kept
}

// queryError says why question q got no answer.
func queryError(ctx context.Context, budget time.Duration, servers []string, q dns.Question, lastErr error) error {
	what := q.Name + " " + dns.TypeToString[q.Qtype]
	if lastErr == nil || isDeadline(lastErr) {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("resolver: %s: %w", what, err)
		}
		return fmt.Errorf("resolver: %s: no reply from %s within %v", what, strings.Join(servers, ", "), budget)
	}
	return fmt.Errorf("resolver: %s: %w", what, lastErr)
}

// isCertificateError reports whether err is a server's certificate that
// failed verification (untrusted, expired, for another name).
func isCertificateError(err error) bool {
	var ce *tls.CertificateVerificationError
	return errors.As(err, &ce)
}

// isDeadline reports whether err only says that time ran out.
func isDeadline(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || isTimeout(err)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tryBatch makes one attempt at server i for every query in ms and calls
// land once per query. Over UDP, the truncated replies are asked again,
// together, over TCP at the same server.
func (r *Resolver) tryBatch(ctx context.Context, i int, ms []*dns.Msg, stream []bool, land landFunc) {
	if r.cfg.Transport == UDP && slices.Contains(stream, true) {
		r.tryMixed(ctx, i, ms, stream, land)
		return
	}
	if r.cfg.Transport != UDP {
		r.tryStream(ctx, r.cfg.Transport, i, ms, func(j int, reply *dns.Msg, err error) {
			land(j, reply, string(r.cfg.Transport), err)
		})
		return
	}
	var truncated []int
	exchangeUDP(ctx, r.udpAddrs[i], ms, func(j int, reply *dns.Msg, err error) {
		if errors.Is(err, errTruncated) {
			truncated = append(truncated, j)
			return
		}
		land(j, reply, string(UDP), err)
	})
	if len(truncated) == 0 {
		return
	}
	again := make([]*dns.Msg, len(truncated))
	for n, j := range truncated {
		again[n] = ms[j]
	}
	r.tryStream(ctx, TCP, i, again, func(n int, reply *dns.Msg, err error) {
		land(truncated[n], reply, string(TCP), err)
	})
}

// tryStream sends ms over the kept-open t connection to server i.
func (r *Resolver) tryStream(ctx context.Context, t Transport, i int, ms []*dns.Msg, report reportFunc) {
	s, err := r.stream(t, r.servers[i])
	if err != nil {
		for j := range ms {
			report(j, nil, err)
		}
		return
	}
	s.exchange(ctx, ms, report)
}

// tryMixed is tryBatch over UDP with the questions marked stream sent
// over TCP at the same time (Question.Stream), not after a truncated
// UDP answer. land is still called from the calling goroutine, one
// question at a time, as each answer lands.
func (r *Resolver) tryMixed(ctx context.Context, i int, ms []*dns.Msg, stream []bool, land landFunc) {
	type landed struct {
		j         int
		reply     *dns.Msg
		transport string
		err       error
	}
	var udpIdx, tcpIdx []int
	var udpMs, tcpMs []*dns.Msg
	for j, m := range ms {
		if stream[j] {
			tcpIdx, tcpMs = append(tcpIdx, j), append(tcpMs, m)
		} else {
			udpIdx, udpMs = append(udpIdx, j), append(udpMs, m)
		}
	}
	ch := make(chan landed, len(ms)) // each question lands once per attempt
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.tryStream(ctx, TCP, i, tcpMs, func(n int, reply *dns.Msg, err error) {
			ch <- landed{tcpIdx[n], reply, string(TCP), err}
		})
	}()
	if len(udpMs) > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.tryBatch(ctx, i, udpMs, nil, func(n int, reply *dns.Msg, transport string, err error) {
				ch <- landed{udpIdx[n], reply, transport, err}
			})
		}()
	}
	go func() { wg.Wait(); close(ch) }()
	for l := range ch {
		land(l.j, l.reply, l.transport, l.err)
	}
}
