package hosts

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/ztls-project/ztls/testbed/netem"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
)

// BulkRate is the link rate of the self-check's throughput test.
const BulkRate = 500_000_000

// SelfCheckConfig says what the emulator's self-check measures.
type SelfCheckConfig struct {
	// RTT is the configured round-trip time between the two test hosts.
	RTT time.Duration
	// Probes is the number of pings and of TCP connects (0: 50).
	Probes int
	// Bulk is how long the throughput test sends (0: 3 s); the rate is taken
	// over its second half, after TCP's slow start.
	Bulk time.Duration
	// Tolerance is the largest accepted |median - RTT| (0: 0.5 ms).
	Tolerance time.Duration
	// MinMbps is the least accepted throughput (0: 200 Mbit/s).
	MinMbps float64
	// NoCalibrate turns off the relay's latency compensation.
	NoCalibrate bool
	// Realtime measures at SCHED_FIFO priority 40 (just below the relay),
	// so that other load on the machine does not delay the probes.
	Realtime bool
}

// SelfCheckReport holds what the self-check measured.
type SelfCheckReport struct {
	RTT        time.Duration   `json:"rtt_ns"`
	Ping       []time.Duration `json:"ping_ns"`
	Connect    []time.Duration `json:"connect_ns"`
	PingMedian time.Duration   `json:"ping_median_ns"`
	ConnMedian time.Duration   `json:"connect_median_ns"`
	Mbps       float64         `json:"mbps"`
	RealTime   bool            `json:"relay_realtime"`
	Comp       time.Duration   `json:"compensation_ns"`
	// BulkLate1ms is the fraction of packets written more than 1 ms after
	// their due time during the throughput test.
	BulkLate1ms float64  `json:"bulk_late_1ms"`
	Problems    []string `json:"problems,omitempty"`
}

// OK reports whether every figure is within bounds.
func (r *SelfCheckReport) OK() bool { return len(r.Problems) == 0 }

// SelfCheck builds a two-host network, sets its RTT and measures ping RTT,
// TCP connect time and bulk TCP throughput. It returns an error only when
// the check cannot run; out-of-bound figures are listed in Problems.
func SelfCheck(ctx context.Context, cfg SelfCheckConfig) (*SelfCheckReport, error) {
	if cfg.Probes <= 0 {
		cfg.Probes = 50
	}
	if cfg.Bulk <= 0 {
		cfg.Bulk = 3 * time.Second
	}
	if cfg.Tolerance <= 0 {
		cfg.Tolerance = 500 * time.Microsecond
	}
	if cfg.MinMbps <= 0 {
		cfg.MinMbps = 200
	}
	if cfg.Realtime {
		if err := SetProcessRealtime(40); err == nil {
			defer SetProcessRealtime(0)
		}
	}
	n, err := New(Options{Hosts: []string{"a", "b"}, Calibrate: !cfg.NoCalibrate})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	a, b := n.Host("a"), n.Host("b")
	if err := n.SetRTT(a, b, cfg.RTT, 0); err != nil {
		return nil, err
	}
	rep := &SelfCheckReport{RTT: cfg.RTT, RealTime: n.Relay().RealTime, Comp: n.Compensation()}
	if rep.Ping, err = Ping(ctx, a, b, cfg.Probes); err != nil {
		return nil, err
	}
	if rep.Connect, err = ConnectTimes(ctx, a, b, cfg.Probes); err != nil {
		return nil, err
	}
	// Bulk data crosses a 500 Mbit/s link: unlimited, a TCP sender bursts
	// faster than the relay can write packets on time (each TUN write runs
	// the receiving stack), and the link's timing would suffer.
	if err := n.SetLink(a, b, netem.Link{Delay: cfg.RTT / 2, Rate: BulkRate, QueueLimit: 20 * time.Millisecond}); err != nil {
		return nil, err
	}
	before, err := n.Relay().Stats()
	if err != nil {
		return nil, err
	}
	if rep.Mbps, err = Throughput(ctx, a, b, cfg.Bulk); err != nil {
		return nil, err
	}
	after, err := n.Relay().Stats()
	if err != nil {
		return nil, err
	}
	if p := after.Late.Packets - before.Late.Packets; p > 0 {
		rep.BulkLate1ms = float64(after.Late.Over1m-before.Late.Over1m) / float64(p)
	}
	rep.PingMedian, rep.ConnMedian = Median(rep.Ping), Median(rep.Connect)
	for _, m := range []struct {
		what string
		d    time.Duration
	}{{"ping", rep.PingMedian}, {"TCP connect", rep.ConnMedian}} {
		if diff := (m.d - cfg.RTT).Abs(); diff > cfg.Tolerance {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s median %v is %v away from RTT %v (tolerance %v)", m.what, m.d, diff, cfg.RTT, cfg.Tolerance))
		}
	}
	if rep.Mbps < cfg.MinMbps {
		rep.Problems = append(rep.Problems, fmt.Sprintf("throughput %.0f Mbit/s below %.0f", rep.Mbps, cfg.MinMbps))
	}
	return rep, nil
}

