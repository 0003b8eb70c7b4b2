//go:build linux

package main

// The soak's load balancer and attacker in one (TestSoak): every honest
// connection goes through a TCP proxy on 127.0.0.10, which hands it to a
// member (round robin over the members that are up) and keeps what the
// client sent before the member's first byte came back: the client's
// first flight, ClientHello and early data, exactly as an on-path attacker
// records it (the client cannot send anything else before it has the
// server's flight, which the proxy forwards only after it stopped
// recording). Each flight with early data is then replayed to every
// member; one connection in raceEvery is also raced: the proxy holds the
// flight until it is complete and delivers it to its member and to the
// two others at the same moment.

import (
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// soakFlight is one honest connection as the proxy saw it.
type soakFlight struct {
	id       int64
	client   string // the client's address (its dial's local address)
	member   int    // the member it went to (-1: none reachable)
	race     bool
	honest   *soakConn // the connection to the member, as the member saw it
	flight   []byte    // what the client sent before the member's first byte
	early    int       // early data records in it
	complete bool      // whole TLS records
	replays  []*soakConn
	at       time.Time // real time the client's first byte arrived
}

// soakConn is one connection to a member, honest or replayed, and what the
// member's log said of it.
type soakConn struct {
	member int
	remote string // the address the member saw
	kind   string // "honest", "race" (raced with the honest one), "replay" (after it)
	flight *soakFlight
	sentAt time.Time // real

	verdict bool   // the member logged its first flight (or its failure)
	state   string // the log's state: "ZTLS accepted, ...", "ZTLS offered, rejected (...), ..."
	ended   string // the handshake failed before the first flight: the error
	dialErr string // the member could not be reached
}

func (c *soakConn) accepted() bool {
	return len(c.state) >= len("ZTLS accepted") && c.state[:len("ZTLS accepted")] == "ZTLS accepted"
}

type soakProxy struct {
	s      *soak
	ln     net.Listener
	n      atomic.Int64
	src    atomic.Uint32 // rotates the source addresses of the proxy's and the replays' connections
	mu     sync.Mutex
	byAddr map[string]*soakFlight // the client's address: its latest connection
	all    []*soakFlight
	wg     sync.WaitGroup
}

func newSoakProxy(s *soak, addr string) (*soakProxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &soakProxy{s: s, ln: ln, byAddr: map[string]*soakFlight{}}
	go p.serve()
	return p, nil
}

func (p *soakProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
		}()
	}
}

func (p *soakProxy) close() {
	p.ln.Close()
	p.wg.Wait()
}

// flightOf is the proxy's record of the client connection from addr.
func (p *soakProxy) flightOf(addr string) *soakFlight {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byAddr[addr]
}

// source is the next local address for a connection to a member: the
// proxy's from 127.0.2.0/24, the replays' from 127.0.3.0/24, so that the
// ports a long run uses are spread over many addresses.
func (p *soakProxy) source(net3 byte) *net.TCPAddr {
	n := p.src.Add(1)
	return &net.TCPAddr{IP: net.IPv4(127, 0, net3, byte(1+n%200))}
}

// dialMember connects to member m from the given network.
func (p *soakProxy) dialMember(m int, net3 byte) (net.Conn, error) {
	d := net.Dialer{Timeout: 2 * time.Second, LocalAddr: p.source(net3)}
	return d.Dial("tcp", p.s.memberAddr(m))
}

