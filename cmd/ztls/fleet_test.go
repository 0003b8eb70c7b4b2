package main

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// startRedis runs a throwaway redis-server on a loopback port, with
// extra configuration arguments (e.g. "--requirepass", PASSWORD).
func startRedis(t *testing.T, extra ...string) (addr string, stop func()) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make deps installs it)")
	}
	port := freePort(t)
	cmd := exec.Command("redis-server", append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // gone with a killed test too
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Kill()
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	addr = "127.0.0.1:" + strconv.Itoa(port)
	for i := 0; i < 200; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr, stop
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("redis-server did not start")
	return "", nil
}

// ztlsFlight builds a genuine ZTLS first flight (ClientHello + early
// request) from the site's Z-data, as an attacker on the path captures it:
// with the record a client takes from what the directory publishes, on
// the clock of the servers the test starts (procNow). Taking the last
// record valid with the 60 s allowance, as it did, sent the next period's
// twin in the last minute of each hour, a key no server takes before its
// not-before (tls13.ZDataLive).
func ztlsFlight(t *testing.T, s *site, early []byte) []byte {
	t.Helper()
	d, err := zdata.LoadDir(s.zd)
	if err != nil {
		t.Fatal(err)
	}
	now := procNow(t)
	var txt [][]string
	for _, r := range d.Records(now) {
		txt = append(txt, r.TXT())
	}
	sel := zdata.NewSelector(s.host, s.port, zdata.SelectOptions{Roots: s.authority.Pool(), Now: now})
	sel.StartChains([]*dns.TLSA{zdata.TLSA(s.host, s.port, d.Service.Cert.Chain[0], time.Minute)}, nil)
	rec, leaf, err := sel.Select(txt)
	if err != nil {
		t.Fatalf("no record a client would use: %v", err)
	}
	e := tls13.NewClientEngine(&tls13.Config{ServerName: s.host, InsecureSkipVerify: true, Time: func() time.Time { return procNow(t) }})
	if err := e.Start(nil, rec.Offer(leaf), early); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), e.Output()...)
}

// procNow is the time on the clock of the ztls processes the test starts
// now: this process's, moved by the difference between ZTLS_CLOCK_OFFSET
// as they inherit it (a test may set it with t.Setenv) and as this process
// read it at its start.
func procNow(t *testing.T) time.Time {
	t.Helper()
	self, err := clock.Offset()
	if err != nil {
		t.Fatal(err)
	}
	var child time.Duration
	if v := os.Getenv(clock.EnvOffset); v != "" {
		if child, err = time.ParseDuration(v); err != nil {
			t.Fatalf("%s=%q: %v", clock.EnvOffset, v, err)
		}
	}
	return clock.Now().Add(child - self)
}

// offsetReading is clock.OffsetReading, as ZTLS_CLOCK_OFFSET's value.
func offsetReading(t *testing.T, mmss string) string {
	t.Helper()
	d, err := clock.OffsetReading(mmss)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func deliver(t *testing.T, addr string, flight []byte) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	c.Write(flight)
	io.ReadAtLeast(c, make([]byte, 64), 1)
}

// A fleet of two servers (127.0.0.1 and 127.0.0.2, same port, same Z-data
// directory) shares one strike register on Redis: a captured first flight
// reaches an application once at most; with Redis down early data is
// refused but connections are still served.
func TestCLIFleetSharedStrikeRegister(t *testing.T) {
	s := newSite(t)
	redis, stopRedis := startRedis(t)
	p := strconv.Itoa(s.port)
	args := []string{"serve", "--zdata", s.zd, "--respond", "hello", "-v", "--strike-register", "redis://" + redis, "--early-window", "3s"}
	_, logA := startLog(t, "ZTLS on", append(args, "--listen", "127.0.0.1:"+p)...)
	_, logB := startLog(t, "ZTLS on", append(args, "--listen", "127.0.0.2:"+p)...)
	// The register vouches for nothing that may predate its memory (a
	// fresh Redis counts as lost data): a flight is refused until its
	// window can no longer reach back before that, W plus the fleet's
	// clock-skew bound (1 s) after the start. (A window of 3 s leaves
	// room for a loaded machine between the starts and the flights.)
	deliver(t, "127.0.0.1:"+p, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	deliver(t, "127.0.0.2:"+p, ztlsFlight(t, s, []byte("GET /transfer?amount=100")))
	logA.waitFor(t, "the strike register started after this ClientHello")
	logB.waitFor(t, "the strike register started after this ClientHello")
	time.Sleep(4100 * time.Millisecond)

	flight := ztlsFlight(t, s, []byte("GET /transfer?amount=100"))
	deliver(t, "127.0.0.1:"+p, flight)
	logA.waitFor(t, "ZTLS accepted")
	deliver(t, "127.0.0.2:"+p, flight)
	logB.waitFor(t, "rejected (replayed ClientHello)")
	deliver(t, "127.0.0.1:"+p, flight)
	logA.waitFor(t, "rejected (replayed ClientHello)")

	// Redis down: fail closed, but still serve.
	stopRedis()
	zoneFile := s.dir + "/ztls.test.zone"
	writeFile(t, zoneFile, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zoneFile, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	rep := s.connect(t, logAttr(line, "addr"))
	if rep.Mode != "tls" || rep.ResponseBytes != 5 {
		t.Fatalf("with Redis down: mode %s (%s), %d bytes", rep.Mode, rep.FallbackReason, rep.ResponseBytes)
	}
	logA.waitFor(t, "strike register unavailable")
}

// A directory served with a shared register (Redis) counts as served:
// a server that later serves it alone does not take its memory as
// complete (the fleet's acceptances are in Redis, not on disk).
func TestCLISharedServingThenAlone(t *testing.T) {
	s := newSite(t)
	redis, _ := startRedis(t)
	p := strconv.Itoa(s.port)
	_, _, cmd := startProc(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+p, "--zdata", s.zd, "--respond", "hello", "--strike-register", "redis://"+redis)
	stopCmd(cmd)
	_, _, cmd = startProc(t, "did not stop cleanly", "serve", "--listen", "127.0.0.1:"+p, "--zdata", s.zd, "--respond", "hello")
	stopCmd(cmd)
}
