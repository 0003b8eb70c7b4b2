package turbo_test

import (
	"context"
	"crypto/rand"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// tableWorld is a TurboTLS server (TCP and UDP on one port of 127.0.0.1)
// for the table flood; it works for tests and benchmarks alike.
type tableWorld struct {
	w        *lab.World
	srv      *turbo.TLSServer
	cpc      *countingPC
	tcp, udp netip.AddrPort
	stop     func()
}

func startTableWorld(tb testing.TB, w *lab.World, opt turbo.Config) *tableWorld {
	tb.Helper()
	tw := &tableWorld{w: w, srv: turbo.NewTLSServer(w.ServerTLS, nil, opt)}
	tw.tcp, tw.stop = serveTurbo(tb, tw.srv, func(pc net.PacketConn) net.PacketConn {
		tw.cpc = newCountingPC(pc)
		return tw.cpc
	}, echoOnce)
	tw.udp = tw.tcp
	return tw
}

// echoOnce finishes the handshake and echoes one read back.
func echoOnce(sc *turbo.ServerConn) {
	defer sc.Close()
	sc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := sc.Handshake(); err != nil {
		return
	}
	buf := make([]byte, 256)
	n, err := sc.Read(buf)
	if err != nil {
		return
	}
	sc.Write(buf[:n])
	sc.CloseWrite()
}

// tableAttack is one kind of flood datagram, built for a fresh random id.
type tableAttack struct {
	name string
	make func(id turbo.ConnID) []byte
}

// tableAttacks are the datagrams that must not fill the table: what a
// spoofer can send cheaply, short of a complete ClientHello.
func tableAttacks(tb testing.TB, w *lab.World) []tableAttack {
	eng := tls13.NewClientEngine(&tls13.Config{ServerName: w.Host, InsecureSkipVerify: true, KeyShareGroups: []uint16{tls13.X25519}})
	if err := eng.Start(nil, nil, nil); err != nil {
		tb.Fatal(err)
	}
	hello := append([]byte(nil), eng.Output()...)
	long := make([]byte, 3*turbo.MaxFragment) // a flight that never completes
	copy(long, hello[:5])
	long[3], long[4] = byte((len(long)-5)>>8), byte(len(long)-5)
	copy(long[5:], hello[5:])
	long[6], long[7], long[8] = 0, byte((len(long)-9)>>8), byte(len(long)-9)
	dg := func(d turbo.Datagram, pad int) []byte {
		b, err := turbo.AppendDatagram(nil, d, pad)
		if err != nil {
			tb.Fatal(err)
		}
		return b
	}
	return []tableAttack{
		// The reported attack: a 21-byte header, no flight bytes.
		{"short", func(id turbo.ConnID) []byte {
			return dg(turbo.Datagram{Type: turbo.TypeRequest, ID: id, FlightLength: 3000}, 0)
		}},
		// A whole ClientHello, unpadded.
		{"unpadded-hello", func(id turbo.ConnID) []byte {
			return dg(turbo.Datagram{Type: turbo.TypeRequest, ID: id, FlightLength: len(hello), Fragment: hello}, 0)
		}},
		// Padded, but a middle fragment: no start of a flight.
		{"middle-fragment", func(id turbo.ConnID) []byte {
			return dg(turbo.Datagram{Type: turbo.TypeRequest, ID: id, FlightLength: len(long), Offset: turbo.MaxFragment, Fragment: long[turbo.MaxFragment : 2*turbo.MaxFragment]}, turbo.MaxDatagram)
		}},
		// Padded, but flight bytes that are no TLS record.
		{"padded-junk", func(id turbo.ConnID) []byte {
			junk := make([]byte, 600)
			rand.Read(junk)
			junk[0] = 0x17
			return dg(turbo.Datagram{Type: turbo.TypeRequest, ID: id, FlightLength: len(junk), Fragment: junk}, turbo.MaxDatagram)
		}},
		// Padded, the first fragment of a ClientHello whose rest never
		// comes: it qualifies, and is evicted first.
		{"first-fragment-only", func(id turbo.ConnID) []byte {
			return dg(turbo.Datagram{Type: turbo.TypeRequest, ID: id, FlightLength: len(long), Fragment: long[:turbo.MaxFragment]}, turbo.MaxDatagram)
		}},
	}
}

// floodSources opens n sockets on 127.0.0.0/8 addresses from addr(i).
func floodSources(tb testing.TB, n int, addr func(i int) netip.Addr) []*net.UDPConn {
	var socks []*net.UDPConn
	for i := 0; i < n; i++ {
		s, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(addr(i), 0)))
		if err != nil {
			for _, s := range socks {
				s.Close()
			}
			tb.Fatal(err)
		}
		socks = append(socks, s)
	}
	return socks
}

// tableFloodResult is what legitimate clients saw during a table flood.
type tableFloodResult struct {
	dials, turbo, answered int
	reasons                []string
	flooded                int // datagrams the attackers sent
	filledAt, stats        turbo.Stats
	worstRatio             float64
}

