package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/dnsname"
	dnsresolver "github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/testbed/hosts"
)

// ServerName is the name the clients look up and the certificate carries.
const ServerName = "www.ztls.test"

// Responses the server can be asked for: the paper's 5 bytes, or a small
// web page fetched with an HTTP GET.
const (
	Response5B   = "5b"
	ResponseHTTP = "http"
)

// Config describes one benchmark.
type Config struct {
	// RTTs are the client–server round trips to measure at.
	RTTs []time.Duration
	// LossPct is the packet loss in percent on the client–server path.
	LossPct float64
	// Runs is the number of measured connections per protocol and scenario.
	Runs int
	// Protocols names the contenders (see Contenders).
	Protocols []string
	// Scenarios names the DNS scenarios (see Scenarios); empty: local-warm.
	Scenarios []string
	// Response is Response5B (default) or ResponseHTTP.
	Response string
	// AuthRTT is the resolver–authority round trip (0: DefaultAuthRTT).
	AuthRTT time.Duration
	// OCSPRTT is the client–OCSP responder round trip, for the OCSP
	// contenders (0: DefaultOCSPRTT).
	OCSPRTT time.Duration
	// Progress receives one line per measured connection; nil: silent.
	Progress io.Writer
	// Realtime runs the measuring process at SCHED_FIFO priority 40, just
	// below the relay, so that other load does not delay its wake-ups.
	Realtime bool
	// TCPCongestion is the emulated hosts' TCP congestion control
	// (hosts.Options.TCPCongestion); empty: the machine's.
	TCPCongestion string
}

// Result is the summary for one protocol in one setting.
type Result struct {
	Protocol  string  `json:"protocol"`
	RTTms     float64 `json:"rtt_ms"`
	Runs      int     `json:"runs"`
	FirstByte Summary `json:"first_byte_ms"`
	Handshake Summary `json:"handshake_ms"`
	DNS       Summary `json:"dns_ms"`
	// The fields below extend the schema to tell settings apart.
	Scenario string  `json:"scenario"`
	LossPct  float64 `json:"loss_pct"`
	Response string  `json:"response"`
	Errors   int     `json:"errors"`
	Early    int     `json:"early_data_accepted"`
	// DNSQueries are the queries the resolver got per visit (Sample.DNSQueries).
	DNSQueries QueryCount `json:"dns_queries"`
	// Samples are the raw measurements (CSV output and plots).
	Samples []Sample `json:"-"`
}

// Report is the whole benchmark's output.
type Report struct {
	Results []Result `json:"results"`
	// CompensationUs is the relay's per-hop latency compensation.
	CompensationUs float64 `json:"emulator_compensation_us"`
	// TCPCongestion is the hosts' TCP congestion control, as set or as
	// inherited from the machine.
	TCPCongestion string `json:"tcp_congestion_control"`
	// Checks are the emulator's own check at each RTT: the median TCP
	// connect time between client and server must equal the RTT.
	Checks []LinkCheck `json:"emulator_checks"`
}

// LinkCheck is one measured check of the client–server link.
type LinkCheck struct {
	RTTms           float64 `json:"rtt_ms"`
	ConnectMedianMs float64 `json:"tcp_connect_median_ms"`
	ConnectSamples  int     `json:"tcp_connect_samples"`
}

