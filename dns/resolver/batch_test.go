package resolver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsstream"
)

// batchQuestions are n A questions b0.batch.test. ... answered by
// batchAddr(i).
func batchQuestions(n int) []Question {
	qs := make([]Question, n)
	for i := range qs {
		qs[i] = Question{Name: fmt.Sprintf("b%d.batch.test", i), Qtype: dns.TypeA}
	}
	return qs
}

func batchIndex(q *dns.Msg) int {
	var i int
	fmt.Sscanf(q.Question[0].Name, "b%d.", &i)
	return i
}

func batchAddr(i int) string { return fmt.Sprintf("192.0.2.%d", 10+i) }

func batchReply(t testing.TB, q *dns.Msg) *dns.Msg {
	return reply(t, q, fmt.Sprintf("%s 60 IN A %s", q.Question[0].Name, batchAddr(batchIndex(q))))
}

// checkBatch asserts that answers[i] is the true answer to question i and
// that each saw every answer once.
func checkBatch(t *testing.T, answers []*Answer, err error, seen []string, transport string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		if a.Err != nil || len(a.RRs) != 1 || firstA(a) != batchAddr(i) || a.Transport != transport {
			t.Fatalf("answer %d: %v over %q, err %v; want only %s over %s", i, a.RRs, a.Transport, a.Err, batchAddr(i), transport)
		}
	}
	if len(seen) != len(answers) {
		t.Fatalf("callback saw %d answers, want %d", len(seen), len(answers))
	}
}

