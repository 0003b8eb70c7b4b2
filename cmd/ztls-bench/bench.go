package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/ztls-project/ztls/testbed/bench"
	"github.com/ztls-project/ztls/testbed/dnsburden"
	"github.com/ztls-project/ztls/testbed/hosts"
)

var benchFlags struct {
	rtt, protocols, scenario, response string
	loss, authRTT, ocspRTT             float64
	runs                               int
	jsonOut, csvOut, selfcheck, noRT   bool
	plotDir, tcpCC                     string
	burden                             bool
	trace                              string
	throughput                         bool
	workers, concurrency, handshakes   int
	rounds                             int
	turboWait                          float64
	udpBuf                             int
}

var benchCmd = &cobra.Command{
	Use:   "bench",
	Short: "Measure first-response times over emulated WAN links (the testbed)",
	Long: `bench builds four hosts in network namespaces (client, resolver, dns, server)
joined by an emulated WAN link (a TUN relay: real kernel TCP and UDP pay the
delay), starts every protocol's server and measures first visits, alternating
the protocols run by run: from the start of the DNS lookup to the first
response byte.

Scenarios (where the DNS answer comes from): ` + strings.Join(bench.ScenarioNames(), ", ") + `.
Protocols: ` + strings.Join(bench.Contenders(), ", ") + `.

Needs root (namespaces, TUN). Progress goes to stderr; the summary (a table,
--json or --csv raw samples) to stdout. --selfcheck checks the emulator
itself: ping and TCP connect medians within 0.5 ms of the RTT, >= 200 Mbit/s.

--throughput measures something else: server handshake throughput, TLS 1.3
over TCP against TurboTLS, on two hosts joined by one link (default 40 ms
RTT). The server (this project's engine, one port for TCP and UDP) runs its
handshakes on a fixed pool of --workers blocking workers: a worker holds a
TCP connection from accept to the end of its handshake, and computes
TurboTLS's UDP flights too. --concurrency clients keep handshakes in
flight, one after the other, until each mode has done --handshakes; the
modes alternate in --rounds rounds. It prints handshakes per second,
median and p90 latency (dial start to the server's byte after its
handshake), how long a worker held a connection, and turbo / tls. Turbo
handshakes that fell back to TLS over TCP still count, and are reported.

Examples:
  ztls bench --selfcheck --rtt 40
  ztls bench --rtt 40 --runs 10                             # ` + defaultBenchProtocols + `
  ztls bench --rtt 8.2,39.8,180.6 --runs 20 --protocols gotls,openssl,quic,quic-0rtt --json --plot docs/img
  ztls bench --throughput                                   # 40 ms, 4 workers, 64 clients, 400 each
  ztls bench --throughput --rtt 40 --workers 4 --concurrency 64 --handshakes 600 --json`,
	Args: cobra.NoArgs,
	RunE: runBench,
}

