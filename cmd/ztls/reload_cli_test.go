package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// SIGHUP reloads the certificate and the Z-data while clients keep
// connecting: none of their connections fails, and the new certificate is
// served from then on.
func TestCLIServeSIGHUPReloadUnderLoad(t *testing.T) {
	s := newSite(t)
	d, err := zdata.LoadDir(s.zd)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := d.Config.Cert, d.Config.Key
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	_, log, cmd := startProc(t, "ZTLS on", "serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello")
	defer stopCmd(cmd)
	roots, err := tls13.LoadCertPool(s.ca)
	if err != nil {
		t.Fatal(err)
	}

	var ok, failed atomic.Int64
	var lastSerial atomic.Value
	var failures sync.Map
	stopLoad := untilStopped(4, func() {
		c, err := tls.DialWithDialer(&netDialer, "tcp", addr, &tls.Config{ServerName: s.host, RootCAs: roots, MinVersion: tls.VersionTLS13})
		if err != nil {
			failed.Add(1)
			failures.Store(err.Error(), true)
			return
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /")
		b, err := io.ReadAll(c)
		if err != nil || string(b) != "hello" {
			failed.Add(1)
			failures.Store("answer: "+string(b), true)
		} else {
			ok.Add(1)
			lastSerial.Store(c.ConnectionState().PeerCertificates[0].SerialNumber.String())
		}
		c.Close()
	})
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := clock.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if clock.Now().After(deadline) {
				t.Fatalf("waiting for %s", what)
			}
		}
	}
	waitFor("connections before the reload", func() bool { return ok.Load() > 20 })

	// A new certificate from the same CA replaces the files in place.
	next := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{s.host}})
	newCert, newKey := next.WritePEM(t, t.TempDir())
	for src, dst := range map[string]string{newCert: certFile, newKey: keyFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "SIGHUP: reloaded the certificate")
	log.waitFor(t, "SIGHUP: reloaded Z-data")
	want := next.Cert.SerialNumber.String()
	waitFor("the new certificate served", func() bool { s, _ := lastSerial.Load().(string); return s == want })
	n := ok.Load()
	waitFor("connections after the reload", func() bool { return ok.Load() > n+20 })
	stopLoad()
	if failed.Load() != 0 {
		var why []string
		failures.Range(func(k, _ any) bool { why = append(why, k.(string)); return true })
		t.Fatalf("%d of %d connections failed across the reload: %v", failed.Load(), failed.Load()+ok.Load(), why)
	}
	t.Logf("%d connections, none failed, across a certificate and Z-data reload", ok.Load())
}

var netDialer = net.Dialer{Timeout: 5 * time.Second}

// dns serve reloads its zone files (and Z-data) on SIGHUP, keeping the
// Z-data records in the new zone; a file that no longer loads leaves the
// served data as it was.
func TestCLIDNSServeSIGHUPReload(t *testing.T) {
	s := newSite(t)
	zone := s.dir + "/ztls.test.zone"
	writeFile(t, zone, testZone)
	line, log, cmd := startProc(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	defer stopCmd(cmd)
	addr := logAttr(line, "addr")
	lookup := func(name, typ string) string {
		return run(t, "lookup", name, "--resolver", addr, "--type", typ, "+short")
	}
	if got := lookup("www.ztls.test", "A"); !strings.Contains(got, "127.0.0.1") {
		t.Fatalf("before: %q", got)
	}
	txt := "_ztls._" + strconv.Itoa(s.port) + "._tcp.www.ztls.test"
	if got := lookup(txt, "TXT"); !strings.Contains(got, "v=ztls1") {
		t.Fatalf("no Z-data before the reload: %q\n%s", got, run(t, "lookup", txt, "--resolver", addr, "--type", "TXT"))
	}
	writeFile(t, zone, strings.Replace(testZone, "www IN A 127.0.0.1", "www IN A 127.0.0.9", 1))
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "SIGHUP: reloaded the zones")
	if got := lookup("www.ztls.test", "A"); !strings.Contains(got, "127.0.0.9") {
		t.Fatalf("after the reload: %q", got)
	}
	if got := lookup(txt, "TXT"); !strings.Contains(got, "v=ztls1") {
		t.Fatalf("Z-data lost in the reloaded zone: %q\n%s", got, run(t, "lookup", txt, "--resolver", addr, "--type", "TXT"))
	}
	writeFile(t, zone, testZone+"www IN A 300.1.2.3\n") // no longer loads
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "SIGHUP: keeping the zones as they are")
	if got := lookup("www.ztls.test", "A"); !strings.Contains(got, "127.0.0.9") {
		t.Fatalf("a bad file changed what is served: %q", got)
	}
}

