//lint:file-ignore SA1019 over a tls13.Conn x/net/http2's Transport.NewClientConn is the way to give the HTTP/2 client a connection (see transport.go)

package ztlshttp

import (
	"errors"
	"net/http"
	"slices"
	"sync"

	"golang.org/x/net/http2"
)

// h2Pool is the HTTP/2 client's connection pool (http2.ClientConnPool).
// It is the Transport's own so that a connection handed over to the
// HTTP/1.1 client (opening.go) is never offered for a request again:
// x/net's pool kept such a connection until its reader noticed, and the
// requests it gave it failed and were retried on it, with back-off.
type h2Pool struct {
	t *Transport

	mu    sync.Mutex
	conns map[string][]pooledH2 // by host:port
}

// pooledH2 is a pooled connection and the lazyConn under it.
type pooledH2 struct {
	cc *http2.ClientConn
	lc *lazyConn
}

// GetClientConn returns a connection to addr with a stream reserved for
// req: a connection the other client handed over, else a pooled one
// that is open (its handshake done, in HTTP/2) and can take it, else a
// new one, or the dialer's error, which the HTTP/2 client returns without
// retrying (a protocolSwitch when the server speaks HTTP/1.1). A
// connection still opening is shared only with a server that spoke
// HTTP/2 before: else it may yet change hands, and the requests sharing
// it would fail with an error the HTTP/2 client retries, with back-off.
func (p *h2Pool) GetClientConn(req *http.Request, addr string) (*http2.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.t.hasHanded("h2", addr) {
		spoke := p.t.spoke(addr) == "h2"
		for _, c := range p.conns[addr] {
			if (spoke || c.lc.open.Load()) && !c.lc.dead.Load() && c.cc.ReserveNewRequest() {
				return c.cc, nil
			}
		}
	}
	conn, err := p.t.dialer("h2")(req.Context(), "tcp", addr)
	if err != nil {
		return nil, err
	}
	cc, err := p.t.h2.NewClientConn(conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !cc.ReserveNewRequest() {
		cc.Close()
		return nil, errors.New("ztlshttp: a new HTTP/2 connection took no request")
	}
	p.conns[addr] = append(p.conns[addr], pooledH2{cc, conn.(*lazyConn)})
	return cc, nil
}

// MarkDead forgets cc.
func (p *h2Pool) MarkDead(cc *http2.ClientConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.removeLocked(cc)
}

func (p *h2Pool) removeLocked(cc *http2.ClientConn) {
	for addr, conns := range p.conns {
		conns = slices.DeleteFunc(conns, func(c pooledH2) bool { return c.cc == cc })
		if len(conns) == 0 {
			delete(p.conns, addr)
		} else {
			p.conns[addr] = conns
		}
	}
}

// closeIdle closes the connections that carry no request.
func (p *h2Pool) closeIdle() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var idle []*http2.ClientConn
	for _, conns := range p.conns {
		for _, c := range conns {
			if st := c.cc.State(); st.Closed || st.StreamsActive+st.StreamsReserved+st.StreamsPending == 0 {
				idle = append(idle, c.cc)
			}
		}
	}
	for _, cc := range idle {
		cc.Close()
		p.removeLocked(cc)
	}
}
