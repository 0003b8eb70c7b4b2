package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/testbed/hosts"
)

// checkThroughputStructure: both modes complete every handshake, in the
// rounds asked for; turbo's all came over UDP and linked on the server;
// tls used no UDP; the pool never ran more than its workers.
func checkThroughputStructure(t *testing.T, rep *ThroughputReport, cfg ThroughputConfig) {
	t.Helper()
	if len(rep.Results) != 2 || rep.Results[0].Mode != ModeTLS || rep.Results[1].Mode != ModeTurbo {
		t.Fatalf("results %+v", rep.Results)
	}
	for _, res := range rep.Results {
		if res.Handshakes != cfg.Handshakes || res.Errors != 0 {
			t.Errorf("%s: %d handshakes, %d errors; want %d, 0", res.Mode, res.Handshakes, res.Errors, cfg.Handshakes)
		}
		if len(res.Rounds) != cfg.Rounds || len(res.Samples) != cfg.Handshakes {
			t.Errorf("%s: %d rounds, %d samples", res.Mode, len(res.Rounds), len(res.Samples))
		}
		sum := 0
		for _, r := range res.Rounds {
			sum += r.Handshakes
		}
		if sum != res.Handshakes || res.PerSecond <= 0 || res.Steady <= 0 || res.Latency.Median <= 0 {
			t.Errorf("%s: rounds add to %d, %.1f/s (steady %.1f), median %.2f ms", res.Mode, sum, res.PerSecond, res.Steady, res.Latency.Median)
		}
		// The server finished a handshake for every one the clients saw.
		if res.TCPConns != cfg.Handshakes {
			t.Errorf("%s: server finished %d TCP handshakes, want %d", res.Mode, res.TCPConns, cfg.Handshakes)
		}
	}
	tl, tu := rep.Results[0], rep.Results[1]
	if tl.Turbo != 0 || tl.UDPFlight != 0 {
		t.Errorf("tls used UDP: %d turbo handshakes, %d flights", tl.Turbo, tl.UDPFlight)
	}
	if tu.Turbo != cfg.Handshakes || tu.UDPFlight != cfg.Handshakes || rep.UDP.Linked != int64(cfg.Handshakes) {
		t.Errorf("turbo: %d over UDP, %d flights computed by the pool, %d linked; want %d each", tu.Turbo, tu.UDPFlight, rep.UDP.Linked, cfg.Handshakes)
	}
	if rep.PeakBusyWorkers < 1 || rep.PeakBusyWorkers > cfg.Workers {
		t.Errorf("peak busy workers %d, pool of %d", rep.PeakBusyWorkers, cfg.Workers)
	}
	if rep.Ratio <= 0 || rep.RatioWhole <= 0 {
		t.Errorf("ratios %v, %v", rep.Ratio, rep.RatioWhole)
	}
}

func testProgress() io.Writer {
	if testing.Verbose() {
		return os.Stderr
	}
	return nil
}