// ztlsConnect runs 'ztls connect --json' once (safe in any goroutine) and
// returns its report; err says why the connection failed (exit status,
// no report, or not the expected answer).
func ztlsConnect(s *site, dnsAddr string) (dial.Report, error) {
	var rep dial.Report
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binPath, "connect", s.host+":"+strconv.Itoa(s.port), "--resolver", dnsAddr,
		"--ca", s.ca, "--data", "GET /", "--json", "--zdata-budget", "2s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if jerr := json.Unmarshal(out, &rep); jerr != nil && err == nil {
		err = jerr
	}
	if err == nil && rep.ResponseBytes != len("hello") {
		err = fmt.Errorf("answer of %d bytes", rep.ResponseBytes)
	}
	if err != nil {
		return rep, fmt.Errorf("%v: %s %s", err, strings.TrimSpace(stderr.String()), rep.Error)
	}
	return rep, nil
}

// replaceSiteCert writes next's certificate and key over the files the
// site's Z-data directory names, as a renewal does (rename into place).
func replaceSiteCert(t *testing.T, s *site, next *testpki.Leaf) {
	t.Helper()
	d, err := zdata.LoadDir(s.zd)
	if err != nil {
		t.Fatal(err)
	}
	newCert, newKey := next.WritePEM(t, t.TempDir())
	for src, dst := range map[string]string{newCert: d.Config.Cert, newKey: d.Config.Key} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			t.Fatal(err)
		}
	}
}

// A certificate replaced under a running site reaches ZTLS: with dns serve
// and serve on one Z-data directory, as the README runs them, ZTLS
// clients keep connecting while the certificate files are replaced and
// both servers get SIGHUP. None of the connections fails; afterwards the
// TLSA record served is the new leaf and ZTLS is negotiated with it (the
// connection's peer certificate, taken from DNS), and a restarted serve
// finds live keys. Either server may be the one that rotates (the first
// started): dns serve as in the README, or serve.
func TestCLIZTLSCertificateReloadUnderLoad(t *testing.T) {
	t.Run("dns serve rotates", func(t *testing.T) { testCertificateReload(t, true) })
	t.Run("serve rotates", func(t *testing.T) { testCertificateReload(t, false) })
}

func testCertificateReload(t *testing.T, dnsFirst bool) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	serveArgs := []string{"serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello"}
	var serveLog, dnsLog *logLines
	var serveCmd, dnsCmd *exec.Cmd
	if !dnsFirst {
		_, serveLog, serveCmd = startProc(t, "ZTLS on", serveArgs...)
	}
	line, dnsLog, dnsCmd := startProc(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	defer stopCmd(dnsCmd)
	dnsAddr := logAttr(line, "addr")
	if dnsFirst {
		_, serveLog, serveCmd = startProc(t, "ZTLS on", serveArgs...)
	}
	defer func() { stopCmd(serveCmd) }()
	tlsa := func() string {
		return strings.TrimSpace(run(t, "lookup", zdata.TLSAName(s.host, s.port), "--resolver", dnsAddr, "--type", "TLSA", "+short"))
	}
	oldTLSA := tlsa()

	var mu sync.Mutex
	var reports []dial.Report
	var failures []string
	stopLoad := untilStopped(2, func() {
		rep, err := ztlsConnect(s, dnsAddr)
		mu.Lock()
		if err != nil {
			failures = append(failures, err.Error())
		} else {
			reports = append(reports, rep)
		}
		mu.Unlock()
	})
	defer func() { stopLoad() }()
	// waitZTLS waits for a ZTLS connection whose peer certificate names
	// cn, taken from DNS (the TLSA leaf) when fromDNS is set. Just after
	// the reload, a client may still hold the old TLSA and Z-data (the
	// process that follows the rotating one reloads within a second):
	// then the server sends its new certificate in the handshake.
	waitZTLS := func(cn string, fromDNS bool) dial.Report {
		t.Helper()
		for deadline := clock.Now().Add(30 * time.Second); clock.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			for _, r := range reports {
				if r.Mode == "ztls" && r.EarlyData.Accepted && len(r.PeerChain) > 0 && strings.Contains(r.PeerChain[0], "CN="+cn+",") && (r.TLS.CertificateFromDNS || !fromDNS) {
					mu.Unlock()
					return r
				}
			}
			mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		var modes []string
		for _, r := range reports {
			modes = append(modes, r.Mode+" "+r.FallbackReason+" "+strings.Join(r.PeerChain, " <- "))
		}
		t.Fatalf("no ZTLS connection with the certificate of %s in %d reports: %q; failures %q", cn, len(reports), modes, failures)
		return dial.Report{}
	}
	waitZTLS(s.host, false)

	// The renewal: a certificate from the same CA whose subject is another
	// name (and still covers the host), then both servers reload.
	next := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"*.ztls.test", s.host}})
	replaceSiteCert(t, s, next)
	mu.Lock()
	reports = nil
	mu.Unlock()
	dnsCmd.Process.Signal(syscall.SIGHUP)
	serveCmd.Process.Signal(syscall.SIGHUP)
	dnsLog.waitFor(t, "SIGHUP: reloaded the zones and Z-data")
	serveLog.waitFor(t, "SIGHUP: reloaded Z-data")

	waitZTLS("*.ztls.test", true)
	want := "3 0 0 " + strings.ToUpper(hex.EncodeToString(next.Chain[0]))
	if got := tlsa(); got == oldTLSA || !strings.EqualFold(strings.ReplaceAll(got, " ", ""), strings.ReplaceAll(want, " ", "")) {
		t.Errorf("TLSA served after the reload:\n%s\nwant the new leaf:\n%s", got, want)
	}
	stopLoad()
	stopLoad = func() {}
	mu.Lock()
	n, failed := len(reports), failures
	mu.Unlock()
	if len(failed) > 0 {
		t.Fatalf("%d connections failed across the certificate reload: %q", len(failed), failed)
	}
	t.Logf("%d connections after the reload, none failed", n)

	// A restart finds the keys of the new certificate.
	stopCmd(serveCmd)
	line, _, serveCmd = startProc(t, "ZTLS on", serveArgs...)
	if live := logAttr(line, "live_keys"); live == "" || live == "0" {
		t.Fatalf("after a restart: %s", line)
	}
}

