package authority

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// addrEcho answers each query with a TXT record holding the client's
// address as the ResponseWriter reports it.
var addrEcho = HandlerFunc(func(_ context.Context, w ResponseWriter, r *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(r)
	m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: r.Question[0].Name, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 0},
		Txt: []string{w.RemoteAddr().String()}}}
	w.WriteMsg(m)
})

// The batched UDP path reads the sender of each datagram from the kernel
// and sends the answer back to it, on IPv4, IPv6 and dual-stack sockets
// (where IPv4 clients arrive as IPv4-mapped IPv6 addresses); the
// handler's RemoteAddr names the client. Several clients with queries in
// flight at once fill batches.
func TestUDPBatchFamilies(t *testing.T) {
	for _, tc := range []struct{ name, network, listen, client string }{
		{"ipv4", "udp4", "127.0.0.1:0", "127.0.0.1"},
		{"ipv6", "udp6", "[::1]:0", "::1"},
		{"dual-stack, ipv4 client", "udp", "[::]:0", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc, err := net.ListenPacket(tc.network, tc.listen)
			if err != nil {
				t.Skipf("no %s socket on this host: %v", tc.network, err)
			}
			s := &Server{Handler: addrEcho, RateLimit: &RateLimit{}}
			done := make(chan error, 1)
			go func() { done <- s.ServeUDP(pc) }()
			defer func() {
				s.Close()
				if err := <-done; !errors.Is(err, ErrServerClosed) {
					t.Errorf("ServeUDP returned %v, want ErrServerClosed", err)
				}
			}()
			port := pc.LocalAddr().(*net.UDPAddr).Port
			server := &net.UDPAddr{IP: net.ParseIP(tc.client), Port: port}
			var clients []*net.UDPConn
			for range 4 {
				c, err := net.DialUDP("udp", nil, server)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				clients = append(clients, c)
			}
			const perClient = 40
			for _, c := range clients {
				for i := range perClient {
					q := query("x.example.org.", dns.TypeTXT)
					q.Id = uint16(i)
					if _, err := c.Write(packQuery(t, q)); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, c := range clients {
				want := c.LocalAddr().String()
				seen := map[uint16]bool{}
				buf := make([]byte, 1500)
				for len(seen) < perClient {
					c.SetReadDeadline(time.Now().Add(5 * time.Second))
					n, err := c.Read(buf)
					if err != nil {
						t.Fatalf("%d of %d answers to %s: %v", len(seen), perClient, want, err)
					}
					m := new(dns.Msg)
					if err := m.Unpack(buf[:n]); err != nil || len(m.Answer) != 1 {
						t.Fatalf("answer %v, %v", m, err)
					}
					got := m.Answer[0].(*dns.TXT).Txt[0]
					if ap, err := netip.ParseAddrPort(got); err != nil || netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).String() != want {
						t.Fatalf("RemoteAddr %s, want %s", got, want)
					}
					seen[m.Id] = true
				}
			}
		})
	}
}
