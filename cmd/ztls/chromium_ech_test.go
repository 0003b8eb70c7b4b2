//go:build linux

package main

// Headless Chromium with Encrypted ClientHello from our DNS (issue 31):
// the HTTPS record carries the Z-data directory's ech beside the Z-data,
// Chromium asks it of the embedded authority (plain DNS in the test's
// network namespace, as TestChromiumHTTPSRecordWithZData), and `ztls
// serve` with the directory's ECH keys counts what Chromium sent
// (ztls_ech_total): every ClientHello Chromium sent it was an ECH one it
// could decrypt (accepted), none rejected. Chromium has no ZTLS: the
// inner handshake is TLS 1.3.

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/zdata"
)

func TestChromiumECHFromHTTPSRecord(t *testing.T) {
	chromium := lookChromium(t)
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skipf("nsenter is not installed (Debian package util-linux): %v", err)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test makes network and mount namespaces")
	}
	ns := newTestNetns(t)
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{chromiumHTTPSHost, echCLIPublicName}})
	cert, key := leaf.WritePEM(t, dir)
	sum := sha256.Sum256(leaf.Cert.RawSubjectPublicKeyInfo)
	spki := base64.StdEncoding.EncodeToString(sum[:])
	zd := filepath.Join(dir, "zd")
	run(t, "zdata", "new", "--host", chromiumHTTPSHost, "--port", "443", "--cert", cert, "--key", key, "--out", zd,
		"--ech-public-name", echCLIPublicName)
	https := zdataHTTPSRecord(t, zd)
	d, err := zdata.LoadDir(zd)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := d.ECHKeys()
	if err != nil {
		t.Fatal(err)
	}
	list, err := zdata.ECHConfigList(keys, clock.Now())
	if err != nil || list == nil {
		t.Fatalf("no ECHConfigList: %v", err)
	}
	https.Value = append(https.Value, &dns.SVCBECHConfig{ECH: list})
	zones, questions := chromiumZone(t, https)
	serveAuthority(t, zones, questions, ns.listenPacket(t, "127.0.0.1:53"), ns.listen(t, "127.0.0.1:53"), true)
	ns.startZTLS(t, "ZTLS on", "serve", "-v", "--listen", "127.0.0.1:443", "--zdata", zd, "--respond",
		"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 35\r\nConnection: close\r\n\r\n<html><p>page-through-ech</p></html>",
		"--metrics", "127.0.0.1:9180")
	dom := chromiumFetch(t, ns.chromium(t, chromium), spki, "https://"+chromiumHTTPSHost+"/",
		"--enable-features=EncryptedClientHello")
	m := ns.metrics(t, "127.0.0.1:9180")
	accepted, rejected := metricValue(m, `ztls_ech_total{result="accepted"}`), metricValue(m, `ztls_ech_total{result="rejected"}`)
	t.Logf("Chromium asked: %s; server: ECH accepted %s, rejected %s", strings.Join(questions.list(), ", "), accepted, rejected)
	if !strings.Contains(dom, "page-through-ech") {
		t.Fatalf("chromium did not show the page:\n%s", dom)
	}
	if !questions.has(dns.Fqdn(chromiumHTTPSHost), dns.TypeHTTPS) {
		t.Fatal("Chromium never asked the HTTPS question")
	}
	if accepted == "" || rejected != "" {
		t.Fatalf("Chromium loaded the page, but the server counted ECH accepted %q, rejected %q: want accepted only", accepted, rejected)
	}
}

// metrics fetches http://addr/metrics from inside the namespace.
func (ns *testNetns) metrics(t *testing.T, addr string) string {
	t.Helper()
	var c net.Conn
	if err := ns.in(func() (err error) { c, err = net.DialTimeout("tcp", addr, 5*time.Second); return }); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second)) // real time: Deadline( for the socket
	fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: %s\r\n\r\n", addr)
	b, _ := io.ReadAll(c)
	return string(b)
}

// metricValue is the value of the series name in a scrape ("" if absent).
func metricValue(scrape, name string) string {
	for _, l := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(l, name+" ") {
			return strings.TrimPrefix(l, name+" ")
		}
	}
	return ""
}
