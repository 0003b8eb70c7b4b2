package ztlshttp

// A connection changing hands between the Transport's two HTTP clients.
//
// The HTTP client that opens a connection writes its first request
// before the connection exists (lazyConn), so the request is in that
// client's protocol, while what the connection should speak is known
// only later: the Z-data names the protocol early data is for, and the
// server selects one in the handshake. So the first request goes to
// package dial with its protocol (dial.Options.RequestALPN) and dial
// decides: when the Z-data's early data is for the other protocol, it
// asks for the request in that one before the ClientHello
// (RequestIn); when the server selected the other protocol, it does
// not send the request at all (ErrRequestNotSent). Either way the
// connection, not yet sent anything of the request or done with its
// handshake, is handed over to the other client (Transport.handOver),
// which writes the request in its protocol. The request reaches the
// server once, over one connection.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ztls-project/ztls/dial"
)

// opening is one connection being opened by dial.Connect, on a goroutine
// of its own so that it can change hands while dial waits for the
// request in another protocol.
type opening struct {
	cancel context.CancelFunc
	ask    chan string     // dial asks for the request in this protocol (once)
	give   chan firstWrite // and is given it
	done   chan struct{}   // closed when Connect has returned res and err
	res    *dial.Result
	err    error
	start  time.Time // Connect's (its report's times count from about then)
}

// firstWrite is a connection's first request as its HTTP client wrote
// it, and whether it may go as early data.
type firstWrite struct {
	b     []byte
	early bool
}

// open starts opening a connection to addr with o, its first request
// first, written in proto, early when it may go as early data. Package
// dial is the request's one writer: early, or after the handshake when
// the connection speaks proto. canSwitch lets dial ask for the request
// in the other protocol.
func open(ctx context.Context, addr string, o dial.Options, proto string, first []byte, early, canSwitch bool) *opening {
	ctx, cancel := context.WithCancel(ctx)
	op := &opening{cancel: cancel, ask: make(chan string, 1), give: make(chan firstWrite, 1), done: make(chan struct{}),
		start: time.Now()} // real time: elapsed
	o.Request, o.ReplaySafe, o.RequestALPN = append([]byte(nil), first...), early, proto
	if canSwitch {
		o.RequestIn = func(proto string) ([]byte, bool) {
			op.ask <- proto
			select {
			case w := <-op.give:
				return w.b, w.early
			case <-ctx.Done():
				return nil, false
			}
		}
	}
	go func() {
		op.res, op.err = dial.Connect(ctx, addr, o)
		close(op.done)
	}()
	return op
}

// established reports whether Connect has returned.
func (op *opening) established() bool {
	select {
	case <-op.done:
		return true
	default:
		return false
	}
}

// abandon stops the opening and closes its connection, if it made one.
func (op *opening) abandon() {
	op.cancel()
	go func() {
		<-op.done
		if op.res != nil && op.res.Conn != nil {
			op.res.Conn.Close()
		}
	}()
}

// protocolSwitch is the error of a lazyConn whose connection was handed
// to the Transport's client for proto.
type protocolSwitch struct{ proto string }

func (e *protocolSwitch) Error() string {
	return fmt.Sprintf("ztlshttp: the connection speaks %s: handed over to that client", e.proto)
}

// handKey names the connections handed over to the client for proto, to
// addr.
type handKey struct{ proto, addr string }

// handOver leaves op for the next connection the client for proto opens
// to addr.
func (t *Transport) handOver(proto, addr string, op *opening) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := handKey{proto, addr}
	t.handed[k] = append(t.handed[k], op)
}

// takeHanded takes a connection handed over to the client for proto, to
// addr; nil when there is none.
func (t *Transport) takeHanded(proto, addr string) *opening {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := handKey{proto, addr}
	ops := t.handed[k]
	if len(ops) == 0 {
		return nil
	}
	op := ops[0]
	if len(ops) == 1 {
		delete(t.handed, k)
	} else {
		t.handed[k] = ops[1:]
	}
	return op
}

// hasHanded reports whether a connection was handed over to the client
// for proto, to addr.
func (t *Transport) hasHanded(proto, addr string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.handed[handKey{proto, addr}]) > 0
}

// release abandons op unless a connection took it: the client it was
// handed to reused a connection it had instead of opening one.
func (t *Transport) release(proto, addr string, op *opening) {
	t.mu.Lock()
	k := handKey{proto, addr}
	ops := t.handed[k]
	i := slices.Index(ops, op)
	if i >= 0 {
		ops = slices.Delete(ops, i, i+1)
		if len(ops) == 0 {
			delete(t.handed, k)
		} else {
			t.handed[k] = ops
		}
	}
	t.mu.Unlock()
	if i >= 0 {
		op.abandon()
	}
}

// speaks reports whether the Transport speaks proto.
func (t *Transport) speaks(proto string) bool {
	return slices.Contains(t.protos, proto) && (proto != "h2" || t.h2 != nil)
}

// protoFor is the protocol to write a request to addr in: the one its
// last connection spoke; before any has spoken, the one a connection
// was handed over for before its ClientHello; else the first of the
// Transport's.
func (t *Transport) protoFor(addr string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range []string{t.known[addr], t.expected[addr]} {
		if p != "" && t.speaks(p) {
			return p
		}
	}
	return t.protos[0]
}

// spoke is the protocol the last connection to addr spoke ("" before
// any).
func (t *Transport) spoke(addr string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.known[addr]
}

// expect notes that a connection to addr was handed over for proto
// before its ClientHello (its server's Z-data names proto).
func (t *Transport) expect(addr, proto string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expected[addr] = proto
}

// remember notes that a connection to addr speaks proto.
func (t *Transport) remember(addr, proto string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.known[addr] = proto
}

// missEarly notes that the server at addr selected another protocol
// when offered early data in proto (its Z-data names a protocol it does
// not speak): the Transport's connections to it no longer change hands
// before their ClientHello to send early data in proto.
func (t *Transport) missEarly(addr, proto string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.missed[addr] = proto
}

// missedEarly reports whether the server at addr did not take early
// data in proto before.
func (t *Transport) missedEarly(addr, proto string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.missed[addr] == proto
}

// rewind is req again, its body from the start, for the client a
// connection was handed to.
func rewind(req *http.Request, cause error) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, fmt.Errorf("%w; the request's body cannot be sent again (Request.GetBody is nil)", cause)
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, errors.Join(cause, err)
	}
	r := req.Clone(req.Context())
	r.Body = body
	return r, nil
}
