package authority

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/dnsstream"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// testCert returns a server certificate for "dns.test" and 127.0.0.1 and
// a client config that trusts it.
func testCert(t testing.TB) (tls.Certificate, *tls.Config) {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"dns.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	return tls.Certificate{Certificate: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert},
		&tls.Config{RootCAs: ca.Pool(), ServerName: "dns.test", MinVersion: tls.VersionTLS13}
}

// addrs are where a started test server listens: DoT on tls with
// crypto/tls, on ztls with ztls's own TLS 1.3 engine (resumption with
// psk_ke allowed).
type addrs struct{ udp, tcp, tls, ztls string }

// ztlsServerConfig is the DoT configuration of ztls's engine for cert:
// rotating ticket keys, resumption without a key exchange for resolvers
// that offer it (psk_ke), with one for the others.
func ztlsServerConfig(cert tls.Certificate) *tls13.Config {
	return &tls13.Config{
		Certificates: []tls13.Certificate{{Chain: cert.Certificate, PrivateKey: cert.PrivateKey.(crypto.Signer), Leaf: cert.Leaf}},
		TicketKeys:   tls13.NewTicketKeys(time.Hour, nil),
		PSKModes:     []tls13.PSKMode{tls13.PSKModeKE, tls13.PSKModeDHEKE},
	}
}

// startServer serves s on loopback UDP, TCP and TLS with random ports.
func startServer(t testing.TB, s *Server) (addrs, *tls.Config) {
	t.Helper()
	cert, clientCfg := testCert(t)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 4)
	go func() { errs <- s.ServeUDP(pc) }()
	go func() { errs <- s.ServeTCP(tl) }()
	go func() {
		errs <- s.ServeTLS(sl, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}()
	go func() { errs <- s.ServeStream(tls13.NewListener(zl, ztlsServerConfig(cert)), TransportTLS) }()
	t.Cleanup(func() {
		s.Close()
		for range 4 {
			if err := <-errs; !errors.Is(err, ErrServerClosed) {
				t.Errorf("Serve returned %v, want ErrServerClosed", err)
			}
		}
	})
	return addrs{pc.LocalAddr().String(), tl.Addr().String(), sl.Addr().String(), zl.Addr().String()}, clientCfg
}

