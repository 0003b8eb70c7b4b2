package authority

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"
)

func TestClientOf(t *testing.T) {
	for _, tc := range []struct {
		addr   net.Addr
		ip     string
		prefix string
	}{
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.77"), Port: 1}, "192.0.2.77", "192.0.2.0/24"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.77"), Port: 1}, "192.0.2.77", "192.0.2.0/24"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:aa:bbcc::1"), Port: 1, Zone: "eth0"}, "2001:db8:aa:bbcc::1", "2001:db8:aa:bb00::/56"},
		{&net.UDPAddr{IP: net.ParseIP("127.0.0.2")}, "127.0.0.2", "127.0.0.0/24"},
	} {
		ip, p, ok := clientOf(tc.addr)
		if !ok || ip.String() != tc.ip || p.String() != tc.prefix {
			t.Errorf("clientOf(%v) = %v %v %v; want %s %s", tc.addr, ip, p, ok, tc.ip, tc.prefix)
		}
	}
	if _, _, ok := clientOf(&net.UnixAddr{Name: "/x", Net: "unix"}); ok {
		t.Error("a Unix address has an IP")
	}
}

// fakeConn is a streamConn for the table alone, from ip.
func fakeConn(ip string) *streamConn {
	sc := &streamConn{remote: &net.TCPAddr{IP: net.ParseIP(ip), Port: 1}}
	sc.addr, sc.prefix, sc.hasIP = clientOf(sc.remote)
	return sc
}

// The admission rules, step by step: per-address and per-network caps,
// and which idle connection makes room when the table is full.
func TestConnTableAdmit(t *testing.T) {
	ct := newConnTable(4, 2, 3)
	a1, a2, a3 := fakeConn("192.0.2.1"), fakeConn("192.0.2.1"), fakeConn("192.0.2.1")
	for _, c := range []*streamConn{a1, a2} {
		if v, _ := ct.admit(c); v != admitted {
			t.Fatalf("first two from one address: %v", v)
		}
	}
	if v, _ := ct.admit(a3); v != refusedAddr {
		t.Fatalf("third from one address: %v, want refusedAddr", v)
	}
	b1, b2 := fakeConn("192.0.2.2"), fakeConn("192.0.2.3")
	if v, _ := ct.admit(b1); v != admitted {
		t.Fatal(v)
	}
	if v, _ := ct.admit(b2); v != refusedPrefix {
		t.Fatalf("fourth from one /24: %v, want refusedPrefix", v)
	}
	c1 := fakeConn("198.51.100.1")
	if v, _ := ct.admit(c1); v != admitted {
		t.Fatal(v)
	}
	// Full (4): a1 a2 b1 from 192.0.2.0/24, c1 alone. a1 and c1 have
	// sent queries; a2 and b1 never did. a2 is the older of the fresh ones.
	a1.queried.Store(true)
	c1.queried.Store(true)
	newcomer := fakeConn("203.0.113.9")
	v, victim := ct.admit(newcomer)
	if v != admitted || victim != a2 {
		t.Fatalf("admit when full: %v, victim %p; want a2 %p (fresh, crowded network, oldest)", v, victim, a2)
	}
	// Now a1 b1 c1 newcomer. Fresh: b1 and the newcomer; b1's network is
	// more crowded. Busy connections are never chosen.
	b1.busy.Store(1)
	v, victim = ct.admit(fakeConn("203.0.113.10"))
	if v != admitted || victim != newcomer {
		t.Fatalf("victim %p, want the fresh idle newcomer %p", victim, newcomer)
	}
	// a1, b1 (busy), c1, and the last one (fresh). Make the last one busy
	// too: the victim is the queried connection of the more crowded
	// network, a1, over c1.
	for c := range ct.conns {
		if c.prefix.String() == "203.0.113.0/24" {
			c.busy.Store(1)
		}
	}
	if _, victim = ct.admit(fakeConn("203.0.113.11")); victim != a1 {
		t.Fatalf("victim %p, want a1 %p", victim, a1)
	}
	for c := range ct.conns {
		c.busy.Store(1)
	}
	if v, _ := ct.admit(fakeConn("203.0.113.12")); v != refusedFull {
		t.Fatalf("all busy: %v, want refusedFull", v)
	}
	// Releasing an evicted connection is harmless; releasing a live one
	// frees its counts.
	ct.release(a1)
	ct.release(b1)
	if ct.open() != 3 || ct.byPrefix[b1.prefix] != 0 || ct.byAddr[a1.addr] != 0 {
		t.Fatalf("after release: %d open, %v, %v", ct.open(), ct.byPrefix, ct.byAddr)
	}
}

