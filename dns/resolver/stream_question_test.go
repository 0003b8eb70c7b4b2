package resolver

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"
)

// TestStreamQuestionSkipsUDP: over UDP, a question marked Stream goes
// over TCP at once, beside the others' datagrams, and never over UDP (no
// truncated round trip first); the unmarked ones stay on UDP. The TXT
// answer is 3 kB, as a post-quantum Z-data answer (docs/ztls-spec.md,
// Section 9.7).
func TestStreamQuestionSkipsUDP(t *testing.T) {
	var udpTXT, udpA, tcpTXT atomic.Int32
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
	big := func(q *dns.Msg) *dns.Msg {
		m := reply(t, q)
		for i := 0; i < 12; i++ {
			m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60},
				Txt: []string{strings.Repeat(string(rune('a'+i)), 250)}})
		}
		return m
	}
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := new(dns.Msg)
			if q.Unpack(buf[:n]) != nil || len(q.Question) != 1 {
				continue
			}
			m := reply(t, q, q.Question[0].Name+" 60 IN A 192.0.2.1")
			if q.Question[0].Qtype == dns.TypeTXT {
				udpTXT.Add(1)
				m = reply(t, q)
				m.Truncated = true
			} else {
				udpA.Add(1)
			}
			pc.WriteTo(pack(t, m), from)
		}
	}()
	srv := &streamServer{handle: func(s *session, q *dns.Msg, _ []byte) {
		if q.Question[0].Qtype == dns.TypeTXT {
			tcpTXT.Add(1)
		}
		s.send(t, big(q))
	}}
	serveStream(t, srv, ln)
	r, err := New(Config{Servers: []string{pc.LocalAddr().String()}, CacheSize: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, stream := range []bool{true, false} {
		udpTXT.Store(0)
		qs := []Question{{Name: "h.test", Qtype: dns.TypeA}, {Name: "_ztls._443._tcp.h.test", Qtype: dns.TypeTXT, Stream: stream}}
		answers, err := r.LookupBatch(context.Background(), qs, nil)
		if err != nil {
			t.Fatal(err)
		}
		a, txt := answers[0], answers[1]
		if a.Err != nil || a.Transport != "udp" || firstA(a) != "192.0.2.1" || txt.Err != nil || txt.Transport != "tcp" || len(txt.RRs) != 12 {
			t.Fatalf("stream %v: A over %q (%v), TXT over %q with %d records (%v)", stream, a.Transport, a.Err, txt.Transport, len(txt.RRs), txt.Err)
		}
		want := int32(1) // without Stream: the truncated datagram first
		if stream {
			want = 0
		}
		if udpTXT.Load() != want {
			t.Fatalf("stream %v: %d TXT datagrams, want %d", stream, udpTXT.Load(), want)
		}
	}
	if tcpTXT.Load() != 2 || udpA.Load() != 2 {
		t.Fatalf("%d TXT queries over TCP, %d A over UDP; want 2 and 2", tcpTXT.Load(), udpA.Load())
	}
}