func TestServeTransports(t *testing.T) {
	s := testServer(t)
	a, tlsCfg := startServer(t, s)
	for _, tc := range []struct{ name, net, addr string }{
		{"udp", "udp", a.udp}, {"tcp", "tcp", a.tcp}, {"tls", "tcp-tls", a.tls}, {"tls-ztls-engine", "tcp-tls", a.ztls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &dns.Client{Net: tc.net, TLSConfig: tlsCfg, Timeout: 5 * time.Second}
			m, _, err := c.Exchange(ednsQuery("www.example.org.", dns.TypeA, 1232, false), tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if !m.Authoritative || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 2 {
				t.Fatalf("answer %v", m)
			}
			m, _, err = c.Exchange(query("nope.example.org.", dns.TypeA), tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			if m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
				t.Fatalf("answer %v", m)
			}
		})
	}
	// Over UDP without EDNS the big RRset is truncated; TCP carries it.
	m, _, err := (&dns.Client{Net: "udp", Timeout: 5 * time.Second}).Exchange(query("big.example.org.", dns.TypeTXT), a.udp)
	if err != nil || !m.Truncated {
		t.Fatalf("UDP: %v, %v", m, err)
	}
	m, _, err = (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(query("big.example.org.", dns.TypeTXT), a.tcp)
	if err != nil || m.Truncated || len(m.Answer) != 8 {
		t.Fatalf("TCP: %v, %v", m, err)
	}
}

// A datagram that gets no answer really gets none: with one worker, the
// first datagram back answers the good query sent after the bad ones.
func TestUDPMalformedNoReply(t *testing.T) {
	s := testServer(t)
	s.UDPWorkers = 1
	a, _ := startServer(t, s)
	c, err := net.Dial("udp", a.udp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	good := query("www.example.org.", dns.TypeA)
	goodRaw := packQuery(t, good)
	resp := append([]byte(nil), goodRaw...)
	resp[2] |= 0x80
	for _, bad := range [][]byte{{1}, goodRaw[:11], resp, []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")} {
		if _, err := c.Write(bad); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Write(goodRaw); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	m := new(dns.Msg)
	if err := m.Unpack(buf[:n]); err != nil || m.Id != good.Id {
		t.Fatalf("first datagram back: %v %v", m, err)
	}
}

// The T-DNS case: 100 queries pipelined on one DoT connection, a third of
// them held back by the handler until all the others were answered. The
// answers come back out of order and each matches its query by ID.
func TestPipelinedOutOfOrderTLS(t *testing.T) {
	const total = 100
	var zoneText strings.Builder
	zoneText.WriteString("@ 60 IN SOA ns hm 1 2 3 4 5\n")
	for i := range total {
		fmt.Fprintf(&zoneText, "q%d 60 IN TXT \"answer %d\"\n", i, i)
	}
	zones := mustZones(t, mustZone(t, "pipe.test.", zoneText.String()))
	release := make(chan struct{})
	var slowWaiting sync.WaitGroup
	slow := func(i int) bool { return i%3 == 0 }
	delaySlow := func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, w ResponseWriter, r *dns.Msg) {
			var i int
			fmt.Sscanf(r.Question[0].Name, "q%d.", &i)
			if slow(i) {
				slowWaiting.Done()
				select {
				case <-release:
				case <-ctx.Done():
					return
				}
			}
			next.ServeDNS(ctx, w, r)
		})
	}
	nSlow := 0
	for i := range total {
		if slow(i) {
			nSlow++
		}
	}
	slowWaiting.Add(nSlow)
	s := &Server{Handler: Chain(zones, CheckQuery, delaySlow)}
	a, tlsCfg := startServer(t, s)

	conn, err := tls.Dial("tcp", a.tls, tlsCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	sentID := make(map[uint16]int)
	var batch []byte
	for i := range total {
		q := ednsQuery(fmt.Sprintf("q%d.pipe.test.", i), dns.TypeTXT, 1232, false,
			&dns.EDNS0_TCP_KEEPALIVE{Code: dns.EDNS0TCPKEEPALIVE})
		q.Id = uint16(1000 + 7*i)
		sentID[q.Id] = i
		if batch, err = dnsstream.AppendFrame(batch, packQuery(t, q)); err != nil {
			t.Fatal(err)
		}
	}
	// All queries leave in one write, before any answer is read.
	if _, err := conn.Write(batch); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, dnsstream.MaxMessageSize)
	var order []int
	seen := make(map[uint16]bool)
	readOne := func() {
		t.Helper()
		raw, err := dnsstream.ReadFrame(conn, buf)
		if err != nil {
			t.Fatalf("after %d answers: %v", len(order), err)
		}
		m := new(dns.Msg)
		if err := m.Unpack(raw); err != nil {
			t.Fatal(err)
		}
		i, ok := sentID[m.Id]
		if !ok || seen[m.Id] {
			t.Fatalf("answer with unknown or repeated ID %d", m.Id)
		}
		seen[m.Id] = true
		want := fmt.Sprintf("q%d.pipe.test.", i)
		if m.Question[0].Name != want || len(m.Answer) != 1 ||
			m.Answer[0].(*dns.TXT).Txt[0] != fmt.Sprintf("answer %d", i) {
			t.Fatalf("ID %d answered with %v, want %s", m.Id, m, want)
		}
		ka := false
		for _, o := range m.IsEdns0().Option {
			_, ka = o.(*dns.EDNS0_TCP_KEEPALIVE)
		}
		if !ka {
			t.Fatalf("no keepalive option in %v", m.IsEdns0())
		}
		order = append(order, i)
	}
	for range total - nSlow {
		readOne()
	}
	for _, i := range order {
		if slow(i) {
			t.Fatalf("held-back query %d answered early", i)
		}
	}
	slowWaiting.Wait() // every held-back query was in its handler at once
	close(release)
	for range nSlow {
		readOne()
	}
	inOrder := true
	for k, i := range order {
		inOrder = inOrder && k == i
	}
	if inOrder || len(seen) != total {
		t.Fatalf("answers in order %v or missing (%d)", inOrder, len(seen))
	}
}