// dialFrom dials addr over TCP from the loopback address src.
func dialFrom(src, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.Dial("tcp", addr)
}

// askFrom sends one query over TCP or DoT from src and checks the answer.
func askFrom(t *testing.T, src, network, addr string, tlsCfg *tls.Config) (time.Duration, error) {
	t.Helper()
	c := &dns.Client{Net: network, TLSConfig: tlsCfg, Timeout: 5 * time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}}
	m, rtt, err := c.Exchange(query("www.example.org.", dns.TypeA), addr)
	if err != nil {
		return 0, err
	}
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 {
		return 0, errors.New("wrong answer: " + m.String())
	}
	return rtt, nil
}

// waitOpen polls until the server holds n stream connections: accepting
// runs apart from the client's dial.
func waitOpen(t *testing.T, s *Server, n int) {
	t.Helper()
	deadline := clock.Now().Add(10 * time.Second)
	for s.Stats().ConnsOpen != n {
		if clock.Now().After(deadline) {
			t.Fatalf("server holds %d connections, want %d", s.Stats().ConnsOpen, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The attack of point 11: one address opens hundreds of connections to the
// TCP and the DoT port and sends nothing. It gets MaxConnsPerAddr of them,
// those are closed after FirstQueryTimeout, and another client (another
// address of the same /24, and one of another /24) is answered over TCP and
// DoT throughout.
func TestIdleFloodFromOneAddress(t *testing.T) {
	s := testServer(t)
	s.MaxConns = 64
	s.MaxConnsPerAddr = 8
	s.MaxConnsPerPrefix = 16
	s.FirstQueryTimeout = 500 * time.Millisecond
	s.IdleTimeout = time.Minute
	a, tlsCfg := startServer(t, s)

	const perPort = 150
	var attack []net.Conn
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, port := range []string{a.tcp, a.tls} {
		for i := range perPort {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := dialFrom("127.0.0.1", port)
				if err != nil {
					return // the listen backlog overflowed: refused all the same
				}
				if port == a.tls && i%2 == 0 {
					// Half the DoT ones finish their handshake, when
					// admitted, and then send nothing either.
					tc := tls.Client(c, tlsCfg)
					tc.SetDeadline(time.Now().Add(5 * time.Second))
					tc.Handshake()
					c = tc
				}
				mu.Lock()
				attack = append(attack, c)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range attack {
			c.Close()
		}
	})
	for _, src := range []string{"127.0.0.2", "127.0.1.2"} {
		if _, err := askFrom(t, src, "tcp", a.tcp, nil); err != nil {
			t.Errorf("TCP from %s during the flood: %v", src, err)
		}
		if _, err := askFrom(t, src, "tcp-tls", a.tls, tlsCfg); err != nil {
			t.Errorf("DoT from %s during the flood: %v", src, err)
		}
	}
	// Every attacking connection ends: refused at once, or closed when
	// its first query did not come.
	for _, c := range attack {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) && !isReset(err) {
			t.Fatalf("attacking connection: read %d, %v; want it closed", n, err)
		}
	}
	st := s.Stats()
	if st.ConnsRefusedAddr == 0 || st.ConnsFirstQueryTimeout == 0 || st.ConnsFirstQueryTimeout > 8 {
		t.Errorf("refused for the address %d, closed for no first query %d; want some, and at most 8 timeouts",
			st.ConnsRefusedAddr, st.ConnsFirstQueryTimeout)
	}
	if st.ConnsAccepted < 8+4 || st.ConnsEvicted != 0 {
		t.Errorf("accepted %d, evicted %d", st.ConnsAccepted, st.ConnsEvicted)
	}
}

// The same flood from a /24 of attackers: the network holds at most
// MaxConnsPerPrefix, and a client of another network is answered.
func TestIdleFloodFromOneNetwork(t *testing.T) {
	s := testServer(t)
	s.MaxConnsPerAddr = 4
	s.MaxConnsPerPrefix = 8
	s.FirstQueryTimeout = time.Minute
	s.IdleTimeout = time.Minute
	a, tlsCfg := startServer(t, s)
	var attack []net.Conn
	t.Cleanup(func() {
		for _, c := range attack {
			c.Close()
		}
	})
	for i := 1; i <= 4; i++ {
		src := netip.AddrFrom4([4]byte{127, 0, 0, byte(i)}).String()
		for range 4 {
			c, err := dialFrom(src, a.tls)
			if err != nil {
				t.Fatal(err)
			}
			attack = append(attack, c)
		}
	}
	// The server accepts in order; wait until it has decided on all 16.
	deadline := clock.Now().Add(10 * time.Second)
	for st := s.Stats(); st.ConnsAccepted+st.ConnsRefusedPrefix < 16; st = s.Stats() {
		if clock.Now().After(deadline) {
			t.Fatalf("accepted %d, refused %d of 16", st.ConnsAccepted, st.ConnsRefusedPrefix)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if st := s.Stats(); st.ConnsOpen != 8 || st.ConnsRefusedPrefix != 8 {
		t.Fatalf("open %d, refused for the /24 %d; want 8 and 8", st.ConnsOpen, st.ConnsRefusedPrefix)
	}
	if _, err := askFrom(t, "127.0.0.9", "tcp-tls", a.tls, tlsCfg); err == nil {
		t.Error("a ninth connection from the full /24 was answered")
	}
	if _, err := askFrom(t, "127.0.1.9", "tcp-tls", a.tls, tlsCfg); err != nil {
		t.Errorf("DoT from another /24: %v", err)
	}
}

// With no per-client caps, one address fills MaxConns with idle
// connections: newcomers take the place of those, and a client that has
// queried keeps its connection while the attacker goes on.
func TestIdleFloodFillsTable(t *testing.T) {
	s := testServer(t)
	s.MaxConns = 32
	s.MaxConnsPerAddr = -1
	s.MaxConnsPerPrefix = -1
	s.FirstQueryTimeout = time.Minute
	s.IdleTimeout = time.Minute
	a, tlsCfg := startServer(t, s)
	var attack []net.Conn
	t.Cleanup(func() {
		for _, c := range attack {
			c.Close()
		}
	})
	flood := func(n int) {
		for range n {
			c, err := dialFrom("127.0.0.1", a.tcp)
			if err != nil {
				t.Fatal(err)
			}
			attack = append(attack, c)
		}
	}
	flood(32)
	waitOpen(t, s, 32)
	// A DoT client connects into the full table and keeps its connection.
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.1.2")}, Timeout: 5 * time.Second}
	raw, err := d.Dial("tcp", a.tls)
	if err != nil {
		t.Fatal(err)
	}
	dc := &dns.Conn{Conn: tls.Client(raw, tlsCfg)}
	defer dc.Close()
	exchange := func() error {
		dc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := dc.WriteMsg(query("www.example.org.", dns.TypeA)); err != nil {
			return err
		}
		m, err := dc.ReadMsg()
		if err == nil && len(m.Answer) != 2 {
			err = errors.New("wrong answer")
		}
		return err
	}
	if err := exchange(); err != nil {
		t.Fatalf("DoT into a full table of idle connections: %v", err)
	}
	flood(64)
	deadline := clock.Now().Add(10 * time.Second)
	for s.Stats().ConnsEvicted < 1+64 {
		if clock.Now().After(deadline) {
			t.Fatalf("evicted %d, want 65", s.Stats().ConnsEvicted)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := exchange(); err != nil {
		t.Fatalf("DoT on the same connection after 64 more attacking ones: %v", err)
	}
	if _, err := askFrom(t, "127.0.1.3", "tcp", a.tcp, nil); err != nil {
		t.Fatalf("TCP from another client: %v", err)
	}
	if st := s.Stats(); st.ConnsEvicted < 1+64 || st.ConnsOpen > 32 {
		t.Errorf("evicted %d, open %d", st.ConnsEvicted, st.ConnsOpen)
	}
}
