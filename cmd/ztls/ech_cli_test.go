package main

// Encrypted ClientHello end to end (docs/ztls-spec.md, Section 10): ECH
// keys made by 'zdata new --ech-public-name' in the Z-data directory,
// served in the HTTPS record by 'dns serve' and loaded by 'serve';
// 'connect' uses them with ZTLS inside.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/zdata"
)

const echCLIPublicName = "public.ztls.test"

// newECHSite is newSite with ECH keys, its certificate also naming the
// public name (a client whose ECH is rejected authenticates it).
func newECHSite(t *testing.T, echKeys bool) *site {
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test", echCLIPublicName}})
	cert, key := leaf.WritePEM(t, dir)
	s := &site{dir: dir, ca: ca.WritePEM(t, dir), zd: filepath.Join(dir, "zd"), port: freePort(t), host: "www.ztls.test", authority: ca}
	args := []string{"zdata", "new", "--host", s.host, "--port", strconv.Itoa(s.port), "--cert", cert, "--key", key, "--out", s.zd}
	if echKeys {
		args = append(args, "--ech-public-name", echCLIPublicName)
	}
	out := run(t, args...)
	if echKeys && !strings.Contains(out, " ech=") {
		t.Fatalf("zdata new printed no HTTPS record with ech=:\n%s", out)
	}
	return s
}

// copyDir copies the directory tree from to to (a snapshot of a Z-data
// directory, as a stale DNS answer holds it).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}