// The README's walkthrough pasted a second time into the same directory
// (an interactive shell: the errors of 'zdata new', whose directory
// exists, do not stop it), after the servers of the first were stopped:
// the certificate made anew is taken by the Z-data, and ZTLS is shown
// again.
func TestREADMEWalkthroughPastedAgain(t *testing.T) {
	script := readmeBlock(t, "## Using it")
	script = strings.Replace(script, "make build", ": make build", 1)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bin"), 0o755)
	if err := os.Symlink(ztlsBinary(t), filepath.Join(dir, "bin", "ztls")); err != nil {
		t.Fatal(err)
	}
	paste := func(n int, shell ...string) string {
		cmd := exec.Command("bash", append(shell, "-c", script)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		outFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("output%d.txt", n)))
		if err != nil {
			t.Fatal(err)
		}
		defer outFile.Close()
		cmd.Stdout, cmd.Stderr = outFile, outFile
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stopGroup := func() {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			for i := 0; i < 500 && syscall.Kill(-cmd.Process.Pid, 0) == nil; i++ {
				time.Sleep(10 * time.Millisecond)
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
		defer stopGroup()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			stopGroup()
			b, _ := os.ReadFile(outFile.Name())
			t.Fatalf("paste %d did not finish:\n%s", n, b)
		}
		b, _ := os.ReadFile(outFile.Name())
		return string(b)
	}
	report := func(out string) dial.Report {
		t.Helper()
		var rep dial.Report
		i := strings.Index(out, "{\n")
		if i < 0 {
			t.Fatalf("no JSON report in:\n%s", out)
		}
		if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&rep); err != nil {
			t.Fatalf("JSON report: %v\n%s", err, out)
		}
		return rep
	}
	if rep := report(paste(1, "-e")); rep.Mode != "ztls" {
		t.Fatalf("first paste: mode %s (%s)", rep.Mode, rep.FallbackReason)
	}
	out := paste(2)
	if rep := report(out); rep.Mode != "ztls" || !rep.EarlyData.Accepted {
		t.Fatalf("pasted again: mode %s (%s), early %+v\n%s", rep.Mode, rep.FallbackReason, rep.EarlyData, out)
	}
}

// dns serve --tls: SIGHUP replaces the DNS-over-TLS certificate for the
// connections that start afterwards; files that do not load keep it.
func TestCLIDNSServeSIGHUPReloadsDoTCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	opts := testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"ns1.ztls.test"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	first := ca.Issue(t, opts)
	certFile, keyFile := first.WritePEM(t, dir)
	zone := filepath.Join(dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line, log, cmd := startProc(t, "serving tls on", "dns", "serve", "--zone", zone, "--listen", "", "--tls", "127.0.0.1:0",
		"--cert", certFile, "--key", keyFile)
	defer stopCmd(cmd)
	dot := logAttr(line, "addr")
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	served := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&netDialer, "tcp", dot, &tls.Config{ServerName: "ns1.ztls.test", RootCAs: pool, NextProtos: []string{"dot"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := served(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serial %s before the reload", got)
	}
	next := ca.Issue(t, opts)
	nextCert, nextKey := next.WritePEM(t, t.TempDir())
	for src, dst := range map[string]string{nextCert: certFile, nextKey: keyFile} {
		b, _ := os.ReadFile(src)
		writeFile(t, dst, string(b))
	}
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "SIGHUP: reloaded the DNS-over-TLS certificate")
	if got := served(); got != next.Cert.SerialNumber.String() {
		t.Fatalf("serial %s after the reload, want the new %s", got, next.Cert.SerialNumber)
	}
	writeFile(t, certFile, "not a certificate")
	cmd.Process.Signal(syscall.SIGHUP)
	log.waitFor(t, "SIGHUP: keeping the DNS-over-TLS certificate")
	if got := served(); got != next.Cert.SerialNumber.String() {
		t.Fatalf("serial %s after a failed reload", got)
	}
}

// untilStopped calls fn over and over in n goroutines until the returned
// stop is called; stop waits for the calls under way to end.
func untilStopped(n int, fn func()) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				fn()
			}
		}()
	}
	return func() { close(done); wg.Wait() }
}
