package resolver

import "github.com/miekg/dns"

// reportFunc receives the outcome of query j of an exchange: its reply, or
// an error.
type reportFunc func(j int, reply *dns.Msg, err error)

// inflight is the queries of one exchange (a UDP chunk, or a batch on a
// stream connection) and which of them still wait for their reply. It
// reports each query exactly once. It belongs to the goroutine that runs
// the exchange.
type inflight struct {
	wires   []*dns.Msg // the queries as sent, with their wire IDs
	settled []bool
	left    int // queries not yet settled
	report  reportFunc
}

func newInflight(wires []*dns.Msg, report reportFunc) *inflight {
	return &inflight{
		wires:   wires,
		settled: make([]bool, len(wires)),
		left:    len(wires),
		report:  report,
	}
}

// settle reports query j's outcome: reply, or err when it is set. A query
// settles once; a second outcome for it is dropped.
func (f *inflight) settle(j int, reply *dns.Msg, err error) {
	if f.settled[j] {
		return
	}
	f.settled[j] = true
	f.left--
	if err != nil {
		reply = nil
	}
	f.report(j, reply, err)
}

// query returns the waiting query sent with id, or nil (the waiting
// argument of replyRule.accept).
func (f *inflight) query(id uint16) *dns.Msg {
	if j := f.index(id); j >= 0 {
		return f.wires[j]
	}
	return nil
}

// index returns the index of the waiting query sent with id, or -1.
func (f *inflight) index(id uint16) int {
	for j, w := range f.wires {
		if !f.settled[j] && w.Id == id {
			return j
		}
	}
	return -1
}

// waiting returns the indexes of the queries not yet settled.
func (f *inflight) waiting() []int {
	var out []int
	for j, done := range f.settled {
		if !done {
			out = append(out, j)
		}
	}
	return out
}

// failWaiting settles every query still waiting with err.
func (f *inflight) failWaiting(err error) {
	for _, j := range f.waiting() {
		f.settle(j, nil, err)
	}
}

// drain is the wait for replies, the same over UDP and streams: it calls
// next until every query is settled. next waits for what comes next (a
// batch of datagrams, a frame, a reply another goroutine read) and settles
// the queries it answers, or says why no more will come: the context
// ended, the socket or connection failed. drain returns that reason and
// leaves the queries still waiting to its caller, which knows whether to
// fail them or send them again; it returns nil once none waits.
func (f *inflight) drain(next func() error) error {
	for f.left > 0 {
		if err := next(); err != nil {
			return err
		}
	}
	return nil
}