// Median returns the median of ds (0 for none).
func Median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Ping sends count ICMP echo requests from host a to host b, one at a time,
// and returns the round-trip times the application saw.
func Ping(ctx context.Context, a, b *Host, count int) ([]time.Duration, error) {
	var c *icmp.PacketConn
	err := a.Do(func() (err error) {
		c, err = icmp.ListenPacket("ip4:icmp", a.Addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("hosts: ping socket: %w", err)
	}
	defer c.Close()
	id := os.Getpid() & 0xffff
	dst := &net.IPAddr{IP: b.Addr.AsSlice()}
	buf := make([]byte, 1500)
	var out []time.Duration
	for seq := 1; seq <= count; seq++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: id, Seq: seq, Data: make([]byte, 56)}}
		wire, err := msg.Marshal(nil)
		if err != nil {
			return nil, fmt.Errorf("hosts: ping: %w", err)
		}
		start := time.Now()
		if _, err := c.WriteTo(wire, dst); err != nil {
			return nil, fmt.Errorf("hosts: ping: %w", err)
		}
		c.SetReadDeadline(start.Add(5 * time.Second))
		for {
			m, _, err := c.ReadFrom(buf)
			if err != nil {
				return nil, fmt.Errorf("hosts: ping %s seq %d: %w", b.Addr, seq, err)
			}
			rtt := time.Since(start)
			rm, err := icmp.ParseMessage(1, buf[:m])
			if err != nil || rm.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			if e, ok := rm.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq {
				out = append(out, rtt)
				break
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return out, nil
}

// ConnectTimes measures count TCP connects from host a to a listener on b.
func ConnectTimes(ctx context.Context, a, b *Host, count int) ([]time.Duration, error) {
	ln, err := b.Listen("tcp", b.Addr.String()+":0")
	if err != nil {
		return nil, err
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	addr := ln.Addr().String()
	var out []time.Duration
	for i := 0; i < count; i++ {
		var c net.Conn
		var d time.Duration
		err := a.Do(func() (err error) {
			var dl net.Dialer
			start := time.Now()
			c, err = dl.DialContext(ctx, "tcp", addr)
			d = time.Since(start)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("hosts: connect: %w", err)
		}
		c.Close()
		out = append(out, d)
		time.Sleep(2 * time.Millisecond)
	}
	return out, nil
}

// Throughput sends bulk TCP data from a to b for d and returns the rate in
// Mbit/s over the second half of d.
func Throughput(ctx context.Context, a, b *Host, d time.Duration) (float64, error) {
	ln, err := b.Listen("tcp", b.Addr.String()+":0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	var received atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			received.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	c, err := a.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	stop := time.Now().Add(d)
	c.SetWriteDeadline(stop)
	var mid int64
	var midAt time.Time
	timer := time.AfterFunc(d/2, func() { mid, midAt = received.Load(), time.Now() })
	defer timer.Stop()
	buf := make([]byte, 256<<10)
	for time.Now().Before(stop) && ctx.Err() == nil {
		if _, err := c.Write(buf); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				break
			}
			c.Close()
			return 0, fmt.Errorf("hosts: bulk send: %w", err)
		}
	}
	end, endAt := received.Load(), time.Now()
	c.Close()
	<-done
	if midAt.IsZero() {
		return 0, io.ErrUnexpectedEOF
	}
	return float64(end-mid) * 8 / endAt.Sub(midAt).Seconds() / 1e6, nil
}
