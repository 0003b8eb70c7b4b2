package turbo_test

import (
	"context"
	"crypto/rand"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/turbo/internal/wire"
)

// countingPC tallies the bytes a server receives from and sends to each
// source address: the measurement is outside the server's own books.
type countingPC struct {
	net.PacketConn
	mu      sync.Mutex
	in, out map[netip.AddrPort]int
}

func newCountingPC(pc net.PacketConn) *countingPC {
	return &countingPC{PacketConn: pc, in: map[netip.AddrPort]int{}, out: map[netip.AddrPort]int{}}
}

func (c *countingPC) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := c.PacketConn.ReadFrom(b)
	if ua, ok := a.(*net.UDPAddr); ok && n > 0 {
		c.mu.Lock()
		c.in[ua.AddrPort()] += n
		c.mu.Unlock()
	}
	return n, a, err
}

func (c *countingPC) WriteTo(b []byte, a net.Addr) (int, error) {
	n, err := c.PacketConn.WriteTo(b, a)
	if ua, ok := a.(*net.UDPAddr); ok && n > 0 {
		c.mu.Lock()
		c.out[ua.AddrPort()] += n
		c.mu.Unlock()
	}
	return n, err
}

// floodResult is what a spoofed-source flood did to a server.
type floodResult struct {
	sources, sent         int
	in, out               int
	worstRatio            float64
	stats                 turbo.Stats
	heapBefore, heapAfter uint64
}

