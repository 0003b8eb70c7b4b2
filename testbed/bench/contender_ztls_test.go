package bench

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/testbed/hosts"
)

// loopbackWorld is the benchmark's DNS (authority, caching resolver, stub)
// and PKI on 127.0.0.1, for testing the engine contenders without
// namespaces. The client worker runs as a child process of the test binary.
type loopbackWorld struct {
	d   *dnsSetup
	p   *pki
	dir string
	dot *dotServer // the resolver's DoT listener
}

func newLoopbackWorld(t *testing.T) *loopbackWorld {
	t.Helper()
	dir := t.TempDir()
	p, err := makePKI(dir, ServerName, "")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsSetup{auth: &authority{rrs: map[rrKey][]dns.RR{}}}
	t.Cleanup(d.close)
	// UDP and TCP on one port, as a DNS server is reached.
	serve := func(h dns.Handler) netip.AddrPort {
		for {
			pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := pc.LocalAddr().(*net.UDPAddr).AddrPort()
			ln, err := net.Listen("tcp4", addr.String())
			if err != nil {
				pc.Close() // that TCP port is taken: another
				continue
			}
			d.closers = append(d.closers, serveDNS(pc, ln, h))
			return addr
		}
	}
	var dialer net.Dialer
	authAddr := serve(d.auth)
	up, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.closers = append(d.closers, func() { up.Close() })
	d.res = &resolver{cache: newCache(), upstream: newExchanger(up, authAddr, dialer.DialContext)}
	resAddr := serve(d.res)
	cl, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d.closers = append(d.closers, func() { cl.Close() })
	d.stub = &stub{cache: newCache(), resolver: newExchanger(cl, resAddr, dialer.DialContext)}
	d.auth.add(&dns.A{Hdr: dns.RR_Header{Name: ServerName + ".", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
		A: net.IPv4(127, 0, 0, 1)})
	dot, err := startDoT(nil, netip.MustParseAddrPort("127.0.0.1:0"), d.res, p.ca)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dot.stop)
	return &loopbackWorld{d: d, p: p, dir: dir, dot: dot}
}

func freePort(t *testing.T) uint16 {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return uint16(ln.Addr().(*net.TCPAddr).Port)
}

// start starts contender name's server on loopback; publish false keeps
// its Z-data out of DNS.
func (w *loopbackWorld) start(t *testing.T, name string, publish bool) (Contender, *Client) {
	t.Helper()
	c, err := NewContender(name)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	cfg := ServerConfig{
		Addr: netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), port),
		Cert: w.p.cert, CertFile: w.p.certFile, KeyFile: w.p.keyFile,
		Dir: w.dir, Files: files(), Publish: w.d.auth.replace, // BFE keys made once for every cell
	}
	if !publish {
		cfg.Publish = func([]dns.RR) {}
	}
	srv, err := c.StartServer(context.Background(), nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	req, path := request(Response5B)
	cl := &Client{ServerName: ServerName, Port: port, Request: req, Expect: files()[path],
		RootCAs: w.p.pool, CAFile: w.p.caFile, Dir: w.dir, Scenario: Scenarios["local-warm"], dns: w.d.stub, dot: w.dot}
	return c, cl
}

// visit runs one measured visit the way the harness does.
func (w *loopbackWorld) visit(t *testing.T, c Contender, cl *Client) (Sample, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return measure(ctx, c, cl, w.d, cl.Scenario, 0)
}

// visits starts contender name (publishing) in w for scenario scen and
// makes n visits, failing t on a visit's error; check judges visit i's
// sample. It returns the contender's client.
func (w *loopbackWorld) visits(t *testing.T, name, scen string, n int, check func(i int, s Sample)) *Client {
	t.Helper()
	c, cl := w.start(t, name, true)
	cl.Scenario = Scenarios[scen]
	for i := 0; i < n; i++ {
		s, err := w.visit(t, c, cl)
		if err != nil {
			t.Fatalf("visit %d: %v", i, err)
		}
		check(i, s)
	}
	return cl
}