// TestThroughputTestbed runs the measurement for real on emulated hosts,
// small: 10 ms RTT, 2 workers, 8 clients, 24 handshakes per mode. It
// checks the structure, never a throughput ratio. The bounds on latency
// are in round trips: TLS over TCP cannot finish before 3 RTT (connect,
// hellos, Finished and the server's byte), TurboTLS before 2, so the
// kernel's TCP handshake really paid the link's delay.
func TestThroughputTestbed(t *testing.T) {
	if err := hosts.Available(); err != nil {
		t.Skipf("skipping: cannot build emulated hosts here: %v", err)
	}
	const rtt = 10 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cfg := ThroughputConfig{RTT: rtt, Workers: 2, Concurrency: 8, Handshakes: 24, Rounds: 2,
		TurboWait: 5 * time.Second, // a busy machine must not turn turbo into fallbacks here
		Progress:  testProgress()}
	rep, err := MeasureThroughput(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkThroughputStructure(t, rep, cfg)
	if rep.ConnectMedianMs < 0.95*ms(rtt) {
		t.Errorf("TCP connect median %.3f ms on a %v link", rep.ConnectMedianMs, rtt)
	}
	if min := rep.Results[0].Latency.Min; min < 3*0.95*ms(rtt) {
		t.Errorf("tls: fastest handshake %.2f ms, below 3 RTT", min)
	}
	if min := rep.Results[1].Latency.Min; min < 2*0.95*ms(rtt) {
		t.Errorf("turbo: fastest handshake %.2f ms, below 2 RTT", min)
	}
	// A TLS-over-TCP worker waits a round trip for the client's Finished.
	if h := rep.Results[0].TCPHold.Min; h < 0.9*ms(rtt) {
		t.Errorf("tls: a worker held a connection only %.2f ms, below 1 RTT", h)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "turbo / tls:") {
		t.Errorf("table:\n%s", table.String())
	}
	t.Logf("\n%s", table.String())
}

// TestThroughputLoopback runs the pooled server and both kinds of client
// in this namespace (no emulated delay), so it runs where namespaces
// can't be made. One client at a time and two workers: on loopback a
// TurboTLS connection can be accepted before its UDP flight is computed,
// and a worker blocked on its link record must not be the only one (see
// pooledServer).
func TestThroughputLoopback(t *testing.T) {
	cfg := ThroughputConfig{Workers: 2, Concurrency: 1, Handshakes: 12, Rounds: 3, TurboWait: 5 * time.Second, Progress: testProgress()}
	if err := cfg.fill(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep := &ThroughputReport{Workers: cfg.Workers, Handshakes: cfg.Handshakes, Rounds: cfg.Rounds}
	if err := runThroughput(ctx, cfg, io.Discard, nil, nil, netip.MustParseAddrPort("127.0.0.1:0"), rep); err != nil {
		t.Fatal(err)
	}
	checkThroughputStructure(t, rep, cfg)
	// 12 in 3 rounds: 4 per round per mode.
	for _, res := range rep.Results {
		for i, r := range res.Rounds {
			if r.Handshakes != 4 {
				t.Errorf("%s round %d: %d handshakes", res.Mode, i, r.Handshakes)
			}
		}
	}
	var out bytes.Buffer
	if err := rep.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rtt_ms", "workers", "concurrency", "results", "turbo_over_tls", "turbo_over_tls_whole_rounds", "tcp_connect_median_ms", "turbo_udp"} {
		if _, ok := back[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, out.String())
		}
	}
	res := back["results"].([]any)[1].(map[string]any)
	for _, k := range []string{"mode", "handshakes", "turbo", "handshakes_per_s", "steady_handshakes_per_s", "latency_ms", "tcp_hold_ms", "udp_hold_ms", "rounds"} {
		if _, ok := res[k]; !ok {
			t.Errorf("JSON result lacks %q", k)
		}
	}
}

func TestThroughputConfigChecks(t *testing.T) {
	var zero ThroughputConfig
	if err := zero.fill(); err != nil {
		t.Fatal(err)
	}
	if zero.RTT != 40*time.Millisecond || zero.Workers != 4 || zero.Concurrency != 64 || zero.Handshakes != 400 || zero.Rounds != 2 || zero.TurboWait != 0 || zero.UDPReadBuffer != 4<<20 {
		t.Fatalf("defaults %+v", zero)
	}
	for _, bad := range []ThroughputConfig{
		{RTT: -time.Millisecond},
		{RTT: 3 * time.Second},
		{Workers: -1},
		{Workers: 5000},
		{Concurrency: -2},
		{Handshakes: -1},
		{Handshakes: 4, Rounds: 5},
		{Rounds: -1},
		{TurboWait: -time.Second},
		{TurboWait: 2 * time.Minute},
		{UDPReadBuffer: -2},
	} {
		if err := bad.fill(); err == nil || !strings.HasPrefix(err.Error(), "bench: ") {
			t.Errorf("%+v: error %v", bad, err)
		}
	}
}

const snmpSample = `Ip: Forwarding DefaultTTL InReceives
Ip: 2 64 100
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 2563 0 216 2611 216 0 0 0 0
UdpLite: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
UdpLite: 0 0 0 0 7 0 0 0 0
`

func TestParseUDPRcvbufErrors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{snmpSample, 216},
		{"", -1},
		{"Udp: InDatagrams RcvbufErrors\n", -1},
		{"Udp: InDatagrams RcvbufErrors\nUdp: 5\n", -1},
		{"Udp: InDatagrams RcvbufErrors\nUdp: 5 x\n", -1},
		{"Udp: InDatagrams RcvbufErrors\nUdp: 5 -3\n", -1},
		{"UdpLite: InDatagrams RcvbufErrors\nUdpLite: 5 9\n", -1},
	} {
		if got := parseUDPRcvbufErrors([]byte(tc.in)); got != tc.want {
			t.Errorf("%q: %d, want %d", tc.in, got, tc.want)
		}
	}
}

func FuzzParseUDPRcvbufErrors(f *testing.F) {
	f.Add([]byte(snmpSample))
	f.Add([]byte("Udp: RcvbufErrors\nUdp: 1\n"))
	f.Add([]byte("Udp: a b\nUdp:\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if n := parseUDPRcvbufErrors(b); n < -1 {
			t.Fatalf("%d", n)
		}
	})
}
