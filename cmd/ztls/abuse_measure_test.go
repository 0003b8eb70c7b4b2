package main

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/tls13"
)

// TestMeasureServeIdleFlood measures `ztls serve` with its default bounds
// while one address holds thousands of silent connections: how many the
// server closes at once, and the handshake time of a crypto/tls client
// from another address before and during the flood. It is a measurement,
// not a check of speed: run it with
//
//	ZTLS_ABUSE_MEASURE=1 go test ./cmd/ztls -run TestMeasureServeIdleFlood -v
func TestMeasureServeIdleFlood(t *testing.T) {
	if os.Getenv("ZTLS_ABUSE_MEASURE") == "" {
		t.Skip("a measurement: set ZTLS_ABUSE_MEASURE=1")
	}
	const flood = 5000
	s := newSite(t)
	p := strconv.Itoa(s.port)
	cmd, _ := startLogCmd(t, "ZTLS on", "serve", "--listen", "127.0.0.1:"+p, "--zdata", s.zd, "--respond", "hello")
	defer stopCmd(cmd)
	addr := "127.0.0.1:" + p
	roots, err := tls13.LoadCertPool(s.ca)
	if err != nil {
		t.Fatal(err)
	}
	handshakes := func(n int) []time.Duration {
		var out []time.Duration
		for range n {
			d := &tls.Dialer{NetDialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}, Timeout: 10 * time.Second},
				Config: &tls.Config{ServerName: s.host, RootCAs: roots, MinVersion: tls.VersionTLS13}}
			start := clock.Now()
			c, err := d.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("client from 127.0.0.2: %v", err)
			}
			out = append(out, clock.Since(start))
			c.Close()
		}
		sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
		return out
	}
	q := func(d []time.Duration, f float64) time.Duration { return d[int(f*float64(len(d)-1))] }
	before := handshakes(200)

	var idle []net.Conn
	for range flood {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("after %d connections: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	// Within one second (the handshake timeout is 10 s): which are closed?
	var closedAtOnce atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(time.Second) // real time: a read deadline below
	for _, c := range idle {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(deadline)
			if _, err := io.Copy(io.Discard, c); err == nil || isReset(err) {
				closedAtOnce.Add(1)
			}
		}()
	}
	wg.Wait()
	during := handshakes(200)
	t.Logf("%d silent connections from 127.0.0.1: %d closed within 1 s (over --max-conns-per-ip 256)", flood, closedAtOnce.Load())
	t.Logf("crypto/tls handshakes from 127.0.0.2 (200 each): before p50 %v p99 %v; during p50 %v p99 %v max %v",
		q(before, 0.5), q(before, 0.99), q(during, 0.5), q(during, 0.99), during[len(during)-1])
	if status, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/status"); err == nil {
		for _, l := range strings.Split(string(status), "\n") {
			if len(l) > 6 && (l[:6] == "VmRSS:" || l[:6] == "VmHWM:") {
				t.Logf("server %s", l)
			}
		}
	}
}