// dialStream opens a raw TCP connection to addr.
func dialStream(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// expectClosed reads until the server closes c, failing on any reply.
func expectClosed(t *testing.T, c net.Conn) {
	t.Helper()
	b := make([]byte, 512)
	n, err := c.Read(b)
	if n != 0 || !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && !isReset(err) {
		t.Fatalf("read %d bytes, %v; want the server to close without a reply", n, err)
	}
}

func isReset(err error) bool { return err != nil && strings.Contains(err.Error(), "reset") }

func TestStreamMalformed(t *testing.T) {
	s := testServer(t)
	s.MaxStreamMessageSize = 4096
	a, _ := startServer(t, s)
	good := packQuery(t, query("www.example.org.", dns.TypeA))
	frame := func(b []byte) []byte {
		f, err := dnsstream.AppendFrame(nil, b)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	asResponse := append([]byte(nil), good...)
	asResponse[2] |= 0x80
	closing := []struct {
		name string
		in   []byte
	}{
		{"giant length, body never sent", []byte{0xff, 0xff, 1, 2, 3}},
		{"length over the limit", []byte{0x10, 0x01}},
		{"zero length", []byte{0, 0}},
		{"frame shorter than a header", frame(good[:11])},
		{"a response", frame(asResponse)},
	}
	for _, tc := range closing {
		t.Run(tc.name, func(t *testing.T) {
			c := dialStream(t, a.tcp)
			if _, err := c.Write(tc.in); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, c)
		})
	}
	t.Run("truncated frame then half-close", func(t *testing.T) {
		c := dialStream(t, a.tcp)
		c.Write([]byte{0x00, 0x40, 1, 2, 3})
		c.(*net.TCPConn).CloseWrite()
		expectClosed(t, c)
	})
	t.Run("FORMERR keeps the connection", func(t *testing.T) {
		c := dialStream(t, a.tcp)
		loop := []byte{0xbe, 0xef, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1}
		c.Write(append(frame(loop), frame(good)...))
		buf := make([]byte, dnsstream.MaxMessageSize)
		for _, want := range []int{dns.RcodeFormatError, dns.RcodeSuccess} {
			raw, err := dnsstream.ReadFrame(c, buf)
			if err != nil {
				t.Fatal(err)
			}
			m := new(dns.Msg)
			if err := m.Unpack(raw); err != nil || m.Rcode != want {
				t.Fatalf("got %v, %v; want %s", m, err, dns.RcodeToString[want])
			}
		}
	})
}

// A client that half-closes after its queries still gets every answer.
func TestStreamHalfClose(t *testing.T) {
	a, _ := startServer(t, testServer(t))
	c := dialStream(t, a.tcp)
	var batch []byte
	for i := range 10 {
		q := query("www.example.org.", dns.TypeA)
		q.Id = uint16(i)
		batch, _ = dnsstream.AppendFrame(batch, packQuery(t, q))
	}
	c.Write(batch)
	c.(*net.TCPConn).CloseWrite()
	buf := make([]byte, dnsstream.MaxMessageSize)
	for range 10 {
		if _, err := dnsstream.ReadFrame(c, buf); err != nil {
			t.Fatal(err)
		}
	}
	expectClosed(t, c)
}

func TestIdleTimeout(t *testing.T) {
	s := testServer(t)
	s.IdleTimeout = 50 * time.Millisecond
	a, _ := startServer(t, s)
	// A TCP client that never sends, and a TLS client that never starts
	// its handshake, are both closed.
	expectClosed(t, dialStream(t, a.tcp))
	expectClosed(t, dialStream(t, a.tls))
}

// At MaxConns a newcomer takes the place of an idle connection; when
// every connection is busy it is refused.
func TestMaxConns(t *testing.T) {
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	zones := mustZones(t, mustZone(t, "example.org.", testZone))
	s := &Server{Handler: Chain(zones, CheckQuery, func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, w ResponseWriter, r *dns.Msg) {
			if r.Question[0].Name == "hold.example.org." {
				held <- struct{}{}
				select {
				case <-hold:
				case <-ctx.Done():
				}
			}
			next.ServeDNS(ctx, w, r)
		})
	})}
	s.MaxConns = 1
	a, _ := startServer(t, s)
	ask := func(c net.Conn, name string) error {
		f, _ := dnsstream.AppendFrame(nil, packQuery(t, query(name, dns.TypeA)))
		if _, err := c.Write(f); err != nil {
			return err
		}
		_, err := dnsstream.ReadFrame(c, make([]byte, 1024))
		return err
	}
	first := dialStream(t, a.tcp)
	if err := ask(first, "www.example.org."); err != nil {
		t.Fatal(err)
	}
	// The answer is on the wire a moment before its query stops counting
	// as in progress: wait until first is idle, as a later client would
	// find it.
	waitIdle(t, s)
	second := dialStream(t, a.tcp)
	if err := ask(second, "www.example.org."); err != nil {
		t.Fatalf("a newcomer at MaxConns with an idle connection open: %v", err)
	}
	expectClosed(t, first)

	// second is now busy with a query the handler holds: a third client
	// finds no idle connection to replace and is refused.
	f, _ := dnsstream.AppendFrame(nil, packQuery(t, query("hold.example.org.", dns.TypeA)))
	second.Write(f)
	<-held
	expectClosed(t, dialStream(t, a.tcp))
	if st := s.Stats(); st.ConnsEvicted != 1 || st.ConnsRefusedFull != 1 {
		t.Errorf("evicted %d, refused when full %d; want 1 and 1", st.ConnsEvicted, st.ConnsRefusedFull)
	}
	close(hold)
	if _, err := dnsstream.ReadFrame(second, make([]byte, 1024)); err != nil {
		t.Fatalf("the held answer: %v", err)
	}
}

// waitIdle waits until no stream connection of s has a query in progress.
func waitIdle(t *testing.T, s *Server) {
	t.Helper()
	for range 5000 {
		s.conns.mu.Lock()
		busy := 0
		for sc := range s.conns.conns {
			busy += int(sc.busy.Load())
		}
		s.conns.mu.Unlock()
		if busy == 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("a stream connection stayed busy after its answer")
}

func TestCloseCancelsHandlers(t *testing.T) {
	entered := make(chan struct{})
	cancelled := make(chan struct{})
	s := &Server{Handler: HandlerFunc(func(ctx context.Context, w ResponseWriter, r *dns.Msg) {
		close(entered)
		<-ctx.Done()
		close(cancelled)
	})}
	a, _ := startServer(t, s)
	c := dialStream(t, a.tcp)
	f, _ := dnsstream.AppendFrame(nil, packQuery(t, query("x.", dns.TypeA)))
	c.Write(f)
	<-entered
	s.Close()
	<-cancelled
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ServeTCP(l); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Serve after Close: %v", err)
	}
	if _, err := l.Accept(); err == nil {
		t.Fatal("listener still open after Serve on a closed server")
	}
}