// TestEngineContendersLoopback drives tls, ztls and tls-0rtt end to end on
// loopback through the real worker process: the Z-data published by the
// ztls server is found through the benchmark's resolver, the request rides
// as early data and is answered; tls-0rtt resumes the primed ticket.
func TestEngineContendersLoopback(t *testing.T) {
	w := newLoopbackWorld(t)
	for _, name := range []string{"tls", "ztls", "tls-0rtt", "tls-prefetch", "ztls-prefetch", "ztls-bfe", "ztls-bfe-prefetch", "ztls-https", "ztls-https-held"} {
		for _, scen := range []string{"local-warm", "stub", "local-cold"} {
			t.Run(name+"/"+scen, func(t *testing.T) {
				w.visits(t, name, scen, 2, func(i int, s Sample) {
					if s.FirstByte <= 0 || s.DNS > s.FirstByte || s.Handshake <= 0 {
						t.Fatalf("visit %d: inconsistent sample %+v", i, s)
					}
					if want := name != "tls" && name != "tls-prefetch"; s.Early != want {
						t.Errorf("visit %d: early data accepted %v, want %v", i, s.Early, want)
					}
				})
			})
		}
	}
}

// TestEngineContendersTwinWindow runs the BFE cells of
// TestEngineContendersLoopback in a test process (and its client workers)
// whose clock reads the last minutes of an hour, when the next period's
// v2 twin is published (docs/ztls-spec.md, Section 7.1). Their TXT answer
// then held four records, 1.37 kB, which the benchmark's DNS sent whole
// over UDP and the client's resolver dropped: every visit failed with no
// Z-data (TestLoopbackDNSAnswersOverTCPWhenTruncated, and the answer's
// size: zdata's TestTwinWindowAnswersFit).
func TestEngineContendersTwinWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("generates the BFE keys once per instant")
	}
	for _, at := range []string{"57:30", "59:30"} {
		t.Run(at, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestEngineContendersLoopback$/^ztls-bfe", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), clock.EnvOffset+"="+clockOffsetAt(t, at))
			out, err := cmd.CombinedOutput()
			if err != nil || strings.Count(string(out), "--- PASS: TestEngineContendersLoopback/ztls-bfe") != 6 {
				t.Fatalf("the ztls-bfe cells at %s: %v\n%s", at, err, out)
			}
		})
	}
}

