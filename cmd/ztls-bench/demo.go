package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/testbed/bench"
	"github.com/ztls-project/ztls/testbed/hosts"
)

var demoFlags struct {
	rtt       float64
	runs      int
	protocols string
	scenario  string
	loopback  bool
}

var demoCmd = &cobra.Command{
	Use:   "demo",
	Short: "See ZTLS save a round trip: first visits over an emulated 40 ms link",
	Long: `demo builds a small emulated internet on this machine (a client, a DNS resolver,
an authoritative DNS server and a web server, each in its own network namespace,
joined by links with real delay), publishes the server's Z-data in DNS, and makes
a few first visits with each protocol. It prints, per protocol, the median time
to the first response byte counted from the start of the DNS lookup, and where
that time went.

What to look for, at an RTT of R ms with the answer in the client's DNS cache:

  tls        TLS 1.3 over TCP: TCP handshake, TLS handshake, then the request:
             first byte after about 3 R.
  ztls       the server's key share came with the DNS answer, so the request
             rides with the ClientHello and the answer comes back with the
             server's first flight: about 2 R, one round trip saved on a FIRST
             visit.
  tls-0rtt   TLS 1.3 resumption with 0-RTT data: also about 2 R, but only for a
             client that visited before and kept a ticket.
  quic       QUIC 1-RTT: about 2 R (QUIC folds TCP's handshake into its own).
  quic-0rtt  QUIC resumption with 0-RTT: about 1 R, again only after a visit.
  gotls      Go's crypto/tls, the same round trips as tls.

Needs root and /dev/net/tun for the namespaces. Without them (or with
--loopback) it runs the same ZTLS and TLS 1.3 handshakes over loopback instead,
where a round trip costs microseconds, so the saved round trip cannot be seen.
Progress goes to stderr, the tables to stdout. It takes well under a minute.

Examples:
  sudo ztls demo
  sudo ztls demo --rtt 100 --runs 5 --protocols tls,ztls
  ztls demo --loopback`,
	Args: cobra.NoArgs,
	RunE: runDemo,
}

func init() {
	f := demoCmd.Flags()
	f.Float64Var(&demoFlags.rtt, "rtt", 40, "client-server round trip in ms")
	f.IntVar(&demoFlags.runs, "runs", 4, "first visits per protocol (medians are shown)")
	f.StringVar(&demoFlags.protocols, "protocols", "tls,ztls,tls-0rtt,gotls,quic,quic-0rtt",
		"comma-separated protocols (tls and ztls are always included); see 'ztls bench --help'")
	f.StringVar(&demoFlags.scenario, "scenario", "stub", "DNS scenario: "+strings.Join(bench.ScenarioNames(), ", "))
	f.BoolVar(&demoFlags.loopback, "loopback", false, "skip the emulated network and run on loopback")
	rootCmd.AddCommand(demoCmd)
}