func init() {
	f := benchCmd.Flags()
	f.StringVar(&benchFlags.rtt, "rtt", "39.8", `client-server RTT in ms; a comma-separated list, or "paper" for 8.2,39.8,180.6`)
	f.Float64Var(&benchFlags.loss, "loss", 0, "packet loss in percent on the client-server link")
	f.IntVar(&benchFlags.runs, "runs", 20, "measured connections per protocol, RTT and scenario")
	f.StringVar(&benchFlags.protocols, "protocols", defaultBenchProtocols, `comma-separated protocols, or "all"`)
	f.StringVar(&benchFlags.scenario, "scenario", "local-warm", `comma-separated DNS scenarios, or "all"`)
	f.StringVar(&benchFlags.response, "response", bench.Response5B, `response: "5b" (5 bytes, as the paper) or "http" (GET of a small page)`)
	f.Float64Var(&benchFlags.authRTT, "auth-rtt", float64(bench.DefaultAuthRTT)/1e6, "resolver-authority RTT in ms (cold scenarios)")
	f.Float64Var(&benchFlags.ocspRTT, "ocsp-rtt", float64(bench.DefaultOCSPRTT)/1e6, "client-OCSP responder RTT in ms (the *-ocsp protocols, which ask it hard-fail; *-ocsp-prefetch ask before the click)")
	f.BoolVar(&benchFlags.jsonOut, "json", false, "print the summary as JSON")
	f.BoolVar(&benchFlags.csvOut, "csv", false, "print every raw sample as CSV")
	f.StringVar(&benchFlags.plotDir, "plot", "", "write CDF and bar plots (PNG and SVG) into this directory")
	f.BoolVar(&benchFlags.selfcheck, "selfcheck", false, "check the link emulator's RTT accuracy and throughput, then exit")
	f.BoolVar(&benchFlags.noRT, "no-realtime", false, "measure at normal scheduling priority")
	f.StringVar(&benchFlags.tcpCC, "tcp-cc", "cubic", `the emulated hosts' TCP congestion control ("cubic", Linux's default; "bbr", which paces even a short answer's few kilobytes; "" keeps the machine's)`)
	f.BoolVar(&benchFlags.burden, "dns-burden", false, "simulate the extra stub-resolver DNS packets of ZTLS, then exit")
	f.BoolVar(&benchFlags.throughput, "throughput", false, "measure server handshake throughput, TLS over TCP vs TurboTLS, with a fixed worker pool, then exit")
	f.IntVar(&benchFlags.workers, "workers", 4, "--throughput: the server's fixed pool of blocking workers")
	f.IntVar(&benchFlags.concurrency, "concurrency", 64, "--throughput: clients with a handshake in flight at once")
	f.IntVar(&benchFlags.handshakes, "handshakes", 400, "--throughput: handshakes per mode")
	f.IntVar(&benchFlags.rounds, "rounds", 2, "--throughput: alternating rounds the handshakes of each mode are split into")
	f.Float64Var(&benchFlags.turboWait, "turbo-wait", 0, "--throughput: ms a TurboTLS client waits for the UDP flight after TCP connects (0: the client's default, half the TCP connect time)")
	f.IntVar(&benchFlags.udpBuf, "udp-rcvbuf", 0, "--throughput: the server UDP socket's receive buffer in bytes (0: 4 MiB; -1: the kernel's default, which drops bursts)")
	f.StringVar(&benchFlags.trace, "trace", "", `visit trace for --dns-burden ("SECONDS NAME" per line); default: a synthetic one`)
	rootCmd.AddCommand(benchCmd)
}

// defaultBenchProtocols is what a plain 'ztls bench' compares: this
// project's TLS 1.3 and ZTLS first, then the baselines.
const defaultBenchProtocols = "tls,ztls,gotls,openssl,quic,quic-0rtt"

