package main

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testpki"
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
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := tls.DialWithDialer(&netDialer, "tcp", addr, &tls.Config{ServerName: s.host, RootCAs: roots, MinVersion: tls.VersionTLS13})
				if err != nil {
					failed.Add(1)
					failures.Store(err.Error(), true)
					continue
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
			}
		}()
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
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
	close(stop)
	wg.Wait()
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
	addr := strings.TrimPrefix(line, "serving udp on ")
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
