package record

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"io"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/testproc"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/suite"
)

// TestInteropOpenSSL checks the record layer and key schedule against real
// TLS 1.3 stacks, for every suite and with and without HelloRetryRequest:
// `openssl s_client` talks to a crypto/tls server over loopback while the
// test records the bytes on the wire and both key logs. Offline, it then
//
//   - deframes both directions and rebuilds the transcript with a pending
//     Transcript (HelloRetryRequest rewrite included), which must make
//     VerifyFinished accept both peers' Finished under the SHA-256 or SHA-384
//     schedule;
//   - decrypts every protected record with HalfConns built from the logged
//     traffic secrets and re-seals it to the identical bytes;
//   - follows a client KeyUpdate with keyschedule.NextTrafficSecret;
//   - compares keyschedule.Exporter on OpenSSL's logged exporter secret
//     with the exported keying material of both peers.
func TestInteropOpenSSL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts openssl processes")
	}
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl not installed (make deps)")
	}
	cert := selfSigned(t)
	for _, s := range []*suite.Suite{
		suite.Lookup(suite.TLS_AES_128_GCM_SHA256),
		suite.Lookup(suite.TLS_AES_256_GCM_SHA384),
		suite.Lookup(suite.TLS_CHACHA20_POLY1305_SHA256),
	} {
		for _, hrr := range []bool{false, true} {
			name := s.Name
			if hrr {
				name += "/HRR"
			}
			t.Run(name, func(t *testing.T) {
				run := runOpenSSL(t, openssl, cert, s, hrr)
				checkInterop(t, run, s, hrr)
			})
		}
	}
}

const exportLabel = "EXPERIMENTAL ztls record test"

type interopRun struct {
	c2s, s2c    []byte            // bytes on the wire
	goLog       map[string][]byte // crypto/tls key log: label -> secret
	sslLog      map[string][]byte // OpenSSL key log
	sslExport   []byte            // OpenSSL's keying material for exportLabel
	goExport    []byte            // crypto/tls's, no context
	goExportCtx []byte            // crypto/tls's with context "ctx"
	received    []byte            // application data the server read
}

// recordingConn copies what crosses a net.Conn.
type recordingConn struct {
	net.Conn
	mu      sync.Mutex
	in, out []byte
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.in = append(c.in, p[:n]...)
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.out = append(c.out, p[:n]...)
	c.mu.Unlock()
	return n, err
}

func (c *recordingConn) inLen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.in)
}