// benchProtocols parses --protocols: known names, each once, or "all".
func benchProtocols(s string) ([]string, error) {
	known := bench.Contenders()
	if strings.TrimSpace(s) == "all" {
		return known, nil
	}
	var out []string
	seen := map[string]bool{}
	for _, p := range splitList(s) {
		if !slices.Contains(known, p) {
			return nil, fmt.Errorf("bench: --protocols: unknown protocol %q; valid: %s, or all", p, strings.Join(known, ", "))
		}
		if seen[p] {
			return nil, fmt.Errorf("bench: --protocols: %q is listed twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: --protocols: give at least one of %s", strings.Join(known, ", "))
	}
	return out, nil
}

// benchScenarios parses --scenario: known names, or "all".
func benchScenarios(s string) ([]string, error) {
	known := bench.ScenarioNames()
	if strings.TrimSpace(s) == "all" {
		return known, nil
	}
	out := splitList(s)
	for _, sc := range out {
		if !slices.Contains(known, sc) {
			return nil, fmt.Errorf("bench: --scenario: unknown scenario %q; valid: %s, or all", sc, strings.Join(known, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: --scenario: give at least one of %s", strings.Join(known, ", "))
	}
	return out, nil
}

// checkBenchNumbers refuses counts and rates that cannot mean anything,
// saying the valid range.
func checkBenchNumbers() error {
	if benchFlags.runs < 1 {
		return fmt.Errorf("bench: --runs %d: want at least 1", benchFlags.runs)
	}
	if !(benchFlags.loss >= 0 && benchFlags.loss < 100) {
		return fmt.Errorf("bench: --loss %v: want a percentage from 0 up to (not including) 100", benchFlags.loss)
	}
	if !(benchFlags.authRTT >= 0 && benchFlags.authRTT <= 2000) {
		return fmt.Errorf("bench: --auth-rtt %v: want milliseconds from 0 to 2000", benchFlags.authRTT)
	}
	if !(benchFlags.ocspRTT > 0 && benchFlags.ocspRTT <= 2000) {
		return fmt.Errorf("bench: --ocsp-rtt %v: want milliseconds above 0, up to 2000", benchFlags.ocspRTT)
	}
	return nil
}

func parseRTTs(s string) ([]time.Duration, error) {
	if s == "paper" {
		return bench.PaperRTTs, nil
	}
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v > 2000 {
			return nil, fmt.Errorf("bench: bad RTT %q (milliseconds, 0 to 2000)", f)
		}
		out = append(out, time.Duration(math.Round(v*1000))*time.Microsecond)
	}
	return out, nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func runBench(cmd *cobra.Command, _ []string) error {
	if benchFlags.jsonOut && benchFlags.csvOut {
		return errors.New("bench: --json and --csv exclude each other")
	}
	if benchFlags.burden {
		return runBurden(cmd)
	}
	rtts, err := parseRTTs(benchFlags.rtt)
	if err != nil {
		return err
	}
	// Refuse wrong names and numbers before anything is set up.
	protocols, err := benchProtocols(benchFlags.protocols)
	if err != nil {
		return err
	}
	scenarios, err := benchScenarios(benchFlags.scenario)
	if err != nil {
		return err
	}
	if err := checkBenchNumbers(); err != nil {
		return err
	}
	// Cleanup (namespaces, processes) must run on ^C too.
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := hosts.Available(); err != nil {
		return err
	}
	if benchFlags.selfcheck {
		return runSelfCheck(ctx, rtts)
	}
	if benchFlags.throughput {
		return runThroughput(ctx, cmd, rtts)
	}
	cfg := bench.Config{
		RTTs:          rtts,
		LossPct:       benchFlags.loss,
		Runs:          benchFlags.runs,
		Protocols:     protocols,
		Scenarios:     scenarios,
		Response:      benchFlags.response,
		AuthRTT:       time.Duration(benchFlags.authRTT * float64(time.Millisecond)),
		OCSPRTT:       time.Duration(benchFlags.ocspRTT * float64(time.Millisecond)),
		Progress:      os.Stderr,
		Realtime:      !benchFlags.noRT,
		TCPCongestion: benchFlags.tcpCC,
	}
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	switch {
	case benchFlags.jsonOut:
		err = rep.WriteJSON(out)
	case benchFlags.csvOut:
		err = rep.WriteCSV(out)
	default:
		rep.WriteTable(out)
	}
	if err != nil {
		return err
	}
	if benchFlags.plotDir != "" {
		files, err := rep.Plot(benchFlags.plotDir)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %d plot files into %s\n", len(files), benchFlags.plotDir)
	}
	return nil
}

func runSelfCheck(ctx context.Context, rtts []time.Duration) error {
	failed := false
	for _, rtt := range rtts {
		fmt.Fprintf(os.Stderr, "selfcheck: RTT %v ...\n", rtt)
		rep, err := hosts.SelfCheck(ctx, hosts.SelfCheckConfig{RTT: rtt, Realtime: !benchFlags.noRT})
		if err != nil {
			return err
		}
		status := "ok"
		if !rep.OK() {
			status, failed = "FAIL", true
		}
		fmt.Printf("rtt %8.3f ms  ping median %8.3f ms  tcp connect median %8.3f ms  throughput %6.0f Mbit/s (%.2f%% >1 ms late)  compensation %5.1f µs/hop  relay real-time %v  %s\n",
			benchMs(rtt), benchMs(rep.PingMedian), benchMs(rep.ConnMedian), rep.Mbps, 100*rep.BulkLate1ms, float64(rep.Comp)/1e3, rep.RealTime, status)
		for _, p := range rep.Problems {
			fmt.Println("  " + p)
		}
	}
	if failed {
		return errors.New("bench: emulator self-check failed")
	}
	return nil
}

func benchMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func runThroughput(ctx context.Context, cmd *cobra.Command, rtts []time.Duration) error {
	if benchFlags.csvOut || benchFlags.plotDir != "" {
		return errors.New("bench: --throughput prints a table or --json, not --csv or --plot")
	}
	rtt := 40 * time.Millisecond
	if cmd.Flags().Changed("rtt") {
		if len(rtts) != 1 || rtts[0] <= 0 {
			return errors.New("bench: --throughput takes one positive --rtt")
		}
		rtt = rtts[0]
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"workers", benchFlags.workers}, {"concurrency", benchFlags.concurrency}, {"handshakes", benchFlags.handshakes}, {"rounds", benchFlags.rounds}} {
		if v.n < 1 {
			return fmt.Errorf("bench: --%s must be at least 1, got %d", v.name, v.n)
		}
	}
	if !(benchFlags.turboWait >= 0 && benchFlags.turboWait <= 60_000) {
		return fmt.Errorf("bench: --turbo-wait %v out of range (0 to 60000 ms)", benchFlags.turboWait)
	}
	rep, err := bench.MeasureThroughput(ctx, bench.ThroughputConfig{
		RTT: rtt, Workers: benchFlags.workers, Concurrency: benchFlags.concurrency,
		Handshakes: benchFlags.handshakes, Rounds: benchFlags.rounds,
		TurboWait:     time.Duration(benchFlags.turboWait * float64(time.Millisecond)),
		Progress:      os.Stderr,
		Realtime:      !benchFlags.noRT,
		UDPReadBuffer: benchFlags.udpBuf,
		TCPCongestion: benchFlags.tcpCC,
	})
	if err != nil {
		return err
	}
	if benchFlags.jsonOut {
		return rep.WriteJSON(cmd.OutOrStdout())
	}
	rep.WriteTable(cmd.OutOrStdout())
	return nil
}

func runBurden(cmd *cobra.Command) error {
	type trace struct {
		name   string
		visits []dnsburden.Visit
	}
	traces := []trace{{"one busy name (visit every 10 s, 10 h)", dnsburden.Periodic("busy.example", 10*time.Second, 10*time.Hour)}}
	if benchFlags.trace != "" {
		f, err := os.Open(benchFlags.trace)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer f.Close()
		t, err := dnsburden.ParseTrace(f)
		if err != nil {
			return err
		}
		traces = append(traces, trace{"trace " + benchFlags.trace, t})
	} else {
		t, err := dnsburden.Synthetic(dnsburden.SyntheticConfig{Names: 2000, Rate: 0.2, Span: 24 * time.Hour, Seed: 7})
		if err != nil {
			return err
		}
		traces = append(traces, trace{"synthetic (2000 names, Zipf 1.1, 0.2 visits/s, 24 h)", t})
	}
	// One table per trace: every comparison of dnsburden.Comparisons,
	// the TXT path's and the HTTPS record's (docs/testbed.md).
	out := cmd.OutOrStdout()
	for i, tr := range traces {
		if i > 0 {
			fmt.Fprintln(out)
		}
		fmt.Fprintf(out, "%s: %d visits\n", tr.name, len(tr.visits))
		fmt.Fprintf(out, "  %-26s %-22s %12s %12s %9s\n", "client", "Z-data and leaf", "base pkts", "ztls pkts", "extra")
		for _, r := range dnsburden.Compare(tr.visits) {
			fmt.Fprintf(out, "  %-26s %-22s %12d %12d %8.1f%%\n", r.Comparison.Client, r.Comparison.Path,
				r.Base.Packets, r.With.Packets, r.Increase)
		}
	}
	return nil
}
