package bench

import (
	"math/rand"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"golang.org/x/sys/unix"
)

// TestTurboContendersLoopback drives turbo and ztls-turbo (and the
// blocked variant) end to end on loopback through the real worker.
func TestTurboContendersLoopback(t *testing.T) {
	w := newLoopbackWorld(t)
	for _, name := range []string{"turbo", "ztls-turbo", "turbo-udpblocked", "ztls-turbo-udpblocked", "ztls-turbo-prefetch"} {
		for _, scen := range []string{"local-warm", "stub"} {
			t.Run(name+"/"+scen, func(t *testing.T) {
				c, cl := w.start(t, name, true)
				cl.Scenario = Scenarios[scen]
				if !strings.HasSuffix(name, "-udpblocked") {
					// The test checks the protocol, not its timing: on a
					// busy machine the default wait (2 ms on loopback)
					// can run out before the server's UDP flight.
					cl.TurboWait = 5 * time.Second
				}
				for i := 0; i < 2; i++ {
					s, err := w.visit(t, c, cl)
					if err != nil {
						t.Fatalf("visit %d: %v", i, err)
					}
					if s.FirstByte <= 0 || s.DNS > s.FirstByte {
						t.Fatalf("visit %d: inconsistent sample %+v", i, s)
					}
					if want := name == "ztls-turbo" || name == "ztls-turbo-udpblocked" || name == "ztls-turbo-prefetch"; s.Early != want {
						t.Errorf("visit %d: early data accepted %v, want %v", i, s.Early, want)
					}
				}
			})
		}
	}
}

func TestParseTurboJob(t *testing.T) {
	good := `{"addr":"www.ztls.test:443","mode":"ztls","resolver":"10.77.0.2:53","ca_file":"ca.pem","expect_len":5,"drop":0.05}`
	if _, err := parseTurboJob([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{
		`{"addr":"www.ztls.test:443","mode":"ztls","resolver":"10.77.0.2:53","expect_len":5,"drop":2}`,
		`{"addr":"www.ztls.test:443","mode":"quic","resolver":"10.77.0.2:53","expect_len":5}`,
		`{"addr":"www.ztls.test:443","mode":"tls","resolver":"10.77.0.2:53","expect_len":5,"extra":1}`,
		`{"addr":"www.ztls.test:443","mode":"tls","resolver":"10.77.0.2:53","expect_len":5,"wait_ms":-1}`,
		`not json`,
	} {
		if _, err := parseTurboJob([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// TestSmallScenarioTurbo: on a 20 ms link, turbo saves TCP's round trip
// against tls and ztls-turbo saves two (structure in RTT units, not speed).
func TestSmallScenarioTurbo(t *testing.T) {
	const rtt = 20 * time.Millisecond
	rep := runSmallScenario(t, 60*time.Second, Config{RTTs: []time.Duration{rtt}, Runs: 5,
		Protocols: []string{"tls", "turbo", "ztls-turbo"}, Scenarios: []string{"local-warm"}, Realtime: true})
	by := map[string]Result{}
	for _, r := range rep.Results {
		by[r.Protocol] = r
		if r.Runs < 4 {
			t.Fatalf("%s: only %d of 5 runs succeeded", r.Protocol, r.Runs)
		}
	}
	inRTT := func(d float64) float64 { return d / float64(rtt/time.Millisecond) }
	bounds := map[string][2]float64{"tls": {2.5, 3.6}, "turbo": {1.5, 2.6}, "ztls-turbo": {0.5, 1.6}}
	for name, b := range bounds {
		r := by[name]
		got := inRTT(r.FirstByte.Median - r.DNS.Median)
		if got < b[0] || got > b[1] {
			t.Errorf("%s: first response %.2f RTT after the lookup, want %.1f to %.1f", name, got, b[0], b[1])
		}
		t.Logf("%-10s dns %.2f first byte %.2f ms (%.2f RTT after DNS)", name, r.DNS.Median, r.FirstByte.Median, got)
	}
}

// The lossy wrapper drops incoming datagrams on raw reads too (turbo
// polls the end of its wait with them): with p = 1 a raw read finds
// nothing of a datagram that is there, with p = 0 it reads it.
func TestLossyUDPRawReads(t *testing.T) {
	for _, tc := range []struct {
		p    float64
		want bool
	}{{1, false}, {0, true}} {
		srv, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer srv.Close()
		raw, err := net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		c := &lossyUDP{Conn: raw, p: tc.p, rng: rand.New(rand.NewSource(1))}
		if _, err := srv.WriteToUDP([]byte("datagram"), raw.LocalAddr().(*net.UDPAddr)); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		waitQueued(t, raw, buf)
		rc, err := c.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_DONTWAIT)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if got := rerr == nil; got != tc.want {
			t.Errorf("p=%v: raw read got a datagram: %v (%q, %v), want %v", tc.p, got, buf[:n], rerr, tc.want)
		}
		if tc.want && string(buf[:n]) != "datagram" {
			t.Errorf("p=%v: raw read %q", tc.p, buf[:n])
		}
	}
}

// waitQueued returns once a datagram waits on c (peeked, not read).
func waitQueued(t *testing.T, c *net.UDPConn, buf []byte) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for end := clock.Now().Add(5 * time.Second); clock.Now().Before(end); time.Sleep(time.Millisecond) {
		var perr error
		if err := rc.Read(func(fd uintptr) bool {
			_, _, perr = unix.Recvfrom(int(fd), buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
			return true
		}); err != nil {
			t.Fatal(err)
		}
		if perr == nil {
			return
		}
	}
	t.Fatal("the datagram sent on loopback never arrived")
}