// TestLookupBatchUDPHostileAndOutOfOrder: the four questions of a batch
// leave from one socket with distinct IDs. Before the true answers, which
// come in reverse order, the batch receives a reply carrying one
// question's ID but another's question, a reply with an ID no query
// carries, a spoofed reply from another address (right ID and question),
// and an oversized reply. Each is dropped; every question gets its own
// true answer, and the callback sees them as they land.
func TestLookupBatchUDPHostileAndOutOfOrder(t *testing.T) {
	const n = 4
	spoofer, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spoofer.Close()
	evil := func(q *dns.Msg) *dns.Msg { return reply(t, q, q.Question[0].Name+" 60 IN A 6.6.6.6") }
	var (
		mu    sync.Mutex
		held  []*dns.Msg
		froms = map[string]bool{}
		ids   = map[uint16]bool{}
	)
	addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		mu.Lock()
		defer mu.Unlock()
		held = append(held, q)
		froms[from.String()] = true
		ids[q.Id] = true
		if len(held) < n {
			return
		}
		// Question 0's name under question 1's ID.
		swapped := evil(held[0])
		swapped.Id = held[1].Id
		pc.WriteTo(pack(t, swapped), from)
		unknown := evil(held[2])
		for ids[unknown.Id] {
			unknown.Id++
		}
		pc.WriteTo(pack(t, unknown), from)
		spoofer.WriteTo(pack(t, evil(held[3])), from)
		big := evil(held[0])
		for i := 0; i < 80; i++ {
			big.Answer = append(big.Answer, &dns.A{Hdr: dns.RR_Header{Name: held[0].Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(6, 6, 6, byte(i))})
		}
		pc.WriteTo(pack(t, big), from)
		for i := len(held) - 1; i >= 0; i-- {
			pc.WriteTo(pack(t, batchReply(t, held[i])), from)
		}
	})
	r, err := New(Config{Servers: []string{addr}, CacheSize: -1, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen []string
	answers, err := r.LookupBatch(context.Background(), batchQuestions(n), func(a Answer) {
		seen = append(seen, a.Name)
	})
	checkBatch(t, answers, err, seen, "udp")
	mu.Lock()
	defer mu.Unlock()
	if len(froms) != 1 || len(ids) != n {
		t.Fatalf("batch used %d source addresses and %d distinct IDs, want 1 and %d", len(froms), len(ids), n)
	}
	for i := range seen {
		if want := fmt.Sprintf("b%d.batch.test.", n-1-i); seen[i] != want {
			t.Fatalf("callback order %v, want the order of arrival (reverse)", seen)
		}
	}
}

// TestLookupBatchUDPChunks: a batch larger than one socket carries is
// split over several sockets, and every question is answered.
func TestLookupBatchUDPChunks(t *testing.T) {
	const n = 3*maxUDPBatch - 2
	var mu sync.Mutex
	froms := map[string]int{}
	addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		mu.Lock()
		froms[from.String()]++
		mu.Unlock()
		pc.WriteTo(pack(t, batchReply(t, q)), from)
	})
	r, err := New(Config{Servers: []string{addr}, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen []string
	answers, err := r.LookupBatch(context.Background(), batchQuestions(n), func(a Answer) { seen = append(seen, a.Name) })
	checkBatch(t, answers, err, seen, "udp")
	mu.Lock()
	defer mu.Unlock()
	if len(froms) != 3 {
		t.Fatalf("%d source addresses for %d questions, want 3", len(froms), n)
	}
	for from, k := range froms {
		if k > maxUDPBatch {
			t.Fatalf("%s carried %d queries, more than %d", from, k, maxUDPBatch)
		}
	}
}

// TestLookupBatchStreamHostileAndOutOfOrder: over TCP and TLS, a batch's
// queries arrive on one connection; the server first sends a reply with
// one query's ID but another's question, a reply with an unknown ID and a
// frame too short for a header, then the true answers in reverse order.
func TestLookupBatchStreamHostileAndOutOfOrder(t *testing.T) {
	const n = 5
	for _, tr := range []Transport{TCP, TLS} {
		t.Run(string(tr), func(t *testing.T) {
			var pki *testPKI
			if tr == TLS {
				pki = newTestPKI(t)
			}
			var (
				mu   sync.Mutex
				held []*dns.Msg
			)
			srv := startStreamServer(t, pki, func(s *session, q *dns.Msg, _ []byte) {
				mu.Lock()
				defer mu.Unlock()
				held = append(held, q)
				if len(held) < n {
					return
				}
				swapped := reply(t, held[0], held[0].Question[0].Name+" 60 IN A 6.6.6.6")
				swapped.Id = held[1].Id
				s.send(t, swapped)
				unknown := reply(t, held[2], held[2].Question[0].Name+" 60 IN A 6.6.6.6")
				for busy := true; busy; {
					unknown.Id++
					busy = false
					for _, h := range held {
						busy = busy || h.Id == unknown.Id
					}
				}
				s.send(t, unknown)
				s.conn.Write([]byte{0, 3, 1, 2, 3})
				for i := len(held) - 1; i >= 0; i-- {
					s.send(t, batchReply(t, held[i]))
				}
				held = nil
			})
			cfg := Config{Servers: []string{srv.Addr}, Transport: tr, CacheSize: -1}
			if tr == TLS {
				cfg.TLSConfig = &tls.Config{RootCAs: pki.Pool, ServerName: "server.test"}
			}
			r, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			for round := 0; round < 2; round++ {
				var seen []string
				answers, err := r.LookupBatch(context.Background(), batchQuestions(n), func(a Answer) { seen = append(seen, a.Name) })
				checkBatch(t, answers, err, seen, string(tr))
				if seen[0] != fmt.Sprintf("b%d.batch.test.", n-1) {
					t.Fatalf("callback order %v, want the order of arrival", seen)
				}
			}
			if srv.conns.Load() != 1 {
				t.Fatalf("%d connections, want 1", srv.conns.Load())
			}
		})
	}
}

// TestLookupBatchOneWrite: over DNS over TLS, a service lookup's six
// queries leave in one write: the server's first read (which returns at
// most one TLS record) holds all six frames, padded to 128-octet blocks.
func TestLookupBatchOneWrite(t *testing.T) {
	pki := newTestPKI(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pki.Cert}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	firstRead := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 1<<16)
		n, err := c.Read(buf)
		if err != nil {
			firstRead <- -1
			return
		}
		data := buf[:n]
		var qs []*dns.Msg
		for len(data) > 0 {
			frame, err := dnsstream.ReadFrame(sliceReader(&data), make([]byte, 1<<16))
			if err != nil {
				break
			}
			if len(frame)%PaddingBlock != 0 {
				t.Errorf("query of %d octets is not padded", len(frame))
			}
			q := new(dns.Msg)
			if q.Unpack(frame) == nil {
				qs = append(qs, q)
			}
		}
		firstRead <- len(qs)
		for i := len(qs) - 1; i >= 0; i-- {
			m := new(dns.Msg)
			m.SetRcode(qs[i], dns.RcodeNameError)
			b, _ := m.Pack()
			frame, _ := dnsstream.AppendFrame(nil, b)
			c.Write(frame)
		}
		c.Read(buf) // until the client closes
	}()
	r := dotResolver(t, pki, ln.Addr().String(), nil)
	res, err := r.LookupService(context.Background(), "w.test", 443, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := <-firstRead; got != 6 {
		t.Fatalf("first read held %d queries, want 6", got)
	}
	for _, a := range res.Answers() {
		if a.Err != nil || a.Rcode != dns.RcodeNameError {
			t.Fatalf("%s %s: rcode %d, err %v", a.Name, dns.TypeToString[a.Qtype], a.Rcode, a.Err)
		}
	}
}