func runDemo(cmd *cobra.Command, _ []string) error {
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	if demoFlags.runs < 1 || demoFlags.runs > 50 {
		return fmt.Errorf("demo: --runs %d: want 1 to 50", demoFlags.runs)
	}
	if !(demoFlags.rtt >= 1 && demoFlags.rtt <= 1000) {
		return fmt.Errorf("demo: --rtt %v: want 1 to 1000 ms", demoFlags.rtt)
	}
	if _, err := bench.LookupScenario(demoFlags.scenario); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	protocols := demoProtocols(demoFlags.protocols)
	for _, p := range protocols {
		if _, err := bench.NewContender(p); err != nil {
			return fmt.Errorf("demo: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()

	if demoFlags.loopback {
		fmt.Fprintln(errOut, "demo: --loopback: running on loopback.")
		return demoLoopback(ctx, out, errOut, demoFlags.runs)
	}
	if err := hosts.Available(); err != nil {
		fmt.Fprintf(errOut, "demo: cannot build the emulated network here (%v).\n", err)
		fmt.Fprintln(errOut, "demo: falling back to loopback. There a round trip takes microseconds, so the")
		fmt.Fprintln(errOut, "demo: round trip ZTLS saves is invisible; run as root with /dev/net/tun to see it.")
		return demoLoopback(ctx, out, errOut, demoFlags.runs)
	}
	rtt := time.Duration(demoFlags.rtt * float64(time.Millisecond))
	fmt.Fprintf(errOut, "demo: building 4 hosts in network namespaces, RTT %.1f ms, scenario %s; %d first visits each of %s\n",
		demoFlags.rtt, demoFlags.scenario, demoFlags.runs, strings.Join(protocols, ", "))
	prog := &dotProgress{w: errOut}
	rep, err := bench.Run(ctx, bench.Config{
		RTTs:      []time.Duration{rtt},
		Runs:      demoFlags.runs,
		Protocols: protocols,
		Scenarios: []string{demoFlags.scenario},
		Progress:  prog,
		Realtime:  true,
	})
	prog.end()
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	writeDemoReport(out, rep, demoFlags.rtt, demoFlags.scenario)
	return nil
}

// demoProtocols parses the list, puts tls and ztls first and drops repeats.
func demoProtocols(list string) []string {
	seen := map[string]bool{}
	var ps []string
	for _, p := range append([]string{"tls", "ztls"}, strings.Split(list, ",")...) {
		p = strings.TrimSpace(p)
		if p != "" && !seen[p] {
			seen[p] = true
			ps = append(ps, p)
		}
	}
	return ps
}

// dotProgress shows one dot per measured connection and passes other lines
// (errors, emulator notes) through.
type dotProgress struct {
	w    io.Writer
	buf  []byte
	dots int
}

func (p *dotProgress) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := string(p.buf[:i])
		p.buf = p.buf[i+1:]
		if strings.Contains(line, " run ") && !strings.Contains(line, "error") {
			fmt.Fprint(p.w, ".")
			p.dots++
			continue
		}
		if p.dots > 0 {
			fmt.Fprintln(p.w)
			p.dots = 0
		}
		fmt.Fprintln(p.w, "demo:", line)
	}
}

func (p *dotProgress) end() {
	if p.dots > 0 {
		fmt.Fprintln(p.w)
		p.dots = 0
	}
}

var demoAbout = map[string]string{
	"tls":       "TLS 1.3 (this engine), first visit",
	"ztls":      "ZTLS, first visit, key share from DNS",
	"tls-0rtt":  "TLS 1.3 0-RTT, needs an earlier visit",
	"gotls":     "Go crypto/tls 1.3, first visit",
	"openssl":   "OpenSSL 3 s_client, first visit",
	"quic":      "QUIC 1-RTT (quic-go), first visit",
	"quic-0rtt": "QUIC 0-RTT, needs an earlier visit",
}

// writeDemoReport prints the medians, the round trips saved against TLS 1.3
// and where the time went.
func writeDemoReport(w io.Writer, rep *bench.Report, rttMs float64, scenario string) {
	by := map[string]bench.Result{}
	var order []string
	for _, r := range rep.Results {
		by[r.Protocol] = r
		order = append(order, r.Protocol)
	}
	if len(rep.Checks) > 0 {
		fmt.Fprintf(w, "Emulated link: RTT %.1f ms (TCP connect measured %.2f ms), DNS scenario %s: %s.\n\n",
			rttMs, rep.Checks[0].ConnectMedianMs, scenario, bench.Scenarios[scenario].About)
	}
	tls, haveTLS := by["tls"]
	fmt.Fprintf(w, "%-10s %-38s %5s %10s %10s %8s %10s %8s\n", "protocol", "", "runs", "first byte", "handshake", "DNS", "after DNS", "saved")
	fmt.Fprintf(w, "%-10s %-38s %5s %10s %10s %8s %10s %8s\n", "", "", "", "ms", "ms", "ms", "RTT", "RTT")
	for _, name := range order {
		r := by[name]
		if r.Runs == 0 {
			fmt.Fprintf(w, "%-10s %-38s %5d  all %d visits failed (see stderr)\n", name, demoAbout[name], 0, r.Errors)
			continue
		}
		saved := "-"
		if haveTLS && tls.Runs > 0 && name != "tls" {
			saved = fmt.Sprintf("%+.2f", (tls.FirstByte.Median-r.FirstByte.Median)/rttMs)
		}
		fmt.Fprintf(w, "%-10s %-38s %5d %10.2f %10.2f %8.2f %10.2f %8s\n", name, demoAbout[name], r.Runs,
			r.FirstByte.Median, r.Handshake.Median, r.DNS.Median, (r.FirstByte.Median-r.DNS.Median)/rttMs, saved)
	}
	fmt.Fprintln(w, "\n(medians; \"after DNS\" is first byte minus DNS in round trips; \"saved\" is against tls)")

	z, haveZ := by["ztls"]
	if !haveTLS || !haveZ || tls.Runs == 0 || z.Runs == 0 {
		return
	}
	fmt.Fprintln(w, "\nWhere the time went (medians):")
	fmt.Fprintf(w, "  tls   DNS %6.2f ms | TCP + TLS handshakes %7.2f ms (%.1f RTT) | request -> first byte %7.2f ms (%.1f RTT) | = %7.2f ms\n",
		tls.DNS.Median, tls.Handshake.Median, tls.Handshake.Median/rttMs,
		tls.FirstByte.Median-tls.DNS.Median-tls.Handshake.Median, (tls.FirstByte.Median-tls.DNS.Median-tls.Handshake.Median)/rttMs,
		tls.FirstByte.Median)
	tcp := rttMs // the TCP handshake: the emulator's own measurement if there
	if len(rep.Checks) > 0 {
		tcp = rep.Checks[0].ConnectMedianMs
	}
	fmt.Fprintf(w, "  ztls  DNS %6.2f ms | TCP handshake  %7.2f ms (1 RTT)   | ClientHello + request -> answer in the first flight %7.2f ms (%.1f RTT) | = %7.2f ms\n",
		z.DNS.Median, tcp, z.FirstByte.Median-z.DNS.Median-tcp, (z.FirstByte.Median-z.DNS.Median-tcp)/rttMs, z.FirstByte.Median)
	diff := tls.FirstByte.Median - z.FirstByte.Median
	fmt.Fprintf(w, "\nZTLS answered %.2f ms sooner than TLS 1.3 on a first visit: %.2f round trips of %.1f ms.\n", diff, diff/rttMs, rttMs)
	fmt.Fprintln(w, "The Z-data (key share, certificate) came with the DNS lookup, in parallel with the address,")
	fmt.Fprintln(w, "so the TLS handshake's own round trip before the request disappears. TLS 1.3 0-RTT and QUIC")
	fmt.Fprintln(w, "0-RTT get there too, but only for a client that visited the server before and kept a ticket.")
}

// demoLoopback runs TLS 1.3 and ZTLS first visits against the loopback lab
// world and prints what was negotiated and the times.
func demoLoopback(ctx context.Context, out, errOut io.Writer, runs int) error {
	w, err := lab.Start(lab.Options{})
	if err != nil {
		return fmt.Errorf("demo: starting the loopback world: %w", err)
	}
	defer w.Close()
	fmt.Fprintf(errOut, "demo: loopback world: CA, DNS authority at %s with %s's Z-data, ZTLS server at %s\n", w.DNSAddr, w.Host, w.ServerAddr)
	type row struct {
		mode                       string
		dns, tcp, hs, fb           []float64
		early, inFirstFlight, errs int
	}
	rows := []*row{{mode: "tls"}, {mode: "ztls"}}
	for i := 0; i < runs; i++ {
		for _, r := range rows {
			res, err := w.Resolver(resolver.UDP)
			if err != nil {
				return fmt.Errorf("demo: %w", err)
			}
			c, err := dial.Connect(ctx, w.HostPort(), dial.Options{
				Mode: dial.Mode(r.mode), TLS: w.ClientTLS(), Resolver: res,
				Request: []byte("GET / HTTP/1.0\r\n\r\n"), ReplaySafe: true, ReadResponse: 64,
				// Loopback shows negotiation, not timing: give Z-data time
				// to verify even on a busy machine.
				Memory: dial.NewMemory(), ZDataBudget: time.Second,
			})
			res.Close()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.errs++
				fmt.Fprintf(errOut, "demo: %s visit %d: %v\n", r.mode, i+1, err)
				continue
			}
			c.Conn.Close()
			t := c.Report.Timing
			r.dns, r.tcp, r.hs, r.fb = append(r.dns, t.DNS), append(r.tcp, t.TCPConnect), append(r.hs, t.Handshake), append(r.fb, t.FirstByte)
			if c.Report.EarlyData.Accepted {
				r.early++
			}
			if c.Report.AnswerInFirstFlight {
				r.inFirstFlight++
			}
			fmt.Fprint(errOut, ".")
		}
	}
	fmt.Fprintln(errOut)
	fmt.Fprintf(out, "Loopback (no emulated delay), %d first visits each, medians in ms:\n\n", runs)
	fmt.Fprintf(out, "%-6s %5s %8s %12s %10s %11s %12s %16s\n", "mode", "ok", "DNS", "TCP connect", "handshake", "first byte", "early data", "answer in flight")
	for _, r := range rows {
		if len(r.fb) == 0 {
			fmt.Fprintf(out, "%-6s %5d  all visits failed (see stderr)\n", r.mode, 0)
			continue
		}
		fmt.Fprintf(out, "%-6s %5d %8.3f %12.3f %10.3f %11.3f %9d/%-2d %13d/%-2d\n", r.mode, len(r.fb),
			median(r.dns), median(r.tcp), median(r.hs), median(r.fb), r.early, len(r.fb), r.inFirstFlight, len(r.fb))
	}
	fmt.Fprintln(out, "\nOn loopback a round trip costs microseconds, so the round trip ZTLS saves is invisible")
	fmt.Fprintln(out, "here: what this shows is that ZTLS was negotiated (early data accepted, the answer in the")
	fmt.Fprintln(out, "server's first flight). Run 'sudo ztls demo' for the emulated WAN, where it shows.")
	if rows[1].early == 0 {
		return errors.New("demo: ztls was never negotiated on loopback")
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