// waitFor polls cond until it holds; it is synchronisation with another
// process, not a timing assertion, and fails only after a generous limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := clock.Now().Add(20 * time.Second)
	for !cond() {
		if clock.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func runOpenSSL(t *testing.T, openssl string, cert tls.Certificate, s *suite.Suite, hrr bool) *interopRun {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })

	var goLog testproc.Buffer
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13, KeyLogWriter: &goLog}
	if hrr {
		// The client offers a P-256 key share; insisting on X25519 forces
		// a HelloRetryRequest.
		cfg.CurvePreferences = []tls.CurveID{tls.X25519}
	}
	var (
		rec      *recordingConn
		recReady = make(chan struct{})
		received testproc.Buffer
		run      interopRun
		srvErr   = make(chan error, 1)
	)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(recReady)
			srvErr <- err
			return
		}
		rec = &recordingConn{Conn: c}
		close(recReady)
		tc := tls.Server(rec, cfg)
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			srvErr <- err
			return
		}
		cs := tc.ConnectionState()
		run.goExport, _ = cs.ExportKeyingMaterial(exportLabel, nil, 32)
		run.goExportCtx, _ = cs.ExportKeyingMaterial(exportLabel, []byte("ctx"), 40)
		if _, err := tc.Write([]byte("world\n")); err != nil {
			srvErr <- err
			return
		}
		_, err = io.Copy(&received, tc)
		srvErr <- err
	}()

	keylog := filepath.Join(t.TempDir(), "keylog")
	groups := "X25519"
	if hrr {
		groups = "P-256:X25519"
	}
	cmd := exec.Command(openssl, "s_client", "-connect", ln.Addr().String(), "-tls1_3",
		"-ciphersuites", s.Name, "-groups", groups, "-keylogfile", keylog,
		"-keymatexport", exportLabel, "-keymatexportlen", "32")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout testproc.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{}) // closed when openssl has exited
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	<-recReady
	if rec == nil {
		t.Fatal(<-srvErr)
	}
	// One stdin line at a time: s_client treats a read that starts with
	// "k" as the command to send a KeyUpdate.
	io.WriteString(stdin, "hello\n")
	waitFor(t, "hello", func() bool { return strings.Contains(received.String(), "hello\n") })
	n := rec.inLen()
	io.WriteString(stdin, "k\n")
	waitFor(t, "KeyUpdate", func() bool { return rec.inLen() > n })
	io.WriteString(stdin, "again\n")
	waitFor(t, "again", func() bool { return strings.Contains(received.String(), "again\n") })
	stdin.Close()
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("openssl did not exit; output:\n%s", stdout.String())
	}
	select {
	case err := <-srvErr:
		if err != nil {
			t.Fatalf("server: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not finish")
	}

	rec.mu.Lock()
	run.c2s, run.s2c = bytes.Clone(rec.in), bytes.Clone(rec.out)
	rec.mu.Unlock()
	run.received = []byte(received.String())
	run.goLog = parseKeyLog(t, goLog.String())
	sslLog, err := os.ReadFile(keylog)
	if err != nil {
		t.Fatal(err)
	}
	run.sslLog = parseKeyLog(t, string(sslLog))
	sc := bufio.NewScanner(strings.NewReader(stdout.String()))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "Keying material:"); ok {
			run.sslExport, _ = hex.DecodeString(strings.TrimSpace(v))
		}
	}
	if run.sslExport == nil {
		t.Fatalf("no keying material in openssl output:\n%s", stdout.String())
	}
	return &run
}

func parseKeyLog(t *testing.T, s string) map[string][]byte {
	m := map[string][]byte{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || strings.HasPrefix(f[0], "#") {
			continue
		}
		v, err := hex.DecodeString(f[2])
		if err != nil {
			t.Fatalf("key log line %q: %v", line, err)
		}
		m[f[0]] = v
	}
	return m
}

// rec is one deframed record.
type rec struct {
	typ     ContentType
	payload []byte
	raw     []byte
}

func deframeAll(t *testing.T, stream []byte) []rec {
	var d Deframer
	d.Write(stream)
	var out []rec
	off := 0
	for {
		typ, p, ok, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, rec{typ, bytes.Clone(p), bytes.Clone(stream[off : off+HeaderLen+len(p)])})
		off += HeaderLen + len(p)
	}
	if d.Buffered() != 0 {
		t.Fatalf("%d trailing bytes", d.Buffered())
	}
	return out
}

