//go:build linux

package main

// Headless Chromium against an HTTPS record that carries Z-data
// (docs/ztls-spec.md, Section 8; issue 29, item 4): Chromium does not know
// key65370, so it must ignore it and keep the rest of the record (alpn,
// TurboTLS's key65280, the hint), resolve the name and load the page over
// TLS 1.3 from `ztls serve`, as if the key were not there.
//
// The test is only worth something if Chromium really asks for the HTTPS
// record, and asks it of our server. Chromium's own DNS client (not
// getaddrinfo) sends an HTTPS query beside A for an https:// URL; it reads
// the servers from /etc/resolv.conf, which cannot name a port. So the
// test makes a network namespace of its own, where the embedded authority
// (package dns/authority, in this process) listens on 127.0.0.1:53,
// `ztls serve` on 127.0.0.1:443 and the page's backend beside them, and
// runs Chromium there in a mount namespace of its own whose
// /etc/resolv.conf, /etc/nsswitch.conf and /etc/hosts are the test's
// (bind mounts, gone with the process). The authority records every
// question it gets, and the test fails unless one was the HTTPS question
// for the page's name. With Unbound in front (the second case), Unbound
// runs in the test's own namespace and Chromium's queries reach it
// through a relay on the namespace's port 53, so the authority's log shows
// what Unbound forwarded: a resolver that did not pass the HTTPS question
// on, or refused the record, would fail the test.
//
// Needs root (namespaces, mounts), nsenter and unshare (util-linux) and
// ip (iproute2); without them it is skipped.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/netns"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// chromiumHTTPSHost is the page's name: not localhost, which Chromium answers
// itself without DNS, and in no /etc/hosts.
const chromiumHTTPSHost = "www.ztls.test"

func TestChromiumHTTPSRecordWithZData(t *testing.T) {
	t.Run("authority", func(t *testing.T) { testChromiumHTTPSRecord(t, false, false) })
	t.Run("unbound-in-front", func(t *testing.T) { testChromiumHTTPSRecord(t, true, false) })
	// The control: the same record with key65370 listed in mandatory,
	// which Section 8.1 forbids. Chromium must then drop the record
	// (RFC 9460, Section 8: a client that does not know a mandatory key
	// ignores the RR) and still load the page from the A record; the
	// net log check below sees the difference.
	t.Run("mandatory-key-control", func(t *testing.T) { testChromiumHTTPSRecord(t, false, true) })
}

