package main

// 'ztls dns serve --tls-engine ztls': DNS over TLS on ztls's own TLS 1.3
// engine, answered to BIND's dig (OpenSSL) and resumed by OpenSSL's
// s_client with a key exchange, or without one (--psk-ke) when the
// client allows it.

import (
	"encoding/binary"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/internal/testsupport/testproc"
)

func TestCLIDoTZTLSEngine(t *testing.T) {
	ztlsBinary(t)
	for _, tool := range []string{"dig", "openssl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make deps installs it)", tool)
		}
	}
	dir := t.TempDir()
	zone := filepath.Join(dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"dns.ztls.test"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	cert, key := leaf.WritePEM(t, dir)
	caFile := ca.WritePEM(t, dir)
	_, log := startLog(t, "serving udp on", "dns", "serve", "--zone", zone, "--listen", "127.0.0.1:0",
		"--tls", "127.0.0.1:0", "--cert", cert, "--key", key, "--tls-engine", "ztls", "--psk-ke")
	dot := logAttr(log.waitFor(t, "serving tls (ztls engine) on"), "addr")
	host, port, _ := net.SplitHostPort(dot)

	// dig (BIND 9, OpenSSL) verifies the certificate and gets the answer.
	out, err := exec.Command("dig", "+tls", "+tls-ca="+caFile, "+tls-hostname=dns.ztls.test", "@"+host, "-p", port,
		"www.ztls.test", "A", "+short", "+timeout=5", "+tries=1").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "127.0.0.1" {
		t.Fatalf("dig +tls: %v\n%s", err, out)
	}

	// OpenSSL's s_client: a full handshake that keeps its ticket, then
	// resumptions with and without psk_ke allowed.
	sess := filepath.Join(dir, "session.pem")
	full := sClientDoT(t, dot, caFile, "-sess_out", sess)
	if !strings.Contains(full, "New, TLSv1.3") || !strings.Contains(full, "Server Temp Key") {
		t.Fatalf("first connection is not a full TLS 1.3 handshake:\n%s", full)
	}
	noDHE := sClientDoT(t, dot, caFile, "-sess_in", sess, "-allow_no_dhe_kex")
	if !strings.Contains(noDHE, "Reused, TLSv1.3") || strings.Contains(noDHE, "Server Temp Key") {
		t.Fatalf("a client allowing psk_ke did not resume without a key exchange:\n%s", noDHE)
	}
	dhe := sClientDoT(t, dot, caFile, "-sess_in", sess)
	if !strings.Contains(dhe, "Reused, TLSv1.3") || !strings.Contains(dhe, "Server Temp Key") {
		t.Fatalf("a client offering psk_dhe_ke only did not resume with a key exchange:\n%s", dhe)
	}
}

// --psk-ke and --tls-engine refuse what cannot work, saying what does.
func TestCLIDoTEngineFlags(t *testing.T) {
	ztlsBinary(t)
	dir := t.TempDir()
	zone := filepath.Join(dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--psk-ke"}, "--psk-ke needs --tls-engine ztls"},
		{[]string{"--tls-engine", "openssl"}, "give go (crypto/tls) or ztls"},
	} {
		args := append([]string{"dns", "serve", "--zone", zone, "--listen", "127.0.0.1:0"}, tc.args...)
		_, stderr, code := runCode(t, args...)
		if code == 0 || !strings.Contains(stderr, tc.want) {
			t.Errorf("ztls %s: exit %d, stderr %q; want it to say %q", strings.Join(args, " "), code, stderr, tc.want)
		}
	}
}

// sClientDoT asks www.ztls.test A over DoT with openssl s_client and
// returns its output once the answer (127.0.0.1) has arrived.
func sClientDoT(t *testing.T, addr, caFile string, args ...string) string {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion("www.ztls.test.", dns.TypeA)
	q.Id = 0x5a5a
	raw, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	frame := binary.BigEndian.AppendUint16(nil, uint16(len(raw)))
	frame = append(frame, raw...)

	cmd := exec.Command("openssl", append([]string{"s_client", "-connect", addr, "-tls1_3", "-CAfile", caFile,
		"-servername", "dns.ztls.test", "-verify_return_error"}, args...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var buf testproc.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // s_client ends at the end of its input
		waitOrKill(cmd)
	}()
	if _, err := stdin.Write(frame); err != nil {
		t.Fatal(err)
	}
	answer := []byte{0x00, 0x01, 0x00, 0x01} // type A, class IN ...
	for deadline := clock.Now().Add(10 * time.Second); clock.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		got := buf.String()
		// The answer: its ID, then 127.0.0.1 as the address of the A
		// record at the end.
		if i := strings.Index(got, "\x5a\x5a\x85"); i >= 0 && strings.Contains(got[i:], string(answer)) &&
			strings.Contains(got[i:], "\x7f\x00\x00\x01") {
			return got
		}
	}
	t.Fatalf("openssl s_client %s: no answer within 10 s:\n%s", strings.Join(args, " "), buf.String())
	return ""
}