// messages splits concatenated handshake messages.
func messages(t *testing.T, b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		if len(b) < 4 {
			t.Fatalf("truncated handshake header %x", b)
		}
		n := 4 + (int(b[1])<<16 | int(b[2])<<8 | int(b[3]))
		if len(b) < n {
			t.Fatalf("truncated handshake message")
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// hrrRandom marks a ServerHello as HelloRetryRequest, RFC 8446, Section 4.1.3.
var hrrRandom, _ = hex.DecodeString("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")

// opener decrypts one direction, switching secrets in order, and checks
// that each record re-seals to the same bytes.
type opener struct {
	t   *testing.T
	s   *suite.Suite
	hc  *HalfConn
	sec []byte
}

func (o *opener) use(secret []byte) {
	o.t.Helper()
	if secret == nil {
		o.t.Fatal("secret missing from the key log")
	}
	o.hc = mustHalfConn(o.t, o.s, secret, 0)
	o.sec = secret
}

func (o *opener) open(r rec) (ContentType, []byte) {
	o.t.Helper()
	seq := o.hc.Seq()
	typ, plain, err := o.hc.Open(bytes.Clone(r.payload), MaxPlaintext)
	if err != nil {
		o.t.Fatalf("record %d under %s: %v", seq, o.s.Name, err)
	}
	resealer := mustHalfConn(o.t, o.s, o.sec, seq)
	again, err := resealer.Seal(nil, typ, plain, 0)
	if err != nil || !bytes.Equal(again, r.raw) {
		o.t.Errorf("re-sealed record %d differs (%v)", seq, err)
	}
	return typ, bytes.Clone(plain)
}

func checkInterop(t *testing.T, run *interopRun, s *suite.Suite, hrr bool) {
	h := s.Hash
	for _, l := range []string{"CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"} {
		if !bytes.Equal(run.goLog[l], run.sslLog[l]) || len(run.goLog[l]) != h.Size() {
			t.Fatalf("%s: crypto/tls and OpenSSL disagree or wrong size", l)
		}
	}
	c2s, s2c := deframeAll(t, run.c2s), deframeAll(t, run.s2c)

	// Plaintext handshake messages, in wire order per direction.
	var cPlain, sPlain []byte
	ci, si := 0, 0
	for ; ci < len(c2s) && c2s[ci].typ != TypeApplicationData; ci++ {
		if c2s[ci].typ == TypeHandshake {
			cPlain = append(cPlain, c2s[ci].payload...)
		}
	}
	for ; si < len(s2c) && s2c[si].typ != TypeApplicationData; si++ {
		if s2c[si].typ == TypeHandshake {
			sPlain = append(sPlain, s2c[si].payload...)
		}
	}
	chs, shs := messages(t, cPlain), messages(t, sPlain)

	// Transcript: CH1 [HRR CH2] SH, built before the hash is known.
	tr := keyschedule.NewPendingTranscript()
	tr.Write(chs[0])
	sawHRR := false
	for _, m := range shs {
		if m[0] != 2 || len(m) < 4+2+32 {
			t.Fatalf("unexpected plaintext server message type %d", m[0])
		}
		if bytes.Equal(m[6:38], hrrRandom) {
			sawHRR = true
			tr.RestartWithMessageHash()
			tr.Write(m)
			if len(chs) != 2 {
				t.Fatalf("%d ClientHellos after HRR", len(chs))
			}
			tr.Write(chs[1])
			continue
		}
		sidLen := int(m[38])
		id := uint16(m[39+sidLen])<<8 | uint16(m[40+sidLen])
		if id != s.ID {
			t.Fatalf("ServerHello selected %s", suite.Name(id))
		}
		tr.Write(m)
		tr.SetHash(h)
	}
	if sawHRR != hrr {
		t.Fatalf("HelloRetryRequest sent: %v, expected %v", sawHRR, hrr)
	}

	// Server flight under the server handshake secret.
	shts, chts := run.goLog["SERVER_HANDSHAKE_TRAFFIC_SECRET"], run.goLog["CLIENT_HANDSHAKE_TRAFFIC_SECRET"]
	sOpen := &opener{t: t, s: s}
	sOpen.use(shts)
	var flight []byte
	var sawFinished bool
	for ; si < len(s2c) && !sawFinished; si++ {
		if s2c[si].typ == TypeChangeCipherSpec {
			continue
		}
		typ, plain := sOpen.open(s2c[si])
		if typ != TypeHandshake {
			t.Fatalf("server sent %v during the handshake", typ)
		}
		flight = append(flight, plain...)
		for _, m := range messagesComplete(flight) {
			if m[0] == 20 {
				if !keyschedule.VerifyFinished(h, shts, tr.Sum(), m[4:]) {
					t.Fatal("server Finished does not verify against our transcript")
				}
				sawFinished = true
			}
			tr.Write(m)
			flight = flight[len(m):]
		}
	}
	if !sawFinished {
		t.Fatal("no server Finished")
	}

	// Client Finished under the client handshake secret.
	cOpen := &opener{t: t, s: s}
	cOpen.use(chts)
	for ; ci < len(c2s); ci++ {
		if c2s[ci].typ == TypeChangeCipherSpec {
			continue
		}
		typ, plain := cOpen.open(c2s[ci])
		if typ != TypeHandshake || plain[0] != 20 {
			t.Fatalf("client sent %v %x instead of Finished", typ, plain[:1])
		}
		if !keyschedule.VerifyFinished(h, chts, tr.Sum(), plain[4:]) {
			t.Fatal("client Finished does not verify against our transcript")
		}
		ci++
		break
	}

	// Client application data, KeyUpdate and close_notify.
	cOpen.use(run.goLog["CLIENT_TRAFFIC_SECRET_0"])
	var appData []byte
	var updated, closed bool
	for ; ci < len(c2s); ci++ {
		typ, plain := cOpen.open(c2s[ci])
		switch {
		case typ == TypeApplicationData:
			appData = append(appData, plain...)
		case typ == TypeHandshake && plain[0] == 24: // KeyUpdate
			cOpen.use(keyschedule.NextTrafficSecret(h, cOpen.hc.Secret()))
			updated = true
		case typ == TypeAlert && bytes.Equal(plain, []byte{1, 0}):
			closed = true
		default:
			t.Fatalf("client sent %v %x", typ, plain)
		}
	}
	if string(appData) != "hello\nagain\n" {
		t.Errorf("client application data %q", appData)
	}
	if !bytes.Equal(appData, run.received) {
		t.Errorf("decrypted %q, server received %q", appData, run.received)
	}
	if !updated || !closed {
		t.Errorf("KeyUpdate seen %v, close_notify seen %v", updated, closed)
	}

	// Server application data: tickets and "world".
	sOpen.use(run.goLog["SERVER_TRAFFIC_SECRET_0"])
	var sData []byte
	for ; si < len(s2c); si++ {
		typ, plain := sOpen.open(s2c[si])
		switch {
		case typ == TypeApplicationData:
			sData = append(sData, plain...)
		case typ == TypeHandshake && plain[0] == 4: // NewSessionTicket
		case typ == TypeHandshake && plain[0] == 24: // KeyUpdate answer
			sOpen.use(keyschedule.NextTrafficSecret(h, sOpen.hc.Secret()))
		case typ == TypeAlert:
		default:
			t.Fatalf("server sent %v %x", typ, plain)
		}
	}
	if string(sData) != "world\n" {
		t.Errorf("server application data %q", sData)
	}

	// Exporters.
	ems := run.sslLog["EXPORTER_SECRET"]
	if len(ems) != h.Size() {
		t.Fatal("no EXPORTER_SECRET in the OpenSSL key log")
	}
	if got := keyschedule.Exporter(h, ems, exportLabel, nil, 32); !bytes.Equal(got, run.sslExport) || !bytes.Equal(got, run.goExport) {
		t.Errorf("Exporter = %x, OpenSSL %x, crypto/tls %x", got, run.sslExport, run.goExport)
	}
	if got := keyschedule.Exporter(h, ems, exportLabel, []byte("ctx"), 40); !bytes.Equal(got, run.goExportCtx) {
		t.Errorf("Exporter with context = %x, crypto/tls %x", got, run.goExportCtx)
	}
}

// messagesComplete returns the complete handshake messages at the start of b.
func messagesComplete(b []byte) [][]byte {
	var out [][]byte
	for len(b) >= 4 {
		n := 4 + (int(b[1])<<16 | int(b[2])<<8 | int(b[3]))
		if len(b) < n {
			break
		}
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// selfSigned makes a throwaway ECDSA P-256 certificate; the client does not
// verify it.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "record interop test"},
		NotBefore:    clock.Now().Add(-time.Hour),
		NotAfter:     clock.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