func (p *soakProxy) handle(cc net.Conn) {
	defer cc.Close()
	f := &soakFlight{id: p.n.Add(1), client: cc.RemoteAddr().String(), member: -1}
	// Drawn, not every n-th: the clients alternate BFE and v1, which a
	// fixed stride would take only one of.
	f.race = p.s.cfg.raceEvery > 0 && rand.IntN(p.s.cfg.raceEvery) == 0
	p.mu.Lock()
	p.byAddr[f.client] = f
	p.all = append(p.all, f)
	p.mu.Unlock()

	// Round robin over the members that are up, the next one if a
	// member does not answer (as a load balancer's health checks would).
	var up net.Conn
	for i := range soakMembers {
		m := int((f.id + int64(i)) % soakMembers)
		if !p.s.members[m].isUp() {
			continue
		}
		c, err := p.dialMember(m, 2)
		if err != nil {
			continue
		}
		up, f.member = c, m
		break
	}
	if up == nil {
		return
	}
	defer up.Close()
	f.honest = p.s.expect(f.member, up.LocalAddr().String(), "honest", f)

	var mu sync.Mutex
	recording := true
	done := make(chan struct{})
	go func() { // member → client
		defer close(done)
		b := make([]byte, 32<<10)
		first := true
		for {
			n, err := up.Read(b)
			if n > 0 && first {
				first = false
				// Let a client write that was already in flight land
				// in the recording; nothing the client sends after
				// this byte reaches it can be part of its first flight.
				time.Sleep(2 * time.Millisecond)
				mu.Lock()
				recording = false
				flight := append([]byte(nil), f.flight...)
				mu.Unlock()
				p.recorded(f, flight)
			}
			if n > 0 {
				if _, werr := cc.Write(b[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				if tc, ok := cc.(*net.TCPConn); ok {
					tc.CloseWrite()
				}
				return
			}
		}
	}()

	b := make([]byte, 32<<10)
	if f.race {
		p.race(f, cc, up, &mu)
	}
	for {
		n, err := cc.Read(b)
		if n > 0 {
			mu.Lock()
			if f.at.IsZero() {
				f.at = time.Now() // real time: elapsed
			}
			if recording {
				f.flight = append(f.flight, b[:n]...)
			}
			mu.Unlock()
			if _, werr := up.Write(b[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			if tc, ok := up.(*net.TCPConn); ok {
				tc.CloseWrite()
			}
			break
		}
	}
	<-done
}

// race holds the client's first flight until it is complete (a
// ClientHello and an early data record; at most 50 ms), then delivers it to
// the member and, at the same moment, to the two other members.
func (p *soakProxy) race(f *soakFlight, cc, up net.Conn, mu *sync.Mutex) {
	var buf []byte
	b := make([]byte, 32<<10)
	deadline := time.Now().Add(50 * time.Millisecond) // real time: a wait
	for time.Now().Before(deadline) {                 // real time: a wait
		cc.SetReadDeadline(deadline)
		n, err := cc.Read(b)
		if n > 0 {
			if buf == nil {
				mu.Lock()
				f.at = time.Now() // real time: elapsed
				mu.Unlock()
			}
			buf = append(buf, b[:n]...)
		}
		if complete, early := scanFlight(buf); complete && early > 0 {
			break
		}
		if err != nil {
			break
		}
	}
	cc.SetReadDeadline(time.Time{})
	mu.Lock()
	f.flight = append(f.flight, buf...)
	mu.Unlock()
	complete, early := scanFlight(buf)
	var others []net.Conn
	var conns []*soakConn
	if complete && early > 0 {
		for i := 1; i < soakMembers; i++ {
			m := (f.member + i) % soakMembers
			c, err := p.dialMember(m, 3)
			sc := &soakConn{member: m, kind: "race", flight: f}
			if err != nil {
				sc.dialErr = err.Error()
				p.s.addReplay(f, sc)
				continue
			}
			sc = p.s.expect(m, c.LocalAddr().String(), "race", f)
			others, conns = append(others, c), append(conns, sc)
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			deliverSoak(c, buf, conns[i])
		}()
	}
	close(start)
	up.Write(buf)
	wg.Wait()
}

// recorded replays a recorded flight with early data to every member.
func (p *soakProxy) recorded(f *soakFlight, flight []byte) {
	complete, early := scanFlight(flight)
	f.complete, f.early = complete, early
	if !complete || early == 0 {
		return
	}
	p.s.replays.Add(1)
	go func() {
		defer p.s.replays.Done()
		var wg sync.WaitGroup
		for m := range soakMembers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := p.dialMember(m, 3)
				if err != nil {
					p.s.addReplay(f, &soakConn{member: m, kind: "replay", flight: f, dialErr: err.Error()})
					return
				}
				deliverSoak(c, flight, p.s.expect(m, c.LocalAddr().String(), "replay", f))
			}()
		}
		wg.Wait()
	}()
}

// deliverSoak sends a flight on c as an attacker does, who holds no key:
// it waits for the server's first flight (the server has decided on the
// early data by then) and closes.
func deliverSoak(c net.Conn, flight []byte, sc *soakConn) {
	defer c.Close()
	sc.sentAt = time.Now() // real time: elapsed
	c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write(flight); err != nil {
		return
	}
	io.ReadAtLeast(c, make([]byte, 64), 1)
}

// scanFlight reports whether b is whole TLS records, and how many
// application_data records (early data, in a first flight) follow the
// first handshake record (the ClientHello).
func scanFlight(b []byte) (complete bool, early int) {
	hello := false
	for len(b) > 0 {
		if len(b) < 5 {
			return false, early
		}
		n := int(b[3])<<8 | int(b[4])
		if len(b) < 5+n {
			return false, early
		}
		switch b[0] {
		case 22: // handshake
			hello = true
		case 23: // application_data
			if hello {
				early++
			}
		}
		b = b[5+n:]
	}
	return hello, early
}