func (cfg *Config) check() error {
	if len(cfg.RTTs) == 0 {
		return errors.New("bench: no RTT given")
	}
	for _, r := range cfg.RTTs {
		if r < 0 || r > 2*time.Second {
			return fmt.Errorf("bench: RTT %v out of range [0, 2s]", r)
		}
	}
	if !(cfg.LossPct >= 0 && cfg.LossPct < 100) {
		return fmt.Errorf("bench: loss %v%% out of range [0, 100)", cfg.LossPct)
	}
	if cfg.Runs <= 0 {
		return fmt.Errorf("bench: runs must be positive, got %d", cfg.Runs)
	}
	if len(cfg.Protocols) == 0 {
		return errors.New("bench: no protocol given")
	}
	if len(cfg.Scenarios) == 0 {
		cfg.Scenarios = []string{"local-warm"}
	}
	for _, s := range cfg.Scenarios {
		if _, err := LookupScenario(s); err != nil {
			return err
		}
	}
	switch cfg.Response {
	case "":
		cfg.Response = Response5B
	case Response5B, ResponseHTTP:
	default:
		return fmt.Errorf("bench: response %q is neither %q nor %q", cfg.Response, Response5B, ResponseHTTP)
	}
	if cfg.AuthRTT == 0 {
		cfg.AuthRTT = DefaultAuthRTT
	}
	if cfg.AuthRTT < 0 || cfg.AuthRTT > 2*time.Second {
		return fmt.Errorf("bench: authority RTT %v out of range", cfg.AuthRTT)
	}
	if cfg.OCSPRTT == 0 {
		cfg.OCSPRTT = DefaultOCSPRTT
	}
	if cfg.OCSPRTT < 0 || cfg.OCSPRTT > 2*time.Second {
		return fmt.Errorf("bench: OCSP responder RTT %v out of range", cfg.OCSPRTT)
	}
	return nil
}