type bytesReader struct{ b *[]byte }

func sliceReader(b *[]byte) bytesReader { return bytesReader{b} }

func (r bytesReader) Read(p []byte) (int, error) {
	if len(*r.b) == 0 {
		return 0, errors.New("end of data")
	}
	n := copy(p, *r.b)
	*r.b = (*r.b)[n:]
	return n, nil
}

// TestLookupBatchMixed: in one batch, a bad name fails alone, a cached
// answer lands from the cache, a truncated UDP answer is asked again over
// TCP, and the others come over UDP.
func TestLookupBatchMixed(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	port := pc.LocalAddr().(*net.UDPAddr).Port
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		t.Skipf("TCP port %d taken: %v", port, err)
	}
	var udpQueries atomic.Int32
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			udpQueries.Add(1)
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil {
				continue
			}
			m := batchReply(t, q)
			if batchIndex(q) == 2 {
				m = reply(t, q)
				m.Truncated = true
			}
			pc.WriteTo(pack(t, m), from)
		}
	}()
	srv := &streamServer{handle: func(s *session, q *dns.Msg, _ []byte) { s.send(t, batchReply(t, q)) }}
	serveStream(t, srv, ln)
	r, err := New(Config{Servers: []string{pc.LocalAddr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	qs := batchQuestions(5)
	if a, err := r.Lookup(context.Background(), qs[1].Name, dns.TypeA); err != nil || firstA(a) != batchAddr(1) {
		t.Fatalf("warming the cache: %v %v", a, err)
	}
	qs[3].Name = "bad..name"
	answers, err := r.LookupBatch(context.Background(), qs, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range answers {
		switch i {
		case 1:
			if !a.FromCache || firstA(a) != batchAddr(1) {
				t.Errorf("answer 1 not from the cache: %+v", a)
			}
		case 2:
			if a.Err != nil || a.Transport != "tcp" || firstA(a) != batchAddr(2) {
				t.Errorf("truncated answer not asked over TCP: %+v", a)
			}
		case 3:
			if a.Err == nil || a.Reply != nil {
				t.Errorf("bad name answered: %+v", a)
			}
		default:
			if a.Err != nil || a.Transport != "udp" || a.FromCache || firstA(a) != batchAddr(i) {
				t.Errorf("answer %d: %+v", i, a)
			}
		}
	}
	// One warming query, then 0, 2 and 4 in the batch.
	if got := udpQueries.Load(); got != 4 {
		t.Fatalf("%d UDP queries, want 4", got)
	}
}

// TestLookupBatchContextEnds: when the caller's context ends before a
// silent server answers, LookupBatch returns at once with the context's
// error, and every answer carries an error.
func TestLookupBatchContextEnds(t *testing.T) {
	for _, tr := range []Transport{UDP, TCP} {
		t.Run(string(tr), func(t *testing.T) {
			servers := []string{udpServer(t, func(net.PacketConn, net.Addr, *dns.Msg) {})}
			if tr == TCP {
				servers = []string{startStreamServer(t, nil, func(*session, *dns.Msg, []byte) {}).Addr}
			}
			r, err := New(Config{Servers: servers, Transport: tr, Timeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			answers, err := r.LookupBatch(ctx, batchQuestions(3), nil)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want the context's", err)
			}
			for i, a := range answers {
				if a == nil || a.Err == nil || a.Reply != nil {
					t.Fatalf("answer %d: %+v", i, a)
				}
			}
		})
	}
}

// TestLookupBatchReconnect: the server answers two of a batch's four
// queries and closes the connection; the other two are sent again on a
// new connection.
func TestLookupBatchReconnect(t *testing.T) {
	var mu sync.Mutex
	onFirst := 0
	srv := startStreamServer(t, nil, func(s *session, q *dns.Msg, _ []byte) {
		mu.Lock()
		defer mu.Unlock()
		if s.n == 1 {
			onFirst++
			if onFirst <= 2 {
				s.send(t, batchReply(t, q))
			} else if onFirst == 4 {
				s.conn.Close()
			}
			return
		}
		s.send(t, batchReply(t, q))
	})
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TCP, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen []string
	answers, err := r.LookupBatch(context.Background(), batchQuestions(4), func(a Answer) { seen = append(seen, a.Name) })
	checkBatch(t, answers, err, seen, "tcp")
	if srv.conns.Load() != 2 {
		t.Fatalf("%d connections, want 2", srv.conns.Load())
	}
}

// TestLookupBatchUDPIPv6: batches work to a server on ::1 (recvmmsg and
// sendmmsg through the IPv6 socket).
func TestLookupBatchUDPIPv6(t *testing.T) {
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) == nil {
				pc.WriteTo(pack(t, batchReply(t, q)), from)
			}
		}
	}()
	r, err := New(Config{Servers: []string{pc.LocalAddr().String()}, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var seen []string
	answers, err := r.LookupBatch(context.Background(), batchQuestions(3), func(a Answer) { seen = append(seen, a.Name) })
	checkBatch(t, answers, err, seen, "udp")
}

// FuzzStreamReplies feeds arbitrary bytes, as the server's side of a
// stream, to a connection with a batch of two queries in flight: the
// frame reader and the matching must never panic or hang, and whatever
// they accept must answer the query it is reported for.
func FuzzStreamReplies(f *testing.F) {
	q := new(dns.Msg)
	q.SetQuestion("f.test.", dns.TypeA)
	ok := reply(f, q, "f.test. 60 IN A 192.0.2.1")
	frame, _ := dnsstream.AppendFrame(nil, pack(f, ok))
	f.Add(frame)
	f.Add([]byte{0, 0, 0, 3, 1, 2, 3})
	f.Add(append([]byte{0xff, 0xff}, frame...))
	f.Add(append(append([]byte{0, 0}, frame...), frame[:5]...))
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := net.Pipe()
		defer server.Close()
		c := newStreamConn(client, false, time.Minute)
		defer c.fail(ErrClosed)
		go func() {
			// Answer with the fuzz bytes, first rewriting the IDs of
			// well-formed frames to the query's so that they can match.
			buf := make([]byte, dnsstream.MaxMessageSize)
			qf, err := dnsstream.ReadFrame(server, buf)
			if err != nil || len(qf) < 2 {
				return
			}
			out := append([]byte(nil), data...)
			if len(out) >= 4 {
				out[2], out[3] = qf[0], qf[1]
			}
			// Drain the second query while answering, then hang up so
			// that inputs which answer neither query end at once on EOF
			// instead of at the deadline (slow execs make the fuzzer
			// report "context deadline exceeded" at the end of -fuzztime).
			go io.Copy(io.Discard, server)
			server.Write(out)
			server.Close()
		}()
		m1, m2 := q.Copy(), q.Copy()
		m2.Question[0].Qtype = dns.TypeAAAA
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		c.exchange(ctx, []*dns.Msg{m1, m2}, func(n int, reply *dns.Msg, err error) {
			if err == nil && (reply == nil || reply.Question[0].Qtype != []uint16{dns.TypeA, dns.TypeAAAA}[n]) {
				t.Fatalf("query %d accepted %v", n, reply)
			}
		})
	})
}

// TestStreamServerClosesIdle: the server closes the connection after
// answering; nobody reads an idle connection, so the next lookup finds
// out when it uses it, and is sent again on a new connection.
func TestStreamServerClosesIdle(t *testing.T) {
	srv := startStreamServer(t, nil, func(s *session, q *dns.Msg, _ []byte) {
		s.send(t, batchReply(t, q))
		s.conn.Close()
	})
	r, err := New(Config{Servers: []string{srv.Addr}, Transport: TCP, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i := 0; i < 3; i++ {
		time.Sleep(20 * time.Millisecond) // let the close arrive first (either way the lookup must succeed)
		var seen []string
		answers, err := r.LookupBatch(context.Background(), batchQuestions(1), func(a Answer) { seen = append(seen, a.Name) })
		checkBatch(t, answers, err, seen, "tcp")
	}
	if srv.conns.Load() != 3 {
		t.Fatalf("%d connections, want 3", srv.conns.Load())
	}
}