func testChromiumHTTPSRecord(t *testing.T, viaUnbound, mandatory bool) {
	chromium := lookChromium(t)
	for _, tool := range []string{"nsenter", "unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (Debian packages util-linux, iproute2): %v", tool, err)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes network and mount namespaces")
	}
	ns := newTestNetns(t)

	// The site: a certificate for the name, its Z-data for port 443, and
	// the HTTPS record carrying it beside alpn, a hint and TurboTLS's key.
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{chromiumHTTPSHost}})
	cert, key := leaf.WritePEM(t, dir)
	sum := sha256.Sum256(leaf.Cert.RawSubjectPublicKeyInfo)
	spki := base64.StdEncoding.EncodeToString(sum[:])
	zd := filepath.Join(dir, "zd")
	run(t, "zdata", "new", "--host", chromiumHTTPSHost, "--port", "443", "--cert", cert, "--key", key, "--out", zd)
	https := zdataHTTPSRecord(t, zd)
	if mandatory {
		https.Value = append([]dns.SVCBKeyValue{&dns.SVCBMandatory{Code: []dns.SVCBKey{zdata.DefaultSvcParamKey}}}, https.Value...)
	}
	zones, questions := chromiumZone(t, https)

	// The zone answers the HTTPS question with the record, key65370 and
	// key65280 in it (what Chromium is then sent).
	checkHTTPSAnswer(t, zones, https)

	dnsAt := "127.0.0.1:53" // in the namespace: the address resolv.conf names
	relayed := &relayLog{}
	var srv *authority.Server
	if viaUnbound {
		// The authority on a free loopback port here, Unbound in front
		// of it, and a relay from the namespace's port 53 to Unbound.
		pc, ln, err := authority.ListenUDPAndTCP("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv = serveAuthority(t, zones, questions, pc, ln, false)
		u := dnstest.StartUnbound(t, dnstest.UnboundOptions{StubZones: map[string]string{"ztls.test.": pc.LocalAddr().String()}})
		relayUDP(t, ns.listenPacket(t, dnsAt), u.Addr, relayed)
	} else {
		srv = serveAuthority(t, zones, questions, ns.listenPacket(t, dnsAt), ns.listen(t, dnsAt), true)
	}

	// The page's backend and `ztls serve` in front of it, on port 443.
	backend := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><html><body><p id="p">page-through-https-record</p></body></html>`)
	}))
	backend.Listener.Close()
	backend.Listener = ns.listen(t, "127.0.0.1:0")
	backend.Start()
	t.Cleanup(backend.Close)
	serveLog := ns.startZTLS(t, "ZTLS on", "serve", "-v", "--listen", "127.0.0.1:443", "--zdata", zd,
		"--cert", cert, "--key", key, "--backend", backend.URL)

	netlog := filepath.Join(dir, "netlog.json")
	dom := chromiumFetch(t, ns.chromium(t, chromium), spki, "https://"+chromiumHTTPSHost+"/",
		"--log-net-log="+netlog, "--net-log-capture-mode=Everything")
	if !strings.Contains(dom, "page-through-https-record") {
		t.Fatalf("chromium did not show the page:\n%s", dom)
	}
	asked := questions.list()
	t.Logf("the authority was asked: %s", strings.Join(asked, ", "))
	t.Logf("the authority's counters: %+v", srv.Stats())
	if !questions.has(dns.Fqdn(chromiumHTTPSHost), dns.TypeHTTPS) {
		t.Fatalf("the authority never got the HTTPS question for %s (it got: %s): Chromium did not ask it, "+
			"so the page loading proves nothing about the record", chromiumHTTPSHost, strings.Join(asked, ", "))
	}
	if !questions.has(dns.Fqdn(chromiumHTTPSHost), dns.TypeA) {
		t.Fatalf("the authority never got the A question for %s (it got: %s)", chromiumHTTPSHost, strings.Join(asked, ", "))
	}
	// Chromium's view: the HTTPS answer parsed and kept as the endpoint's
	// metadata with the record's ALPN list. A record Chromium had found
	// malformed, or incompatible (an unknown key listed as mandatory),
	// would have left no metadata.
	alpns := chromiumHTTPSMetadata(t, netlog, chromiumHTTPSHost)
	if mandatory {
		if len(alpns) != 0 {
			t.Fatalf("Chromium kept a record whose mandatory key it does not know (metadata %q)", alpns)
		}
	} else if !slices.Contains(alpns, "h2,http/1.1") {
		t.Fatalf("Chromium kept no HTTPS record metadata with alpn h2,http/1.1 for %s (its net log has %q)", chromiumHTTPSHost, alpns)
	}
	if viaUnbound {
		// What Unbound handed Chromium is the record, byte for byte.
		if got := relayed.https(); len(got) != 1 || got[0] != withoutTTL(https) {
			t.Fatalf("Chromium got the HTTPS answer %q through Unbound, want %q", got, withoutTTL(https))
		}
	}
	// The server's view: a TLS 1.3 handshake (Chromium knows no ZTLS).
	waitOutput(t, serveLog, "TLS 1.3, ")
	t.Logf("server:\n%s", serveLog.String())
}

// zdataHTTPSRecord builds the site's HTTPS record from its Z-data
// directory as Section 8 has it: alpn h2 and http/1.1, an ipv4hint,
// TurboTLS's key65280 and the Z-data of the current and next periods.
func zdataHTTPSRecord(t *testing.T, zd string) *dns.HTTPS {
	t.Helper()
	d, err := zdata.LoadDir(zd)
	if err != nil {
		t.Fatal(err)
	}
	now := clock.Now()
	recs := d.Records(now)
	if len(recs) == 0 {
		t.Fatal("zdata new made no record valid now")
	}
	turboKey := turbo.HTTPSRecord(chromiumHTTPSHost, 443, 443, 300).Value
	rr, err := zdata.HTTPSRecord(zdata.HTTPSParams{
		Host: chromiumHTTPSHost, Port: 443, ALPN: []string{"h2", "http/1.1"},
		IPv4Hint: []net.IP{net.IPv4(127, 0, 0, 1)}, Extra: turboKey,
		Records: recs, TTL: zdata.TTLFor(recs, now, 5*time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("HTTPS record: %s", rr)
	return rr
}

// checkHTTPSAnswer asks the zone, as a resolver would, for the HTTPS
// record and checks the answer carries it with both private keys.
func checkHTTPSAnswer(t *testing.T, zones *authority.Zones, want *dns.HTTPS) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(chromiumHTTPSHost), dns.TypeHTTPS)
	a := zones.Answer(q)
	if a.Rcode != dns.RcodeSuccess || len(a.Answer) != 1 {
		t.Fatalf("the zone answers the HTTPS question with %s", a)
	}
	got, ok := a.Answer[0].(*dns.HTTPS)
	if !ok || got.String() != want.String() {
		t.Fatalf("the zone answers the HTTPS question with %v, want %v", a.Answer[0], want)
	}
	keys := map[dns.SVCBKey]bool{}
	for _, kv := range got.Value {
		keys[kv.Key()] = true
	}
	if !keys[zdata.DefaultSvcParamKey] || !keys[turbo.KeyUDPPort] || !keys[dns.SVCB_ALPN] {
		t.Fatalf("the HTTPS record lacks alpn, key65280 or key%d: %s", zdata.DefaultSvcParamKey, got)
	}
}

// chromiumZone is ztls.test with the site's address and HTTPS record,
// and the log of the questions asked of it.
func chromiumZone(t *testing.T, https *dns.HTTPS) (*authority.Zones, *questionLog) {
	t.Helper()
	z, err := authority.LoadZone(strings.NewReader(testZone), "ztls.test.", "ztls.test.zone")
	if err != nil {
		t.Fatal(err)
	}
	if err := z.ReplaceRRset(https.Hdr.Name, dns.TypeHTTPS, []dns.RR{https}); err != nil {
		t.Fatal(err)
	}
	zones, err := authority.NewZones(z)
	if err != nil {
		t.Fatal(err)
	}
	return zones, &questionLog{}
}

// questionLog records the questions the authority got.
type questionLog struct {
	mu sync.Mutex
	qs []dns.Question
}

func (l *questionLog) middleware(next authority.Handler) authority.Handler {
	return authority.HandlerFunc(func(ctx context.Context, w authority.ResponseWriter, r *dns.Msg) {
		if len(r.Question) == 1 {
			l.mu.Lock()
			l.qs = append(l.qs, r.Question[0])
			l.mu.Unlock()
		}
		next.ServeDNS(ctx, w, r)
	})
}

func (l *questionLog) has(name string, qtype uint16) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.qs {
		if strings.EqualFold(q.Name, name) && q.Qtype == qtype {
			return true
		}
	}
	return false
}

func (l *questionLog) list() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, q := range l.qs {
		out = append(out, q.Name+" "+dns.TypeToString[q.Qtype])
	}
	return out
}

// serveAuthority serves zones on pc and ln until the test ends, logging
// each question.
// asStub serves a stub resolver rather than a resolver: Chromium asking
// the authority itself (which no browser does on the Internet) asks many
// other names too (REFUSED), which trips Response Rate Limiting, so RRL
// is off. The amplification cap stays at its default: Chromium sends no
// DNS cookie and a 37-byte query without EDNS, and the HTTPS answer with
// two Z-data records (about 380 bytes, over 10 times that) still comes
// whole over UDP because the cap never cuts below 1232 bytes
// (authority.DefaultAmplificationFloor). Through a resolver (Unbound in
// front) every default stays.
func serveAuthority(t *testing.T, zones *authority.Zones, log *questionLog, pc net.PacketConn, ln net.Listener, asStub bool) *authority.Server {
	t.Helper()
	srv := &authority.Server{Handler: authority.Chain(zones, log.middleware, authority.CheckQuery)}
	if asStub {
		srv.RateLimit = &authority.RateLimit{}
	}
	go srv.ServeUDP(pc)
	go srv.ServeTCP(ln)
	t.Cleanup(func() { srv.Close() })
	return srv
}

// relayUDP passes each datagram that arrives on pc to upstream and its
// answer back, so that a client whose resolv.conf says port 53 can ask a
// resolver listening elsewhere. The HTTPS records in the answers go to
// log.
func relayUDP(t *testing.T, pc net.PacketConn, upstream string, log *relayLog) {
	t.Helper()
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 65535)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			q := append([]byte(nil), buf[:n]...)
			go func() {
				c, err := net.Dial("udp", upstream)
				if err != nil {
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second)) // real time: Deadline( of a socket
				if _, err := c.Write(q); err != nil {
					return
				}
				a := make([]byte, 65535)
				m, err := c.Read(a)
				if err != nil {
					return
				}
				log.note(a[:m])
				pc.WriteTo(a[:m], from)
			}()
		}
	}()
}

// relayLog keeps the HTTPS records of the answers relayed, as text.
type relayLog struct {
	mu  sync.Mutex
	rrs []string
}

func (l *relayLog) note(answer []byte) {
	var m dns.Msg
	if m.Unpack(answer) != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, rr := range m.Answer {
		if h, ok := rr.(*dns.HTTPS); ok {
			l.rrs = append(l.rrs, withoutTTL(h))
		}
	}
}

// withoutTTL is rr as text with its TTL at 0: Unbound counts TTLs down.
func withoutTTL(rr dns.RR) string {
	c := dns.Copy(rr)
	c.Header().Ttl = 0
	return c.String()
}

func (l *relayLog) https() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Compact(slices.Clone(l.rrs))
}

// chromiumHTTPSMetadata reads Chromium's net log (--log-net-log) and
// returns, for each HTTPS answer its DNS client got for host, the ALPN
// lists of the endpoint metadata it kept from it (comma-joined).
func chromiumHTTPSMetadata(t *testing.T, file, host string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("chromium wrote no net log: %v", err)
	}
	var log struct {
		Constants struct {
			LogEventTypes map[string]int `json:"logEventTypes"`
		} `json:"constants"`
		Events []struct {
			Type   int             `json:"type"`
			Params json.RawMessage `json:"params"`
		} `json:"events"`
	}
	// The results of one DNS task's answers (other events' results are
	// shaped otherwise).
	type results struct {
		Results []struct {
			DomainName string `json:"domain_name"`
			QueryType  string `json:"query_type"`
			Metadatas  []struct {
				Value struct {
					ALPNs []string `json:"supported_protocol_alpns"`
				} `json:"metadata_value"`
			} `json:"metadatas"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &log); err != nil {
		// A log cut short ends inside its events list.
		trimmed := strings.TrimRight(strings.TrimSpace(string(b)), ",")
		if err2 := json.Unmarshal([]byte(trimmed+"]}"), &log); err2 != nil {
			t.Fatalf("chromium's net log: %v", err)
		}
	}
	want, ok := log.Constants.LogEventTypes["HOST_RESOLVER_DNS_TASK_EXTRACTION_RESULTS"]
	if !ok {
		t.Fatal("chromium's net log names no HOST_RESOLVER_DNS_TASK_EXTRACTION_RESULTS events (another Chromium version?)")
	}
	var out []string
	for _, e := range log.Events {
		var rs results
		if e.Type != want || json.Unmarshal(e.Params, &rs) != nil {
			continue
		}
		for _, r := range rs.Results {
			if r.QueryType != "HTTPS" || !strings.EqualFold(strings.TrimSuffix(r.DomainName, "."), host) {
				continue
			}
			for _, m := range r.Metadatas {
				out = append(out, strings.Join(m.Value.ALPNs, ","))
			}
		}
	}
	return out
}

