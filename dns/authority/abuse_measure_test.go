package authority

import (
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"
)

// The measurements of README.md's "Under abuse", kept out of the quick
// run: ZTLS_ABUSE_MEASURE=1 go test ./dns/authority/ -run Measure -v

func measuring(t *testing.T) {
	if os.Getenv("ZTLS_ABUSE_MEASURE") == "" {
		t.Skip("a measurement: set ZTLS_ABUSE_MEASURE=1 to run it")
	}
}

func openFDs() int {
	ents, _ := os.ReadDir("/proc/self/fd")
	return len(ents)
}

// latencies runs n DoT lookups from 127.0.1.2, each on a new connection,
// and returns their latencies and the number that failed.
func latencies(t *testing.T, n int, addr string, cfg *dns.Client) ([]time.Duration, int) {
	var lat []time.Duration
	fails := 0
	for range n {
		start := clock.Now()
		m, _, err := cfg.Exchange(query("www.example.org.", dns.TypeA), addr)
		if err != nil || len(m.Answer) != 2 {
			fails++
			continue
		}
		lat = append(lat, clock.Since(start))
	}
	slices.Sort(lat)
	return lat, fails
}

func pct(lat []time.Duration, p float64) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	return lat[min(len(lat)-1, int(float64(len(lat))*p))]
}

// (a) 5 000 idle connections from one address to the DoT port, held open
// (an attacker re-dials each one the server closes), while another
// client's DoT lookups are timed, each on a new connection.
func TestMeasureIdleConnFlood(t *testing.T) {
	measuring(t)
	const attackers, lookups = 5000, 300
	for _, cfg := range []struct {
		name  string
		apply func(*Server)
	}{
		{"defaults (32 per address, 128 per /24, MaxConns 1000, first query 3s)", func(*Server) {}},
		{"per-client caps off (MaxConns 1000: room made by closing idle ones)", func(s *Server) {
			s.MaxConnsPerAddr, s.MaxConnsPerPrefix = -1, -1
		}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			s := testServer(t)
			cfg.apply(s)
			a, tlsCfg := startServer(t, s)
			client := &dns.Client{Net: "tcp-tls", TLSConfig: tlsCfg, Timeout: 5 * time.Second,
				Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.1.2")}, Timeout: 5 * time.Second}}
			fdBase := openFDs()
			before, failsBefore := latencies(t, lookups, a.tls, client)

			// The attacker: 5 000 connections from 127.0.0.1, each re-dialed
			// when the server has closed it, until stopped.
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var mu sync.Mutex
			peakFDs := 0
			conns := make([]net.Conn, attackers)
			for i := range conns {
				conns[i], _ = dialFrom("127.0.0.1", a.tls)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				buf := make([]byte, 1)
				for {
					for i, c := range conns {
						select {
						case <-stop:
							return
						default:
						}
						if c != nil {
							c.SetReadDeadline(time.Now().Add(time.Microsecond))
							if _, err := c.Read(buf); isTimeout(err) {
								continue // still open
							}
							c.Close()
						}
						conns[i], _ = dialFrom("127.0.0.1", a.tls)
					}
					mu.Lock()
					peakFDs = max(peakFDs, openFDs())
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
				}
			}()
			time.Sleep(time.Second)
			during, failsDuring := latencies(t, lookups, a.tls, client)
			st := s.Stats()
			close(stop)
			wg.Wait()
			for _, c := range conns {
				if c != nil {
					c.Close()
				}
			}
			mu.Lock()
			defer mu.Unlock()
			fmt.Printf("idle flood [%s]: %d attacking connections held; fds in the process %d before, peak %d (limit 20000)\n",
				cfg.name, attackers, fdBase, peakFDs)
			fmt.Printf("  DoT lookups from 127.0.1.2, new connection each, %d: before p50 %v p99 %v max %v (%d failed); during p50 %v p99 %v max %v (%d failed)\n",
				lookups, pct(before, .5), pct(before, .99), pct(before, 1), failsBefore,
				pct(during, .5), pct(during, .99), pct(during, 1), failsDuring)
			fmt.Printf("  server: open %d, accepted %d, refused per address %d, per /24 %d, full %d, evicted %d, first-query timeouts %d\n",
				st.ConnsOpen, st.ConnsAccepted, st.ConnsRefusedAddr, st.ConnsRefusedPrefix, st.ConnsRefusedFull,
				st.ConnsEvicted, st.ConnsFirstQueryTimeout)
			if failsDuring > 0 {
				t.Errorf("%d DoT lookups failed during the flood", failsDuring)
			}
		})
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// (b) A flood of big-TXT and ANY queries over UDP from 50 addresses of one
// /24 (as spoofed sources of one victim network would be): bytes the
// server sends for the bytes it receives, with RRL off and on.
func TestMeasureRRLAmplification(t *testing.T) {
	measuring(t)
	const senders, perSender = 50, 1000
	for _, cfg := range []struct {
		name  string
		apply func(*Server)
	}{
		{"before: RRL off, no amplification cap", func(s *Server) { s.RateLimit = &RateLimit{}; s.MaxUDPAmplification = -1 }},
		{"RRL on (10/s, slip 2), no amplification cap", func(s *Server) { s.MaxUDPAmplification = -1 }},
		{"defaults: RRL on and amplification cap 10", func(*Server) {}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			s := testServer(t)
			cfg.apply(s)
			a, _ := startServer(t, s)
			big := packQuery(t, ednsQuery("big.example.org.", dns.TypeTXT, 4096, false))
			anyq := packQuery(t, ednsQuery("big.example.org.", dns.TypeANY, 4096, false))
			dst, _ := net.ResolveUDPAddr("udp", a.udp)
			var wg sync.WaitGroup
			start := clock.Now()
			for i := range senders {
				c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, byte(1+i))})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					for j := range perSender {
						q := big
						if j%4 == 3 {
							q = anyq
						}
						c.WriteToUDP(q, dst)
						// About 1 000 a second per sender, 50 000 in all:
						// what the server can read, so it is its answers
						// that are measured, not the kernel dropping queries.
						time.Sleep(time.Millisecond)
					}
				}()
			}
			wg.Wait()
			// Wait for the server to drain its socket.
			for last := uint64(0); ; {
				time.Sleep(200 * time.Millisecond)
				n := s.Stats().UDPQueries
				if n == last {
					break
				}
				last = n
			}
			st := s.Stats()
			fmt.Printf("UDP flood [%s]: %d queries sent in %v, %d read; %d bytes in, %d answers, %d bytes out: out/in %.2f; RRL dropped %d, slipped %d; amplification-truncated %d\n",
				cfg.name, senders*perSender, clock.Since(start).Round(time.Millisecond), st.UDPQueries, st.UDPBytesIn,
				st.UDPResponses, st.UDPBytesOut, float64(st.UDPBytesOut)/float64(st.UDPBytesIn),
				st.RRLDropped, st.RRLSlipped, st.AmplificationTruncated)
		})
	}
}
