package resolver

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestUDPDropsHostileReplies: before the true answer the server (or a
// spoofer) sends one bad datagram carrying a wrong address. The resolver
// must drop it and return the true answer.
func TestUDPDropsHostileReplies(t *testing.T) {
	const evil = "h.test. 60 IN A 6.6.6.6"
	spoofer, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer spoofer.Close()
	big := func(q *dns.Msg) []byte {
		m := reply(t, q, evil)
		for i := 0; i < 80; i++ {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: "h.test.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(6, 6, 6, byte(i))})
		}
		return pack(t, m)
	}
	tests := []struct {
		name string
		bad  func(pc net.PacketConn, from net.Addr, q *dns.Msg)
	}{
		{"wrong id", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			m := reply(t, q, evil)
			m.Id++
			pc.WriteTo(pack(t, m), from)
		}},
		{"wrong question", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			m := reply(t, q, "x.test. 60 IN A 6.6.6.6")
			m.Question[0].Name = "x.test."
			pc.WriteTo(pack(t, m), from)
		}},
		{"wrong source", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			spoofer.WriteTo(pack(t, reply(t, q, evil)), from)
		}},
		{"malformed", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			b := pack(t, reply(t, q, evil))
			pc.WriteTo(b[:len(b)-2], from)
		}},
		{"header only", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			b := pack(t, reply(t, q, evil))
			pc.WriteTo(b[:5], from)
		}},
		{"oversized", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			b := big(q)
			if len(b) <= UDPBufferSize {
				t.Fatalf("test reply of %d bytes is not oversized", len(b))
			}
			pc.WriteTo(b, from)
		}},
		{"query echoed", func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
			pc.WriteTo(pack(t, q), from)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
				tc.bad(pc, from, q)
				pc.WriteTo(pack(t, reply(t, q, "h.test. 60 IN A 192.0.2.7")), from)
			})
			r, err := New(Config{Servers: []string{addr}, CacheSize: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			a, err := r.Lookup(context.Background(), "h.test", dns.TypeA)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.RRs) != 1 || firstA(a) != "192.0.2.7" {
				t.Fatalf("got %v, want only 192.0.2.7", a.RRs)
			}
		})
	}
}

// TestUDPOnlyHostileTimesOut: when only bad datagrams come, the query fails
// with a clear error within its budget instead of accepting one.
func TestUDPOnlyHostileTimesOut(t *testing.T) {
	addr := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		m := reply(t, q, "h.test. 60 IN A 6.6.6.6")
		m.Id++
		pc.WriteTo(pack(t, m), from)
	})
	r, err := New(Config{Servers: []string{addr}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, err := r.Lookup(context.Background(), "h.test", dns.TypeA)
	if err == nil || a.Err == nil || len(a.RRs) != 0 || !strings.HasPrefix(err.Error(), "resolver: ") {
		t.Fatalf("Lookup = %+v, %v; want a resolver error", a, err)
	}
}

// TestUDPTruncatedRetriesOverTCP: a TC reply makes the resolver ask again
// over TCP at the same address.
func TestUDPTruncatedRetriesOverTCP(t *testing.T) {
	var udpQueries atomic.Int32
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
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			udpQueries.Add(1)
			q := new(dns.Msg)
			q.Unpack(buf[:n])
			m := reply(t, q)
			m.Truncated = true
			pc.WriteTo(pack(t, m), from)
		}
	}()
	srv := &streamServer{handle: func(s *session, q *dns.Msg, _ []byte) {
		m := reply(t, q)
		for i := 0; i < 100; i++ {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.IPv4(192, 0, 2, byte(i))})
		}
		s.send(t, m)
	}}
	serveStream(t, srv, ln)
	r, err := New(Config{Servers: []string{pc.LocalAddr().String()}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, err := r.Lookup(context.Background(), "big.test", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.RRs) != 100 || a.Transport != "tcp" || udpQueries.Load() != 1 {
		t.Fatalf("got %d records over %s after %d UDP queries", len(a.RRs), a.Transport, udpQueries.Load())
	}
}

// TestServerFailoverAndRcodes: a SERVFAIL from the first server moves on to
// the second; NXDOMAIN is an answer, not an error.
func TestServerFailoverAndRcodes(t *testing.T) {
	failing := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeServerFailure)
		pc.WriteTo(pack(t, m), from)
	})
	good := udpServer(t, func(pc net.PacketConn, from net.Addr, q *dns.Msg) {
		if q.Question[0].Name == "none.test." {
			m := new(dns.Msg)
			m.SetRcode(q, dns.RcodeNameError)
			pc.WriteTo(pack(t, m), from)
			return
		}
		pc.WriteTo(pack(t, reply(t, q, "ok.test. 60 IN A 192.0.2.9")), from)
	})
	r, err := New(Config{Servers: []string{failing, good}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	a, err := r.Lookup(context.Background(), "ok.test", dns.TypeA)
	if err != nil || firstA(a) != "192.0.2.9" {
		t.Fatalf("failover: %+v, %v", a, err)
	}
	a, err = r.Lookup(context.Background(), "none.test", dns.TypeA)
	if err != nil || a.Rcode != dns.RcodeNameError {
		t.Fatalf("nxdomain: %+v, %v", a, err)
	}
	// Only failing servers: their SERVFAIL is returned.
	r2, _ := New(Config{Servers: []string{failing}})
	defer r2.Close()
	a, err = r2.Lookup(context.Background(), "ok.test", dns.TypeA)
	if err != nil || a.Rcode != dns.RcodeServerFailure {
		t.Fatalf("servfail only: %+v, %v", a, err)
	}
}

func TestLookupBadInput(t *testing.T) {
	r, err := New(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Lookup(context.Background(), "", dns.TypeA); err == nil {
		t.Error("empty name accepted")
	}
	if _, err := r.Lookup(context.Background(), strings.Repeat("a", 64)+".test", dns.TypeA); err == nil {
		t.Error("64-octet label accepted")
	}
	if _, err := r.Exchange(context.Background(), new(dns.Msg)); err == nil {
		t.Error("query without question accepted")
	}
	if _, err := r.LookupService(context.Background(), "h.test", 0, nil); err == nil {
		t.Error("port 0 accepted")
	}
	r.Close()
	if _, err := r.Lookup(context.Background(), "h.test", dns.TypeA); err != ErrClosed {
		t.Errorf("after Close: %v", err)
	}
}