// tableFlood floods tw's table from 64 sources in 127.0.0.0/24 (the
// legitimate client's own prefix: 127.0.0.1 dials) and from 64 sources in
// 64 other /24 prefixes, each sending one datagram of tableAttacks (in
// turn) under a fresh id every 20 ms (6400 datagrams/s in all), while the legitimate client dials dials times in a
// row. The flood starts a moment before the first dial, so the table is
// already full when legitimate clients arrive.
func tableFlood(tb testing.TB, tw *tableWorld, maxEntries, dials int) tableFloodResult {
	attacks := tableAttacks(tb, tw.w)
	same := floodSources(tb, 64, func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(2 + i)}) })
	other := floodSources(tb, 64, func(i int) netip.Addr { return netip.AddrFrom4([4]byte{127, 89, byte(i), 1}) })
	socks := append(same, other...)
	target := net.UDPAddrFromAddrPort(tw.udp)
	ctx, cancel := context.WithCancel(context.Background())
	var res tableFloodResult
	var wg sync.WaitGroup
	var once sync.Once
	stopFlood := func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			for _, s := range socks {
				s.Close()
			}
		})
	}
	defer stopFlood()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for round := 0; ctx.Err() == nil; round++ {
			for si, s := range socks {
				var id turbo.ConnID
				rand.Read(id[:])
				a := attacks[(si+round)%len(attacks)]
				if _, err := s.WriteToUDP(a.make(id), target); err == nil {
					res.flooded++
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	// Let the flood fill the table first (at most 5 s).
	for i := 0; i < 500; i++ {
		if st := tw.srv.Stats(); st.PeakEntries >= maxEntries || st.Full > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	res.filledAt = tw.srv.Stats()
	for i := 0; i < dials; i++ {
		res.dials++
		dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
		cfg := w2client(tw.w)
		r, err := turbo.Dial(dctx, tw.tcp, tw.udp, &turbo.ClientConfig{TLS: cfg, Wait: 300 * time.Millisecond})
		if err != nil {
			dcancel()
			res.reasons = append(res.reasons, err.Error())
			continue
		}
		if r.Turbo {
			res.turbo++
		} else {
			res.reasons = append(res.reasons, r.FallbackReason)
		}
		r.Conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := r.Conn.Write([]byte("ping")); err == nil {
			if got, _ := io.ReadAll(r.Conn); string(got) == "ping" && r.Turbo {
				res.answered++
			}
		}
		r.Conn.Close()
		dcancel()
	}
	stopFlood()
	res.stats = tw.srv.Stats()
	tw.cpc.mu.Lock()
	for src, in := range tw.cpc.in {
		if r := float64(tw.cpc.out[src]) / float64(in); r > res.worstRatio {
			res.worstRatio = r
		}
	}
	tw.cpc.mu.Unlock()
	return res
}

func w2client(w *lab.World) *tls13.Config {
	c := w.ClientTLS()
	c.ServerName = w.Host
	return c
}

// TestTableFloodLegitimateClientsStayTurbo: 128 spoofed sources, half in
// the legitimate client's own /24, flood the table with short, unpadded,
// junk and fragment-only datagrams at the server's default limits; every
// legitimate dial still gets the server's flight over UDP, and the 3x
// rule, the cap and the per-prefix limit hold.
func TestTableFloodLegitimateClientsStayTurbo(t *testing.T) {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	tw := startTableWorld(t, w, turbo.Config{})
	defer tw.stop()
	r := tableFlood(t, tw, 1024, 8)
	t.Logf("%d of %d dials turbo (%d answered); flood %d datagrams; worst source %.2fx; when the first dial began %+v; at the end %+v",
		r.turbo, r.dials, r.answered, r.flooded, r.worstRatio, r.filledAt, r.stats)
	if r.filledAt.PeakEntries < 1024 {
		t.Fatalf("the flood did not fill the table: %+v", r.filledAt)
	}
	if r.turbo != r.dials || r.answered != r.dials {
		t.Fatalf("legitimate clients denied turbo during the flood: %d of %d turbo, %d answered: %q", r.turbo, r.dials, r.answered, r.reasons)
	}
	if r.stats.Unqualified == 0 || r.stats.Evicted == 0 || r.stats.Linked != int64(r.dials) {
		t.Fatalf("short datagrams made state, or nothing was evicted: %+v", r.stats)
	}
	if r.worstRatio > 3 {
		t.Fatalf("a source got %.2fx the bytes it sent", r.worstRatio)
	}
	if r.stats.PeakEntries > 1024 {
		t.Fatalf("table grew to %d entries", r.stats.PeakEntries)
	}
}

// BenchmarkTableFlood measures the share of legitimate dials answered
// over UDP (turbo) while the table is flooded (make bench-turbo).
func BenchmarkTableFlood(b *testing.B) {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < b.N; i++ {
		tw := startTableWorld(b, w, turbo.Config{})
		r := tableFlood(b, tw, 1024, 32)
		tw.stop()
		b.ReportMetric(float64(r.turbo)/float64(r.dials)*100, "turbo-%")
		b.ReportMetric(float64(r.answered), "answered")
		b.ReportMetric(float64(r.stats.PeakEntries), "peak-entries")
		b.ReportMetric(r.worstRatio, "worst-source-out/in")
		b.ReportMetric(float64(r.flooded), "flood-datagrams")
	}
}

// fakeHello is a flight of size bytes (at least 50) that passes
// CheckOpening: one handshake record holding a ClientHello whose body is
// zeros after its legacy_version.
func fakeHello(size int) []byte {
	b := make([]byte, size)
	b[0], b[1], b[2] = 22, 3, 1
	b[3], b[4] = byte((size-5)>>8), byte(size-5)
	b[5] = 1
	b[6], b[7], b[8] = byte((size-9)>>16), byte((size-9)>>8), byte(size-9)
	b[9], b[10] = 3, 3
	return b
}