// files are the responses every server serves.
func files() map[string][]byte {
	body := "<!doctype html><html><head><title>ztls</title></head><body><h1>ztls testbed</h1><p>" +
		strings.Repeat("A small page, as a first visit fetches. ", 24) + "</p></body></html>\n"
	return map[string][]byte{
		"5b":         []byte("hello"),
		"index.html": []byte(fmt.Sprintf("HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)),
	}
}

func request(response string) (req []byte, path string) {
	path = "5b"
	if response == ResponseHTTP {
		path = "index.html"
	}
	return []byte("GET /" + path + " HTTP/1.0\r\nHost: " + ServerName + "\r\n\r\n"), path
}

// Run builds the testbed (client, resolver, dns and server hosts), starts
// every contender's server and measures cfg.Runs first visits per protocol,
// RTT and scenario, alternating the protocols run by run. Everything it
// creates is removed before it returns.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	var cs []Contender
	names := []string{"client", "resolver", "dns", "server"}
	for _, name := range cfg.Protocols {
		c, err := NewContender(name)
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
		if usesOCSP(c) && len(names) == 4 {
			names = append(names, "ocsp")
		}
	}
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	if cfg.Realtime {
		if err := hosts.SetProcessRealtime(40); err != nil {
			fmt.Fprintf(progress, "bench: measuring at normal priority: %v\n", err)
		} else {
			defer hosts.SetProcessRealtime(0)
		}
	}
	n, err := hosts.New(hosts.Options{Hosts: names, Calibrate: true, TCPCongestion: cfg.TCPCongestion})
	if err != nil {
		return nil, err
	}
	defer n.Close()
	if n.Relay().Warning != "" {
		fmt.Fprintln(progress, n.Relay().Warning)
	}
	client, res, auth, server := n.Host("client"), n.Host("resolver"), n.Host("dns"), n.Host("server")
	dir, err := os.MkdirTemp("", "ztls-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(dir)
	var aia string // the OCSP responder, if an OCSP contender runs
	if oh := n.Host("ocsp"); oh != nil {
		aia = ocspURL(oh)
	}
	p, err := makePKI(dir, ServerName, aia)
	if err != nil {
		return nil, err
	}
	if oh := n.Host("ocsp"); oh != nil {
		r, err := startOCSP(oh, p.ca)
		if err != nil {
			return nil, err
		}
		defer r.close()
		if err := n.SetRTT(client, oh, cfg.OCSPRTT, 0); err != nil {
			return nil, err
		}
		fmt.Fprintf(progress, "OCSP responder at %s, %v from the client\n", r.URL, cfg.OCSPRTT)
	}
	d, err := startDNS(auth, res, client)
	if err != nil {
		return nil, err
	}
	defer d.close()
	var dot *dotServer
	if needsDoT(cs) {
		if dot, err = startDoT(res, netip.AddrPortFrom(res.Addr, DoTPort), d.res, p.ca); err != nil {
			return nil, err
		}
		defer dot.stop()
	}
	a := &dns.A{Hdr: dns.RR_Header{Name: ServerName + ".", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300}, A: server.Addr.AsSlice()}
	d.auth.add(a)

	fs := files()
	for i, c := range cs {
		sdir := filepath.Join(dir, "server-"+c.Name())
		if err := os.MkdirAll(sdir, 0o700); err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		for name, data := range fs {
			if err := os.WriteFile(filepath.Join(sdir, name), data, 0o600); err != nil {
				return nil, fmt.Errorf("bench: %w", err)
			}
		}
		sc := ServerConfig{
			Addr: netip.AddrPortFrom(server.Addr, uint16(4430+i)),
			Cert: p.cert, CertFile: p.certFile, KeyFile: p.keyFile,
			Dir: sdir, Files: fs, Publish: d.auth.replace,
		}
		srv, err := c.StartServer(ctx, server, sc)
		if err != nil {
			return nil, fmt.Errorf("bench: starting %s server: %w", c.Name(), err)
		}
		defer srv.Close()
	}
	req, path := request(cfg.Response)
	rep := &Report{CompensationUs: float64(n.Compensation()) / float64(time.Microsecond), TCPCongestion: n.TCPCongestion()}
	for _, rtt := range cfg.RTTs {
		if err := n.SetRTT(client, server, rtt, 0); err != nil {
			return nil, err
		}
		ct, err := hosts.ConnectTimes(ctx, client, server, 15)
		if err != nil {
			return nil, err
		}
		chk := LinkCheck{RTTms: ms(rtt), ConnectMedianMs: round(ms(hosts.Median(ct))), ConnectSamples: len(ct)}
		rep.Checks = append(rep.Checks, chk)
		fmt.Fprintf(progress, "rtt %v: emulator check: TCP connect median %.3f ms\n", rtt, chk.ConnectMedianMs)
		if err := n.SetRTT(client, server, rtt, cfg.LossPct/100); err != nil {
			return nil, err
		}
		for _, scName := range cfg.Scenarios {
			sc := Scenarios[scName]
			if err := n.SetRTT(client, res, sc.ResolverRTT, 0); err != nil {
				return nil, err
			}
			if err := n.SetRTT(res, auth, cfg.AuthRTT, 0); err != nil {
				return nil, err
			}
			results := make([]Result, len(cs))
			for i, c := range cs {
				results[i] = Result{Protocol: c.Name(), RTTms: round(float64(rtt) / float64(time.Millisecond)),
					Scenario: scName, LossPct: cfg.LossPct, Response: cfg.Response}
			}
			for run := 0; run < cfg.Runs; run++ {
				for j := range cs {
					i := (run + j) % len(cs) // alternate who goes first
					c := cs[i]
					cl := &Client{
						Host: client, ServerName: ServerName, Port: uint16(4430 + i),
						Request: req, Expect: fs[path], RootCAs: p.pool, CAFile: p.caFile,
						Dir: dir, Scenario: sc, dns: d.stub, dot: dot,
					}
					s, err := measure(ctx, c, cl, d, sc, rtt)
					r := &results[i]
					if err != nil {
						if ctx.Err() != nil {
							return nil, ctx.Err()
						}
						r.Errors++
						fmt.Fprintf(progress, "rtt %v %s run %d/%d %-10s error: %v\n", rtt, scName, run+1, cfg.Runs, c.Name(), err)
						continue
					}
					r.Samples = append(r.Samples, s)
					if s.Early {
						r.Early++
					}
					fmt.Fprintf(progress, "rtt %v %s run %d/%d %-10s dns %7.2f ms  handshake %7.2f ms  first byte %7.2f ms  dns queries %d\n",
						rtt, scName, run+1, cfg.Runs, c.Name(), ms(s.DNS), ms(s.Handshake), ms(s.FirstByte), s.DNSQueries)
				}
			}
			for i := range results {
				r := &results[i]
				var fb, hs, dn []time.Duration
				for _, s := range r.Samples {
					fb, hs, dn = append(fb, s.FirstByte), append(hs, s.Handshake), append(dn, s.DNS)
				}
				r.Runs = len(r.Samples)
				r.FirstByte, r.Handshake, r.DNS = Summarize(fb), Summarize(hs), Summarize(dn)
				r.DNSQueries = countQueries(r.Samples)
			}
			rep.Results = append(rep.Results, results...)
		}
	}
	if st, err := n.Relay().Stats(); err == nil {
		fmt.Fprintf(progress, "emulator: %d packets, mean %.1f µs late, %d over 1 ms late, compensation %.1f µs per hop; hosts' TCP congestion control %s\n",
			st.Late.Packets, float64(st.Late.MeanNs)/1e3, st.Late.Over1m, rep.CompensationUs, rep.TCPCongestion)
	}
	return rep, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// QueryCount sums up the DNS queries of a setting's visits.
type QueryCount struct {
	Median float64 `json:"median"`
	Min    int     `json:"min"`
	Max    int     `json:"max"`
}

func countQueries(samples []Sample) QueryCount {
	if len(samples) == 0 {
		return QueryCount{}
	}
	n := make([]int, len(samples))
	for i, s := range samples {
		n[i] = s.DNSQueries
	}
	slices.Sort(n)
	med := float64(n[len(n)/2])
	if len(n)%2 == 0 {
		med = float64(n[len(n)/2-1]+n[len(n)/2]) / 2
	}
	return QueryCount{Median: med, Min: n[0], Max: n[len(n)-1]}
}

// measure primes and sets the DNS caches for the scenario, then runs one
// measured visit.
func measure(ctx context.Context, c Contender, cl *Client, d *dnsSetup, sc Scenario, rtt time.Duration) (Sample, error) {
	timeout := 10*time.Second + 20*rtt
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if p, ok := c.(Primer); ok {
		if err := p.Prime(ctx, cl); err != nil {
			return Sample{}, fmt.Errorf("bench: priming: %w", err)
		}
	}
	d.stub.useCache = sc.StubCache
	d.stub.cache.flush()
	d.res.cache.flush()
	if !sc.Cold {
		// Warm: the answer is in the resolver's cache (and, for the stub
		// scenario, in the client's too).
		if _, err := d.stub.lookupA(ctx, cl.ServerName); err != nil {
			return Sample{}, err
		}
		if _, ok := c.(serviceLookups); ok {
			warmService(ctx, d.stub, cl.ServerName, int(cl.Port))
		}
		if !sc.StubCache {
			d.stub.cache.flush()
		}
	}
	before := d.res.queries.Load()
	s, err := c.RunClient(ctx, cl)
	s.DNSQueries = int(d.res.queries.Load() - before)
	if err != nil {
		return s, err
	}
	if s.FirstByte <= 0 || s.DNS < 0 || s.DNS > s.FirstByte || s.Handshake < 0 {
		return s, fmt.Errorf("bench: %s returned an inconsistent sample %+v", c.Name(), s)
	}
	return s, nil
}

// serviceLookups is implemented by contenders whose client asks, besides
// the address, for the records of ZTLS's parallel lookup (AAAA, Z-data TXT
// and CERT, TLSA, HTTPS). For warm scenarios the resolver caches those too.
type serviceLookups interface {
	serviceLookups()
}

// warmService puts the answers of ZTLS's parallel lookup (positive or
// negative) into the resolver's cache.
func warmService(ctx context.Context, s *stub, host string, port int) {
	qs := []struct {
		name  string
		qtype uint16
	}{
		{host, dns.TypeAAAA},
		{dnsresolver.ZDataName(host, port), dns.TypeTXT},
		{dnsresolver.ZDataName(host, port), dns.TypeCERT},
		{dnsresolver.TLSAName(host, port), dns.TypeTLSA},
		{dnsname.HTTPSOwner(host, port), dns.TypeHTTPS},
	}
	var wg sync.WaitGroup
	for _, q := range qs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.resolver.exchangeAny(ctx, dns.Fqdn(q.name), q.qtype)
		}()
	}
	wg.Wait()
}