// flood sends, from addrs×ports sockets on 127.0.0.0/8, complete
// ClientHello flights, padding requests and junk under random connection
// ids, and never answers: the sockets stand for spoofed victims.
func flood(t testing.TB, w *lab.World, cfg turbo.Config, addrs, ports, flightsPer, paddingPer int) floodResult {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cpc := newCountingPC(pc)
	srv := turbo.NewTLSServer(w.ServerTLS, func([]byte, tls13.ConnectionState) []byte { return []byte("answer") }, cfg)
	done := make(chan struct{})
	go func() { srv.ServeUDP(cpc); close(done) }()
	defer func() { srv.Close(); <-done }()
	target := pc.LocalAddr().(*net.UDPAddr)

	eng := tls13.NewClientEngine(&tls13.Config{ServerName: w.Host, InsecureSkipVerify: true})
	if err := eng.Start(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	hello := append([]byte(nil), eng.Output()...)
	// A small ClientHello (X25519 only) sent unpadded: three times its
	// size is less than one full response datagram.
	small := tls13.NewClientEngine(&tls13.Config{ServerName: w.Host, InsecureSkipVerify: true, KeyShareGroups: []tls13.CurveID{tls13.X25519}})
	if err := small.Start(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	smallHello := append([]byte(nil), small.Output()...)

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	res := floodResult{heapBefore: ms.HeapInuse}
	var socks []*net.UDPConn
	defer func() {
		for _, s := range socks {
			s.Close()
		}
	}()
	for a := 0; a < addrs; a++ {
		ip := netip.AddrFrom4([4]byte{127, 77, byte(a / 250), byte(a%250 + 1)})
		for p := 0; p < ports; p++ {
			s, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
			if err != nil {
				t.Fatal(err)
			}
			socks = append(socks, s)
		}
	}
	res.sources = len(socks)
	junk := make([]byte, 700)
	for round := 0; round < max(flightsPer, paddingPer); round++ {
		for si, s := range socks {
			var id turbo.ConnID
			rand.Read(id[:])
			var dg [][]byte
			if round < flightsPer && (si+round)%2 == 0 {
				dg, _ = wire.Fragment(wire.TypeRequest, id, hello)
			} else if round < flightsPer {
				// Unpadded: 3x its size is less than one response datagram.
				d, err := wire.AppendDatagram(nil, wire.Datagram{Type: wire.TypeRequest, ID: id, FlightLength: len(smallHello), Fragment: smallHello}, 0)
				if err != nil {
					t.Fatal(err)
				}
				dg = append(dg, d)
			}
			if round < paddingPer {
				rand.Read(id[:])
				dg = append(dg, wire.PaddingRequest(id, 3000))
				rand.Read(junk)
				dg = append(dg, junk)
			}
			for _, d := range dg {
				if _, err := s.WriteToUDP(d, target); err == nil {
					res.sent++
				}
			}
		}
		time.Sleep(time.Millisecond) // let the socket buffer drain
	}
	// Wait until the server has read and answered what it will: its
	// counters stop moving.
	last := turbo.Stats{}
	for i := 0; i < 200; i++ {
		time.Sleep(20 * time.Millisecond)
		st := srv.Stats()
		if st.DatagramsIn == last.DatagramsIn && st.DatagramsOut == last.DatagramsOut && st.FlightErrors == last.FlightErrors && i > 5 {
			break
		}
		last = st
	}
	runtime.ReadMemStats(&ms)
	res.heapAfter = ms.HeapInuse
	res.stats = srv.Stats()
	cpc.mu.Lock()
	for src, in := range cpc.in {
		out := cpc.out[src]
		res.in += in
		res.out += out
		if r := float64(out) / float64(in); r > res.worstRatio {
			res.worstRatio = r
		}
	}
	for src := range cpc.out {
		if cpc.in[src] == 0 {
			t.Errorf("sent to %v, which never sent anything", src)
		}
	}
	cpc.mu.Unlock()
	return res
}

func TestSpoofedFloodAmplification(t *testing.T) {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cfg := turbo.Config{MaxEntries: 64, TTL: 300 * time.Millisecond, SourceRate: 5, SourceBurst: 3}
	r := flood(t, w, cfg, 16, 4, 4, 4)
	t.Logf("%d sources, %d datagrams sent; server read %d B, sent %d B (%.2fx overall, worst source %.2fx); peak entries %d, peak reassembly %d B; heap %d -> %d KiB; stats %+v",
		r.sources, r.sent, r.in, r.out, float64(r.out)/float64(max(r.in, 1)), r.worstRatio, r.stats.PeakEntries, r.stats.PeakReassemblyBytes,
		r.heapBefore>>10, r.heapAfter>>10, r.stats)
	if r.worstRatio > 3 {
		t.Fatalf("a source got %.2fx the bytes it sent", r.worstRatio)
	}
	if r.out == 0 || r.stats.DatagramsOut == 0 {
		t.Fatal("the server answered no flight: the flood did not exercise it")
	}
	if r.stats.PeakEntries > cfg.MaxEntries {
		t.Fatalf("table grew to %d entries (cap %d)", r.stats.PeakEntries, cfg.MaxEntries)
	}
	if r.stats.PeakReassemblyBytes > cfg.MaxEntries*16<<10 {
		t.Fatalf("reassembly held %d bytes", r.stats.PeakReassemblyBytes)
	}
	if r.stats.RateLimited == 0 || r.stats.Dropped == 0 {
		t.Fatalf("per-source limit never applied: %+v", r.stats)
	}
}

// An entry nobody links to is gone after its TTL.
func TestUnlinkedEntriesExpire(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	released := make(chan any, 4)
	srv := turbo.NewServer(turbo.Config{
		Flight: func(_ context.Context, _ netip.AddrPort, f []byte) ([]byte, any, error) {
			return append([]byte("re:"), f...), "state", nil
		},
		Release: func(st any) { released <- st },
		Now:     clock, TTL: time.Second,
	})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeUDP(pc)
	defer srv.Close()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, _ := wire.NewConnID()
	hello := fakeHello(100)
	dg, _ := wire.Fragment(wire.TypeRequest, id, hello)
	c.Write(dg[0])
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	d, err := wire.ParseDatagram(buf[:n])
	if err != nil || string(d.Fragment) != "re:"+string(hello) || d.ID != id {
		t.Fatalf("%v %q", err, d.Fragment)
	}
	if st := srv.Stats(); st.Entries != 1 {
		t.Fatalf("entries %d", st.Entries)
	}
	mu.Lock()
	now = now.Add(1500 * time.Millisecond)
	mu.Unlock()
	srv.Sweep()
	if st := srv.Stats(); st.Entries != 0 || st.Expired != 1 {
		t.Fatalf("after the TTL: %+v", st)
	}
	if st := <-released; st != "state" {
		t.Fatalf("released %v", st)
	}
	if _, ok := srv.Link(id, netip.MustParseAddr("127.0.0.1")); ok {
		t.Fatal("linked an expired entry")
	}
}

func BenchmarkSpoofedFlood(b *testing.B) {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	for i := 0; i < b.N; i++ {
		r := flood(b, w, turbo.Config{}, 64, 4, 8, 8)
		b.ReportMetric(float64(r.out)/float64(max(r.in, 1)), "out/in")
		b.ReportMetric(r.worstRatio, "worst-source-out/in")
		b.ReportMetric(float64(r.stats.PeakEntries), "peak-entries")
		b.ReportMetric(float64(int64(r.heapAfter)-int64(r.heapBefore))/1024, "heap-growth-KiB")
	}
}

// The 3x rule and the one-datagram-per-request rule, step by step. The
// opening request is padded (CheckOpening) and releases one datagram of a
// big flight; tiny requests then add one datagram of credit each but
// hardly any bytes, until the 3x budget holds the next datagram back; a
// padded request releases it.
func TestThreeTimesRule(t *testing.T) {
	big := make([]byte, 4*wire.MaxFragment)
	srv := turbo.NewServer(turbo.Config{Flight: func(context.Context, netip.AddrPort, []byte) ([]byte, any, error) { return big, nil, nil }})
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeUDP(pc)
	defer srv.Close()
	c, err := net.Dial("udp", pc.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, _ := wire.NewConnID()
	hello := fakeHello(100)
	open, _ := wire.Fragment(wire.TypeRequest, id, hello)
	c.Write(open[0])
	waitFor(t, func() bool { return srv.Stats().DatagramsOut == 1 })
	in := len(open[0])
	tiny, _ := wire.AppendDatagram(nil, wire.Datagram{Type: wire.TypeRequest, ID: id, FlightLength: len(hello)}, 0)
	padded := wire.PaddingRequest(id, len(hello))
	// Out after each request: 2400 <= 3x1221, 3600 <= 3x1242, then 4800
	// > 3x1263 is held until the padded request.
	for i, step := range []struct {
		req  []byte
		want int64
		held int64
	}{{tiny, 2, 0}, {tiny, 3, 0}, {tiny, 3, 1}, {padded, 4, 1}} {
		c.Write(step.req)
		in += len(step.req)
		waitFor(t, func() bool { return srv.Stats().DatagramsIn == int64(i+2) })
		st := srv.Stats()
		if st.DatagramsOut != step.want || st.AmplificationHeld != step.held || st.BytesOut > 3*int64(in) {
			t.Fatalf("after request %d: %d datagrams (%d held), %d bytes out for %d in", i+2, st.DatagramsOut, st.AmplificationHeld, st.BytesOut, in)
		}
	}
}

// waitFor polls cond (no timing assertion: it fails only after 10 s).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 1000; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached in 10 s")
}