// testNetns is a network namespace held by a sleeping process until the
// test ends; its loopback interface is up.
type testNetns struct {
	path string // /proc/PID/ns/net
	dir  string // resolv.conf, nsswitch.conf and hosts for Chromium
}

func newTestNetns(t *testing.T) *testNetns {
	t.Helper()
	// An interface with an address besides lo (a veth pair, both ends
	// here): with loopback alone Chromium may take itself to be offline
	// (ERR_INTERNET_DISCONNECTED). No IPv6 link-local addresses, whose
	// duplicate detection would change the addresses under Chromium.
	cmd, err := netns.Command("sh", "-c", "ip link add ztls0 type veth peer name ztls1 && "+
		"ip link set ztls0 addrgenmode none && ip link set ztls1 addrgenmode none && "+
		"ip addr add 192.0.2.1/24 dev ztls0 && ip link set ztls0 up && ip link set ztls1 up && exec sleep 3600")
	if err != nil {
		t.Skip(err)
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		if errors.Is(err, syscall.EPERM) {
			t.Skipf("cannot make a network namespace: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	ns := &testNetns{path: netns.Path(cmd.Process.Pid), dir: t.TempDir()}
	// sh becomes sleep once the interfaces are up: wait for that.
	deadline := time.Now().Add(10 * time.Second) // real time: Deadline( for the shell
	for {
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid))
		if strings.TrimSpace(string(comm)) == "sleep" {
			break
		}
		if time.Now().After(deadline) { // real time: Deadline( for the shell
			t.Fatal("the namespace's interfaces did not come up (ip link add ... type veth failed?)")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for name, body := range map[string]string{
		"resolv.conf":   "nameserver 127.0.0.1\n",
		"nsswitch.conf": "hosts: files dns\n",
		"hosts":         "127.0.0.1 localhost\n",
	} {
		if err := os.WriteFile(filepath.Join(ns.dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ns
}

// in runs fn on a locked OS thread inside the namespace: a socket belongs
// to the namespace of the thread that makes it. If the thread cannot go
// back, it is never unlocked and dies with its goroutine.
func (ns *testNetns) in(fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open(ns.path)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", ns.path, err)
			return
		}
		err = fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func (ns *testNetns) listen(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.in(func() (err error) { ln, err = net.Listen("tcp", addr); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func (ns *testNetns) listenPacket(t *testing.T, addr string) net.PacketConn {
	t.Helper()
	var pc net.PacketConn
	if err := ns.in(func() (err error) { pc, err = net.ListenPacket("udp", addr); return }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// startZTLS runs the ztls binary with args in the namespace until the
// test ends, waiting for ready in its output, which it returns.
func (ns *testNetns) startZTLS(t *testing.T, ready string, args ...string) *testproc.Buffer {
	t.Helper()
	cmd := exec.Command("nsenter", append([]string{"--net=" + ns.path, "--", ztlsBinary(t)}, args...)...)
	out := &testproc.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		testproc.WaitOrKill(cmd, 5*time.Second)
	})
	waitOutput(t, out, ready)
	return out
}

// waitOutput waits up to 15 s for s in a process's output.
func waitOutput(t *testing.T, out *testproc.Buffer, s string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second) // real time: Deadline( for a process
	for !strings.Contains(out.String(), s) {
		if time.Now().After(deadline) { // real time: Deadline( for a process
			t.Fatalf("no %q in the output:\n%s", s, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// chromium writes a script that runs the chromium binary inside the
// namespace, in a mount namespace of its own where /etc/resolv.conf,
// /etc/nsswitch.conf and /etc/hosts are ns.dir's, and returns its path.
// nsenter and unshare exec the next program, so the script's process is
// Chromium's (chromiumFetch kills its process group).
func (ns *testNetns) chromium(t *testing.T, chromium string) string {
	t.Helper()
	var mounts []string
	for _, f := range []string{"resolv.conf", "nsswitch.conf", "hosts"} {
		mounts = append(mounts, fmt.Sprintf("mount --bind '%s' /etc/%s", filepath.Join(ns.dir, f), f))
	}
	script := fmt.Sprintf("#!/bin/sh\nexec nsenter --net='%s' -- unshare --mount --propagation private -- sh -c '%s && exec \"$0\" \"$@\"' '%s' \"$@\"\n",
		ns.path, strings.ReplaceAll(strings.Join(mounts, " && "), "'", `'\''`), chromium)
	p := filepath.Join(t.TempDir(), "chromium-in-netns")
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}
