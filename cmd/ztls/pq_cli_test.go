package main

// Post-quantum Z-data through the binary (docs/ztls-spec.md, Section 9):
// zdata new --post-quantum and --group x25519mlkem768, zdata show and
// check, dns serve or BIND 9 (zdata publish, RFC 2136) carrying the v3
// TXT records over TCP, ztls serve, and connect --pq.

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// newPQSite is newSite with zdata new's extra flags.
func newPQSite(t *testing.T, flags ...string) *site {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, dir)
	s := &site{dir: dir, ca: ca.WritePEM(t, dir), zd: filepath.Join(dir, "zd"), port: freePort(t), host: "www.ztls.test", authority: ca}
	out := run(t, append([]string{"zdata", "new", "--host", s.host, "--port", strconv.Itoa(s.port), "--cert", cert, "--key", key, "--out", s.zd}, flags...)...)
	if !strings.Contains(out, "\"v=ztls3\"") {
		t.Fatalf("zdata new %v printed no v3 record:\n%s", flags, out)
	}
	return s
}

func wantPQReport(t *testing.T, rep dial.Report) {
	t.Helper()
	wantZTLS(t, rep)
	if !rep.EarlyData.PostQuantum || rep.EarlyData.ClassicalForced || rep.TLS.Group != "X25519MLKEM768" {
		t.Fatalf("early data %+v, group %s: want post-quantum", rep.EarlyData, rep.TLS.Group)
	}
}

// TestCLIPostQuantum: a directory with --post-quantum holds v3 and
// announcing classical keys (zdata show); dns serve answers the TXT
// question (over 1232 bytes) over TCP; connect is post-quantum ZTLS under
// every --pq policy (a valid v3 record wins), and zdata check reports
// the v3 sizes and the transport needed. A directory made with --group
// x25519mlkem768 holds v3 keys only, and rotates.
func TestCLIPostQuantum(t *testing.T) {
	s := newPQSite(t, "--post-quantum")
	show := run(t, "zdata", "show", s.zd)
	if strings.Count(show, "X25519MLKEM768") < 2 || strings.Count(show, "x25519") < 2 {
		t.Fatalf("zdata show:\n%s", show)
	}
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	s.serve(t)
	for _, pq := range []string{"prefer", "only", "classical"} {
		rep := s.connect(t, dnsAddr, "--pq", pq, "--zdata-from", "txt")
		wantPQReport(t, rep)
		if rep.PostQuantum != pq {
			t.Fatalf("report's policy %q, want %q", rep.PostQuantum, pq)
		}
	}
	// The HTTPS record's classical Z-data announces: the client asks TXT.
	rep := s.connect(t, dnsAddr)
	wantPQReport(t, rep)
	if rep.ZDataFrom != dial.ZDataFromTXT {
		t.Fatalf("Z-data from %q, want txt", rep.ZDataFrom)
	}
	var chk checkReport
	if err := json.Unmarshal([]byte(run(t, "zdata", "check", s.host, "--port", strconv.Itoa(s.port),
		"--resolver", dnsAddr, "--ca", s.ca, "--json")), &chk); err != nil {
		t.Fatal(err)
	}
	pq := chk.PQ
	if !chk.Valid || pq == nil || pq.V3Records != 2 || pq.Announcing != pq.Classical || pq.Classical == 0 ||
		pq.Transport != "tcp or tls" || !pq.Selected || pq.TXTAnswerBytes <= 1232 || pq.Problem != "" {
		t.Fatalf("zdata check: %+v, post-quantum %+v", chk, pq)
	}
	for _, b := range pq.V3Bytes {
		if b < 1700 || b > 1900 {
			t.Fatalf("v3 record of %d bytes of RDATA, want about 1.8 kB (Section 9.7)", b)
		}
	}
	t.Logf("zdata check: v3 records of %v bytes, TXT answer %d bytes over %s", pq.V3Bytes, pq.TXTAnswerBytes, pq.Transport)
	if out := run(t, "zdata", "check", s.host, "--port", strconv.Itoa(s.port), "--resolver", dnsAddr, "--ca", s.ca); !strings.Contains(out, "needs tcp or tls") {
		t.Fatalf("zdata check text:\n%s", out)
	}
	if out, err := exec.Command(ztlsBinary(t), "connect", s.host+":"+strconv.Itoa(s.port), "--pq", "maybe").CombinedOutput(); err == nil || !strings.Contains(string(out), "prefer, only or classical") {
		t.Fatalf("--pq maybe: %v\n%s", err, out)
	}

	only := newPQSite(t, "--group", "x25519mlkem768")
	show = run(t, "zdata", "show", only.zd)
	if strings.Count(show, "X25519MLKEM768") < 2 || strings.Contains(show, " x25519 ") {
		t.Fatalf("zdata show of a v3-only directory:\n%s", show)
	}
	run(t, "zdata", "rotate", only.zd)
}

// TestCLIPostQuantumBFE: zdata new --group x25519mlkem768 with BFE
// options prints v3 records with bfe= (docs/ztls-spec.md, Section 9.2),
// zdata show lists their BFE keys, and connect through dns serve and
// serve is post-quantum ZTLS with BFE.
func TestCLIPostQuantumBFE(t *testing.T) {
	s := newPQSite(t, "--group", "x25519mlkem768", "--bfe-connections", "64", "--bfe-fp-rate", "0.0625")
	show := run(t, "zdata", "show", s.zd)
	if strings.Count(show, "X25519MLKEM768") < 2 || !strings.Contains(show, "BFE: 64 connections") || strings.Contains(show, "no BFE key yet") {
		t.Fatalf("zdata show:\n%s", show)
	}
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0")
	s.serve(t)
	rep := s.connect(t, logAttr(line, "addr"), "--pq", "only")
	wantPQReport(t, rep)
	if !rep.EarlyData.BFE {
		t.Fatalf("early data %+v: want post-quantum with BFE", rep.EarlyData)
	}
}

// TestCLIPostQuantumThroughBIND: zdata publish sends the v3 TXT records
// (about 1.8 kB each) to BIND 9 by RFC 2136 UPDATE, Unbound resolves them
// from it, and connect is post-quantum ZTLS through Unbound.
func TestCLIPostQuantumThroughBIND(t *testing.T) {
	if dnstest.BindPath() == "" {
		t.Skip("BIND 9 (named) not installed: make deps installs it")
	}
	s := newPQSite(t, "--post-quantum")
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	bind := dnstest.StartBind(t, dnstest.BindOptions{
		Zones: []dnstest.BindZone{{Origin: "ztls.test.", Text: testZone, AllowUpdate: true}},
		Key:   &dnstest.BindKey{Name: "ztls-key", Algorithm: "hmac-sha256", Secret: secret},
	})
	out := run(t, "zdata", "publish", s.zd, "--server", bind.Addr, "--zone", "ztls.test",
		"--tsig-name", "ztls-key", "--tsig-secret", secret)
	if !strings.Contains(out, "published") {
		t.Fatalf("publish: %s", out)
	}
	ub := dnstest.StartUnbound(t, dnstest.UnboundOptions{StubZones: map[string]string{"ztls.test.": bind.Addr}})
	s.serve(t)
	wantPQReport(t, s.connect(t, ub.Addr, "--zdata-from", "txt"))
}