// clockOffsetAt is clock.OffsetReading, as ZTLS_CLOCK_OFFSET's value.
func clockOffsetAt(t *testing.T, mmss string) string {
	t.Helper()
	d, err := clock.OffsetReading(mmss)
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// TestZTLSWithoutZDataIsAnError: a ztls sample that could not use ZTLS
// (here: nothing published) is counted as an error, never as a fast TLS.
func TestZTLSWithoutZDataIsAnError(t *testing.T) {
	w := newLoopbackWorld(t)
	c, cl := w.start(t, "ztls", false)
	_, err := w.visit(t, c, cl)
	if err == nil || !strings.Contains(err.Error(), "ztls") {
		t.Fatalf("got %v, want a ztls error", err)
	}
}

// TestTLS0RTTNeedsPrime: resuming without a primed ticket is refused by the
// worker with a clear error.
// TestZTLSHTTPSAsksOneQuestionFewer: the same visit through the HTTPS
// record (ztls-https) and through TXT (ztls), in the local-warm scenario
// where every question reaches the resolver: the HTTPS path leaves out
// the TXT question and nothing else, and the Z-data comes from where each
// says (checkVisit checks the report's ZDataFrom); with the leaf held
// from the previous visit (ztls-https-held), TLSA and CERT go too.
func TestZTLSHTTPSAsksOneQuestionFewer(t *testing.T) {
	w := newLoopbackWorld(t)
	queries := map[string]int{}
	for _, name := range []string{"ztls", "ztls-https", "ztls-https-held"} {
		c, cl := w.start(t, name, true)
		s, err := w.visit(t, c, cl)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !s.Early {
			t.Fatalf("%s: no early data", name)
		}
		queries[name] = s.DNSQueries
	}
	t.Logf("queries per visit: %v", queries)
	if queries["ztls"] < 2 || queries["ztls-https"] != queries["ztls"]-1 {
		t.Fatalf("queries per visit: ztls %d, ztls-https %d; want one fewer through HTTPS", queries["ztls"], queries["ztls-https"])
	}
	// With the leaf held, TLSA and CERT are not asked either: A, AAAA and
	// HTTPS, what a browser asks anyway.
	if queries["ztls-https-held"] != queries["ztls-https"]-2 {
		t.Fatalf("queries per visit: ztls-https %d, ztls-https-held %d; want TLSA and CERT fewer", queries["ztls-https"], queries["ztls-https-held"])
	}
}

func TestTLS0RTTNeedsPrime(t *testing.T) {
	w := newLoopbackWorld(t)
	_, cl := w.start(t, "tls-0rtt", true)
	e := &engineContender{name: "tls-0rtt", mode: "tls", resume: true}
	t.Cleanup(e.slot.stop)
	_, err := e.RunClient(context.Background(), cl)
	if err == nil || !strings.Contains(err.Error(), "prime first") {
		t.Fatalf("got %v, want the no-session error", err)
	}
}

func TestCheckVisit(t *testing.T) {
	ok := dial.Report{Mode: "ztls", EarlyData: dial.EarlyReport{Offered: true, Accepted: true}, Timing: dial.Timing{DNS: 1, TCPConnect: 2, Handshake: 3, FirstByte: 6},
		ZDataFrom: dial.ZDataFromTXT}
	viaHTTPS := ok
	viaHTTPS.ZDataFrom = dial.ZDataFromHTTPS
	expect := []byte("hello")
	cases := []struct {
		name string
		r    dial.Report
		resp string
		want string // "" for no error
	}{
		{"ztls", ok, "hello", ""},
		{"ztls", ok, "hell", "response"},
		{"ztls", dial.Report{Mode: "tls", FallbackReason: "x", Timing: ok.Timing}, "hello", "fallback: x"},
		{"ztls", dial.Report{Mode: "ztls", EarlyData: dial.EarlyReport{Offered: true}, Timing: ok.Timing}, "hello", "accepted false"},
		{"ztls", viaHTTPS, "hello", "want the TXT record"},
		{"ztls-https", viaHTTPS, "hello", ""},
		{"ztls-https", ok, "hello", `Z-data from "txt"`},
		{"ztls-https", dial.Report{Mode: "tls", FallbackReason: "x", Timing: ok.Timing}, "hello", "fallback: x"},
		{"tls-0rtt", dial.Report{Mode: "tls", TLS: dial.TLSReport{Resumed: true}, EarlyData: dial.EarlyReport{Offered: true, Accepted: true}, Timing: ok.Timing}, "hello", ""},
		{"tls-0rtt", dial.Report{Mode: "tls", TLS: dial.TLSReport{Resumed: false}, EarlyData: dial.EarlyReport{Offered: true, Accepted: true}, Timing: ok.Timing}, "hello", "resumed false"},
		{"tls", dial.Report{Mode: "tls", Timing: ok.Timing}, "hello", ""},
		{"tls", dial.Report{Mode: "tls"}, "hello", "no first byte"},
	}
	for i, tc := range cases {
		err := checkVisit(tc.name, &workerResult{Report: tc.r, Response: []byte(tc.resp)}, expect)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("case %d: unexpected error %v", i, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("case %d: got %v, want an error with %q", i, err, tc.want)
		}
	}
	s := sampleOf(ok)
	if s.DNS != time.Millisecond || s.Handshake != 5*time.Millisecond || s.FirstByte != 6*time.Millisecond || !s.Early {
		t.Errorf("sampleOf: %+v", s)
	}
}

func TestParseJob(t *testing.T) {
	good := `{"addr":"www.ztls.test:4431","mode":"ztls","resolver":"10.77.0.2:53","ca_file":"/x","request":"R0VU","expect_len":5}`
	j, err := parseJob([]byte(good))
	if err != nil || j.Mode != "ztls" || string(j.Request) != "GET" {
		t.Fatalf("good job: %+v, %v", j, err)
	}
	bad := []string{
		``, `{`, `[]`, `{"addr":"nohost","mode":"tls","resolver":"1.2.3.4:53","expect_len":5}`,
		`{"addr":"h:0","mode":"tls","resolver":"1.2.3.4:53","expect_len":5}`,
		`{"addr":"h:1","mode":"quic","resolver":"1.2.3.4:53","expect_len":5}`,
		`{"addr":"h:1","mode":"tls","resolver":"nowhere","expect_len":5}`,
		`{"addr":"h:1","mode":"tls","resolver":"1.2.3.4:53","expect_len":0}`,
		`{"addr":"h:1","mode":"tls","resolver":"1.2.3.4:53","expect_len":5,"timeout_ms":-1}`,
		`{"addr":"h:1","mode":"tls","resolver":"1.2.3.4:53","expect_len":5,"prime":true,"resume":true}`,
		`{"addr":"h:1","mode":"tls","resolver":"1.2.3.4:53","expect_len":5,"unknown":1}`,
		`{"addr":"h:1","mode":"ztls","resolver":"1.2.3.4:53","expect_len":5,"zdata_from":"dns"}`,
		`{"addr":"h:1","mode":"ztls","resolver":"1.2.3.4:53","expect_len":5,"keep_leaf":true,"held_leaf":true}`,
	}
	for _, b := range bad {
		if _, err := parseJob([]byte(b)); err == nil || !strings.HasPrefix(err.Error(), "bench: worker job") {
			t.Errorf("%s: got %v, want a worker job error", b, err)
		}
	}
}

// TestWorkerMainBadInput: the worker answers a bad line with an error and
// goes on; it ends when its input ends.
func TestWorkerMainBadInput(t *testing.T) {
	r, w := io.Pipe()
	out, outW := io.Pipe()
	done := make(chan int, 1)
	go func() { done <- serveJobs(nil, r, outW, serveClientJob); outW.Close() }()
	go func() { w.Write([]byte("not json\n")); w.Close() }()
	got, _ := io.ReadAll(out)
	if !strings.Contains(string(got), `"error":"bench: worker job`) {
		t.Errorf("worker said %q", got)
	}
	if rc := <-done; rc != 0 {
		t.Errorf("worker exit %d", rc)
	}
}

func FuzzParseJob(f *testing.F) {
	f.Add([]byte(`{"addr":"www.ztls.test:4431","mode":"ztls","resolver":"10.77.0.2:53","ca_file":"/x","request":"R0VU","expect_len":5}`))
	f.Add([]byte(`{"addr":"[::1]:1","mode":"tls","resolver":"[::1]:53","expect_len":1,"prime":true}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := parseJob(b)
		if err != nil {
			return
		}
		if j.Mode != "tls" && j.Mode != "ztls" || j.ExpectLen < 1 || (j.Prime && j.Resume) {
			t.Fatalf("accepted a bad job %+v", j)
		}
	})
}

// TestSmallScenarioZTLS is the ztls claim on the emulated WAN, in the
// default test run: at 20 ms RTT, ZTLS's first response comes one round
// trip before TLS 1.3's (bounds in RTT units; medians of a few runs).
func TestSmallScenarioZTLS(t *testing.T) {
	const rtt = 20 * time.Millisecond
	rep := runSmallScenario(t, 60*time.Second, Config{
		RTTs:      []time.Duration{rtt},
		Runs:      5,
		Protocols: []string{"tls", "ztls", "tls-0rtt"},
		Scenarios: []string{"local-warm"},
		Realtime:  true,
	})
	by := map[string]Result{}
	for _, r := range rep.Results {
		by[r.Protocol] = r
		if r.Runs < 4 {
			t.Fatalf("%s: only %d of 5 runs succeeded", r.Protocol, r.Runs)
		}
	}
	inRTT := func(d float64) float64 { return d / float64(rtt/time.Millisecond) }
	// After the lookup: TLS 1.3 pays TCP, TLS and the request (3 RTT);
	// ZTLS and 0-RTT resumption pay TCP and one flight (2 RTT).
	bounds := map[string][2]float64{"tls": {2.5, 3.6}, "ztls": {1.5, 2.6}, "tls-0rtt": {1.5, 2.6}}
	for name, b := range bounds {
		r := by[name]
		got := inRTT(r.FirstByte.Median - r.DNS.Median)
		if got < b[0] || got > b[1] {
			t.Errorf("%s: first response %.2f RTT after the lookup, want %.1f to %.1f", name, got, b[0], b[1])
		}
		if name != "tls" && r.Early != r.Runs {
			t.Errorf("%s: early data accepted in %d of %d runs", name, r.Early, r.Runs)
		}
		t.Logf("%-8s dns %.2f handshake %.2f first byte %.2f ms (%.2f RTT after DNS)", name, r.DNS.Median, r.Handshake.Median, r.FirstByte.Median, got)
	}
	saved := inRTT(by["tls"].FirstByte.Median - by["ztls"].FirstByte.Median)
	if saved < 0.8 || saved > 1.2 {
		t.Errorf("ztls saves %.2f RTT against tls, want 1 ± 0.2", saved)
	}
}

// runSmallScenario runs cfg on emulated hosts within timeout, its
// progress on stderr under -v; t is skipped where the hosts cannot be
// built, and fails if the run does.
func runSmallScenario(t *testing.T, timeout time.Duration, cfg Config) *Report {
	t.Helper()
	if err := hosts.Available(); err != nil {
		t.Skipf("skipping: cannot build emulated hosts here: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if testing.Verbose() {
		cfg.Progress = os.Stderr
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}