// TestCLIECHWithZTLSInside: dns serve publishes the directory's ech,
// serve loads its ECH keys, connect --ech runs ZTLS inside ECH; after the
// server's keys rotate (DNS still serving the old configs) the client is
// rejected, retries once with the retry configs and is accepted, the
// request delivered once; the server's metrics count both.
func TestCLIECHWithZTLSInside(t *testing.T) {
	s := newECHSite(t, true)
	dnsDir := filepath.Join(s.dir, "zd-dns") // DNS keeps serving these configs
	copyDir(t, s.zd, dnsDir)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", dnsDir, "--listen", "127.0.0.1:0", "--rotate=false")
	dnsAddr := logAttr(line, "addr")
	addr := "127.0.0.1:" + strconv.Itoa(s.port)
	ready, log, cmd := startProc(t, "metrics on", "serve", "--listen", addr, "--zdata", s.zd, "--respond", "hello",
		"--early-window", "300ms", "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := strings.TrimSpace(ready[strings.Index(ready, "http://"):])
	time.Sleep(350 * time.Millisecond) // early data is refused for one window after start

	rep := s.connect(t, dnsAddr, "--ech")
	wantZTLS(t, rep)
	if rep.ECH != "accepted" || rep.ECHRetried {
		t.Fatalf("ech %q (retried %v), want accepted", rep.ECH, rep.ECHRetried)
	}
	text, err := exec.Command(ztlsBinary(t), "connect", s.host+":"+strconv.Itoa(s.port), "--resolver", dnsAddr, "--ca", s.ca,
		"--data", "GET /", "--zdata-budget", "2s").CombinedOutput()
	if err != nil || !strings.Contains(string(text), "Encrypted ClientHello: accepted") {
		t.Fatalf("text report (%v):\n%s", err, text)
	}

	var chk checkReport
	if err := json.Unmarshal([]byte(run(t, "zdata", "check", s.host, "--port", strconv.Itoa(s.port),
		"--resolver", dnsAddr, "--ca", s.ca, "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if !chk.Valid || chk.ECH == nil || chk.ECH.Configs != 2 || chk.ECH.Usable != 2 || chk.ECH.PublicNames != echCLIPublicName {
		t.Fatalf("zdata check: valid %v (%s), ech %+v", chk.Valid, chk.Reason, chk.ECH)
	}
	for _, a := range chk.Answers {
		if a.Type == "HTTPS" && (a.Bytes > 1232 || a.Truncated) {
			t.Fatalf("the HTTPS answer with ech is %d bytes", a.Bytes)
		}
	}
	if out := run(t, "zdata", "show", s.zd); strings.Count(out, "ECH config") != 2 || !strings.Contains(out, echCLIPublicName) {
		t.Fatalf("zdata show:\n%s", out)
	}

	// The server's ECH keys are replaced; DNS still has the old configs.
	if err := os.RemoveAll(filepath.Join(s.zd, "ech")); err != nil {
		t.Fatal(err)
	}
	run(t, "zdata", "rotate", s.zd, "--ech-public-name", echCLIPublicName)
	var shown struct{ ECH []echRow }
	if err := json.Unmarshal([]byte(run(t, "zdata", "show", s.zd, "--json")), &shown); err != nil || len(shown.ECH) != 2 {
		t.Fatalf("zdata show --json: %v, %d ECH keys", err, len(shown.ECH))
	}
	log.waitFor(t, fmt.Sprintf("%d@%d", shown.ECH[0].ConfigID, shown.ECH[0].NotBefore.Unix())) // serve loaded the new keys
	rep = s.connect(t, dnsAddr, "--ech")
	wantZTLS(t, rep)
	if rep.ECH != "accepted" || !rep.ECHRetried {
		t.Fatalf("stale config: ech %q (retried %v), want accepted after one retry", rep.ECH, rep.ECHRetried)
	}
	m := scrape(t, url)
	for name, want := range map[string]float64{
		`ztls_ech_total{result="accepted"}`: 3, // two connects, the retry
		`ztls_ech_total{result="rejected"}`: 1, // the stale config
		`ztls_early_data_bytes_total`:       3 * float64(rep.EarlyData.Bytes),
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
}

// TestCLIECHRequiredWithoutECH: connect --ech to a service whose record
// has no ech fails and says why; without --ech it connects (ech none).
func TestCLIECHRequiredWithoutECH(t *testing.T) {
	s := newECHSite(t, false)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	s.serve(t)
	out := runFail(t, "connect", s.host+":"+strconv.Itoa(s.port), "--resolver", dnsAddr, "--ca", s.ca, "--data", "GET /", "--ech")
	if !strings.Contains(out, "ECH required") || !strings.Contains(out, "carries no ech") || !strings.Contains(out, "--ech-public-name") {
		t.Fatalf("connect --ech without ech published:\n%s", out)
	}
	var rep dial.Report = s.connect(t, dnsAddr)
	wantZTLS(t, rep)
	if rep.ECH != "none" {
		t.Fatalf("ech %q, want none", rep.ECH)
	}
}

// TestCLIDNSServeRotatesECH: dns serve, holding the directory's rotation
// claim, rotates its ECH keys too: the next period's key, removed, is
// made again before it serves, and the served ech has both configs.
func TestCLIDNSServeRotatesECH(t *testing.T) {
	s := newECHSite(t, true)
	ents, err := os.ReadDir(filepath.Join(s.zd, "ech"))
	if err != nil || len(ents) != 2 {
		t.Fatalf("DIR/ech: %v, %d files", err, len(ents))
	}
	next := filepath.Join(s.zd, "ech", ents[1].Name()) // named by period start: the later one
	if err := os.Remove(next); err != nil {
		t.Fatal(err)
	}
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	if ents, err := os.ReadDir(filepath.Join(s.zd, "ech")); err != nil || len(ents) != 2 {
		t.Fatalf("after dns serve started: %v, %d ECH key files, want the next period's made again", err, len(ents))
	}
	var chk checkReport
	if err := json.Unmarshal([]byte(run(t, "zdata", "check", s.host, "--port", strconv.Itoa(s.port),
		"--resolver", logAttr(line, "addr"), "--ca", s.ca, "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	if chk.ECH == nil || chk.ECH.Configs != 2 {
		t.Fatalf("served ech: %+v", chk.ECH)
	}
}

// TestCLIZDataPublishECHToBind: zdata publish pushes the directory's ech
// into the primary's HTTPS RR (RFC 2136 to BIND 9), replacing the ech the
// operator's RR had and keeping its other SvcParams.
func TestCLIZDataPublishECHToBind(t *testing.T) {
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	s := newECHSite(t, true)
	owner := "_" + strconv.Itoa(s.port) + "._https.www.ztls.test."
	key := &dnstest.BindKey{Name: "ztls-key", Secret: secret}
	zone := dnstest.BindZone{Origin: "ztls.test.", AllowUpdate: true,
		Text: testZone + owner + " 3600 IN HTTPS 1 . alpn=h2 ech=AEX+DQBBAQAgACB4\n"}
	addr := dnstest.StartBind(t, dnstest.BindOptions{Zones: []dnstest.BindZone{zone}, Key: key}).Addr
	cmd := exec.Command(ztlsBinary(t), "zdata", "publish", s.zd, "--server", addr, "--zone", "ztls.test", "--tsig-name", "ztls-key",
		"--tsig-secret", secret)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("zdata publish: %v\n%s", err, out)
	}
	q := new(dns.Msg)
	q.SetQuestion(owner, dns.TypeHTTPS)
	r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, addr)
	if err != nil {
		t.Fatal(err)
	}
	h := httpsAnswer(t, r)
	d, err := zdata.LoadDir(s.zd)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := d.ECHKeys()
	if err != nil {
		t.Fatal(err)
	}
	want, err := zdata.ECHConfigList(keys, clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	var echs [][]byte
	for _, kv := range h.Value {
		if e, ok := kv.(*dns.SVCBECHConfig); ok {
			echs = append(echs, e.ECH)
		}
	}
	if len(echs) != 1 || !bytes.Equal(echs[0], want) || !strings.Contains(h.String(), `alpn="h2"`) {
		t.Fatalf("published HTTPS RR %v: want the directory's ech alone, alpn kept", h)
	}
}
