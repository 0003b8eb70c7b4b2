package tls13

// The attacks of the security review (issue 12), each tried against the
// engine and refused: early data before a client certificate, the Z-data
// leaf outside the client's certificate policy, a client that checks no
// name, a resumption that outlives its client certificate, replays across
// a restart and after the register forgot, and a KeyUpdate flood.

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
)

// testClock is a Config.Time the test moves.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: ztlsclock.Now()} }

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// engineTicket runs a full handshake between engines and returns the
// client's ticket (the server's NewSessionTicket is fed back).
func engineTicket(t *testing.T, ccfg, scfg *Config) *ClientSession {
	t.Helper()
	c, s := newEngine(ccfg, true), newEngine(scfg, false)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	if _, _, err := shuttle(c, s); err != nil {
		t.Fatal(err)
	}
	if c.lastSession() == nil {
		t.Fatal("no ticket")
	}
	return c.lastSession()
}

// firstFlight is a client's ClientHello and early data, as an attacker on
// the path records it.
func firstFlight(t *testing.T, ccfg *Config, sess *ClientSession, z *ZDataOffer, early []byte) []byte {
	t.Helper()
	c := newEngine(ccfg, true)
	if err := c.startClient(sess, z, early); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(c.takeOutput())
}

// serveFlight feeds a recorded first flight to a fresh server engine and
// returns it with the early data it would act on.
func serveFlight(t *testing.T, scfg *Config, flight []byte) (*engine, []byte) {
	t.Helper()
	s := newEngine(scfg, false)
	s.startServer()
	if err := s.feed(flight); err != nil {
		t.Fatalf("server: %v", err)
	}
	got := make([]byte, 1<<16)
	return s, got[:s.readEarly(got)]
}

// Point 1: a server that requires client certificates never acts on 0-RTT
// data, which no certificate covers (ZTLS is tested in
// TestZTLSWithClientCertificate).
func TestZeroRTTRefusedWhenClientCertsRequired(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, auth := range []ClientAuthType{RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert} {
		scfg := serverConfig(p)
		scfg.ClientAuth, scfg.ClientCAs, scfg.MaxEarlyData = auth, p.pool(), 1024
		ccfg := clientConfig(p)
		ccfg.Certificates = []Certificate{p.client}
		sess := engineTicket(t, ccfg, scfg)
		if sess.MaxEarlyData == 0 {
			t.Fatal("the ticket does not allow early data: the test would prove nothing")
		}
		s, early := serveFlight(t, scfg, firstFlight(t, ccfg, sess, nil, []byte("GET /secret")))
		if len(early) > 0 || s.info.EarlyDataAccepted {
			t.Fatalf("ClientAuth %d: the server read %q as early data before any client certificate", auth, early)
		}
		if !s.info.DidResume {
			t.Fatalf("ClientAuth %d: the ticket was not used", auth)
		}
	}
	// The same ticket and flight to a server that does not ask for
	// certificates is accepted: the refusal above is the policy's.
	scfg := serverConfig(p)
	scfg.MaxEarlyData = 1024
	ccfg := clientConfig(p)
	sess := engineTicket(t, ccfg, scfg)
	if _, early := serveFlight(t, scfg, firstFlight(t, ccfg, sess, nil, []byte("GET /"))); string(early) != "GET /" {
		t.Fatalf("control: early data %q", early)
	}
}

// Point 2: the Z-data leaf meets the application's certificate policy
// before any early byte is encrypted to its key, and the connection
// reports the verified chain when the Certificate is omitted.
func TestZTLSLeafUnderCertificatePolicy(t *testing.T) {
	t.Run("VerifyPeerCertificate refuses", func(t *testing.T) {
		z := newZTLSSetup(t)
		calls := 0
		z.ccfg.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error {
			calls++
			return errors.New("pinned key does not match")
		}
		c, _, answer, err := z.run(t, []byte("GET /"), nil)
		if c.info.ZTLSOffered || c.info.EarlyDataOffered || len(answer) > 0 {
			t.Fatalf("early data sent to a leaf the policy refused: offered=%v answer %q", c.info.ZTLSOffered, answer)
		}
		if !strings.Contains(c.info.ZTLSSkipped, "pinned key does not match") {
			t.Fatalf("skipped %q", c.info.ZTLSSkipped)
		}
		// The same policy then refuses the Certificate message.
		if alertOf(err) != int(AlertBadCertificate) || calls != 2 {
			t.Fatalf("handshake: %v after %d calls, want bad_certificate after 2", err, calls)
		}
	})
	t.Run("pin matches", func(t *testing.T) {
		z := newZTLSSetup(t)
		pin := sha256.Sum256(z.p.server.Leaf.RawSubjectPublicKeyInfo)
		var seen [][]byte
		var seenChains [][]*x509.Certificate
		z.ccfg.VerifyPeerCertificate = func(raws [][]byte, chains [][]*x509.Certificate) error {
			seen, seenChains = raws, chains
			leaf, err := x509.ParseCertificate(raws[0])
			if err != nil || sha256.Sum256(leaf.RawSubjectPublicKeyInfo) != pin {
				return errors.New("pin mismatch")
			}
			return nil
		}
		c, _, answer, err := z.run(t, []byte("GET /"), nil)
		if err != nil || !c.info.ZTLS || !c.info.CertificateOmitted || string(answer) != "answer to GET /" {
			t.Fatalf("err %v ztls=%v omitted=%v answer %q", err, c.info.ZTLS, c.info.CertificateOmitted, answer)
		}
		if len(seen) == 0 || !bytes.Equal(seen[0], z.p.server.Leaf.Raw) || len(seenChains) == 0 {
			t.Fatal("the hook did not see the Z-data leaf and its verified chains")
		}
		if len(c.info.PeerCertificates) == 0 || !c.info.PeerCertificates[0].Equal(z.p.server.Leaf) || len(c.info.VerifiedChains) == 0 {
			t.Fatalf("omitted path: PeerCertificates %d, VerifiedChains %d", len(c.info.PeerCertificates), len(c.info.VerifiedChains))
		}
	})
	t.Run("untrusted roots", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.ccfg.RootCAs = x509.NewCertPool() // trusts nothing
		c, _, _, err := z.run(t, []byte("GET /"), nil)
		if c.info.ZTLSOffered || c.info.EarlyDataOffered || err == nil {
			t.Fatalf("offered=%v err %v", c.info.ZTLSOffered, err)
		}
	})
	t.Run("revoked leaf", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.ccfg.Revocation = revoking(t, z.p, z.p.server.Leaf.SerialNumber)
		c, _, _, err := z.run(t, []byte("GET /"), nil)
		if c.info.ZTLSOffered || alertOf(err) != int(AlertCertificateRevoked) {
			t.Fatalf("offered=%v err %v", c.info.ZTLSOffered, err)
		}
	})
}

// Point 3: the name checked on the Z-data leaf is ServerName, the name the
// TLS path checks, not whatever host the record was found under.
func TestZTLSLeafCheckedAgainstServerName(t *testing.T) {
	z := newZTLSSetup(t)
	z.ccfg.ServerName = "other.example" // the leaf is for localhost
	c, _, _, err := z.run(t, []byte("GET /"), nil)
	if c.info.ZTLSOffered || c.info.EarlyDataOffered {
		t.Fatal("ZTLS offered with a leaf that does not match ServerName")
	}
	var hn x509.HostnameError
	if !strings.Contains(c.info.ZTLSSkipped, "other.example") || !errors.As(err, &hn) {
		t.Fatalf("skipped %q, handshake %v", c.info.ZTLSSkipped, err)
	}
}

// Point 4: a client that could check no name is refused before it sends
// anything, as crypto/tls does.
func TestClientWithoutServerNameRefused(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c := newEngine(&Config{RootCAs: p.pool()}, true)
	err := c.startClient(nil, nil, nil)
	if !errors.Is(err, errNoServerName) || len(c.takeOutput()) != 0 {
		t.Fatalf("err %v", err)
	}
	// Through Conn too.
	a, b := memPipe()
	defer a.Close()
	defer b.Close()
	if err := Client(a, &Config{RootCAs: p.pool()}).Handshake(); !errors.Is(err, errNoServerName) {
		t.Fatalf("Conn: %v", err)
	}
	// InsecureSkipVerify is the explicit way to check nothing.
	c = newEngine(&Config{InsecureSkipVerify: true}, true)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// Point 5: a ticket carries the client's certificate chain; resuming
// re-checks it (expiry, revocation, the hook) and restores it.
func TestResumptionRechecksClientCertificate(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	clock := newTestClock()
	newServer := func() *Config {
		scfg := serverConfig(p)
		scfg.ClientAuth, scfg.ClientCAs, scfg.Time = RequireAndVerifyClientCert, p.pool(), clock.now
		scfg.TicketKey = [32]byte{1, 2, 3}
		return scfg
	}
	ccfg := clientConfig(p)
	ccfg.Certificates, ccfg.Time = []Certificate{p.client}, clock.now
	sess := engineTicket(t, ccfg, newServer())

	resume := func(scfg *Config) *engine {
		t.Helper()
		c, s := newEngine(ccfg, true), newEngine(scfg, false)
		if err := c.startClient(sess, nil, nil); err != nil {
			t.Fatal(err)
		}
		s.startServer()
		if _, _, err := shuttle(c, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := resume(newServer())
	if !s.info.DidResume || len(s.info.PeerCertificates) == 0 || !s.info.PeerCertificates[0].Equal(p.client.Leaf) || len(s.info.VerifiedChains) == 0 {
		t.Fatalf("resumed=%v peer certificates %d chains %d", s.info.DidResume, len(s.info.PeerCertificates), len(s.info.VerifiedChains))
	}

	// Revoked since the ticket was issued: no resumption; the full
	// handshake then refuses the certificate itself.
	scfg := newServer()
	scfg.Revocation = revoking(t, p, p.client.Leaf.SerialNumber)
	c, s2 := newEngine(ccfg, true), newEngine(scfg, false)
	c.startClient(sess, nil, nil)
	s2.startServer()
	_, _, err := shuttle(c, s2)
	if s2.info.DidResume || alertOf(err) != int(AlertCertificateRevoked) {
		t.Fatalf("revoked client certificate: resumed=%v err %v", s2.info.DidResume, err)
	}

	// The application's hook now refuses the certificate: no resumption.
	scfg = newServer()
	scfg.VerifyPeerCertificate = func([][]byte, [][]*x509.Certificate) error { return errors.New("banned") }
	c, s2 = newEngine(ccfg, true), newEngine(scfg, false)
	c.startClient(sess, nil, nil)
	s2.startServer()
	if _, _, err := shuttle(c, s2); s2.info.DidResume || alertOf(err) != int(AlertBadCertificate) {
		t.Fatalf("hook: resumed=%v err %v", s2.info.DidResume, err)
	}

	// Past the certificate's NotAfter (the ticket itself still valid).
	clock.advance(ztlsclock.Until(p.client.Leaf.NotAfter) + time.Hour)
	sess.ReceivedAt = clock.now().Add(-time.Minute)
	scfg = newServer()
	scfg.TicketLifetime = 7 * 24 * time.Hour
	c, s2 = newEngine(ccfg, true), newEngine(scfg, false)
	c.startClient(sess, nil, nil)
	s2.startServer()
	shuttle(c, s2)
	if s2.info.DidResume {
		t.Fatal("resumed with an expired client certificate")
	}

	// A ticket issued without a certificate does not resume on a server
	// that requires one.
	clock = newTestClock()
	open := serverConfig(p)
	open.TicketKey, open.Time = [32]byte{1, 2, 3}, clock.now
	anon := clientConfig(p)
	anon.Time = clock.now
	sess = engineTicket(t, anon, open)
	ccfg.Time = clock.now
	s = resume(func() *Config { c := newServer(); c.Time = clock.now; return c }())
	if s.info.DidResume {
		t.Fatal("a ticket issued without a client certificate resumed on a server that requires one")
	}
}

// Point 6: the default register refuses, after a restart, what the
// server before the restart may have accepted; with ZTLS and with 0-RTT.
func TestRestartGuardRefusesReplay(t *testing.T) {
	const w = 10 * time.Second
	t.Run("ztls", func(t *testing.T) {
		z := newZTLSSetup(t)
		clock := newTestClock()
		z.ccfg.Time = clock.now
		server := func() *Config { // a fresh process: default register
			c := serverConfig(z.p)
			c.ZData, c.Time = z.scfg.ZData, clock.now
			return c
		}
		first := server()
		if _, early := serveFlight(t, first, firstFlight(t, z.ccfg, nil, z.offer, []byte("GET /"))); len(early) != 0 {
			t.Fatal("a server accepted early data that may predate its start")
		}
		clock.advance(2*w + time.Second)
		flight := firstFlight(t, z.ccfg, nil, z.offer, []byte("GET /"))
		if s, early := serveFlight(t, first, flight); string(early) != "GET /" {
			t.Fatalf("after two windows: early %q (%s)", early, s.info.ZTLSRejectReason)
		}
		if _, early := serveFlight(t, first, flight); len(early) != 0 {
			t.Fatal("replay to the same process accepted")
		}
		// The server restarts; the attacker replays the captured flight
		// while it is still fresh.
		clock.advance(time.Second)
		s, early := serveFlight(t, server(), flight)
		if len(early) != 0 || !strings.Contains(s.info.ZTLSRejectReason, "strike register") {
			t.Fatalf("replay after a restart: early %q, reason %q", early, s.info.ZTLSRejectReason)
		}
	})
	t.Run("0-RTT", func(t *testing.T) {
		p := getPKI(t, "ecdsa-p256")
		clock := newTestClock()
		server := func() *Config { // the ticket key outlives the process
			c := serverConfig(p)
			c.Time, c.MaxEarlyData, c.TicketKey = clock.now, 1024, [32]byte{9}
			return c
		}
		ccfg := clientConfig(p)
		ccfg.Time = clock.now
		first := server()
		sess := engineTicket(t, ccfg, first)
		clock.advance(time.Second)
		flight := firstFlight(t, ccfg, sess, nil, []byte("GET /"))
		if _, early := serveFlight(t, first, flight); string(early) != "GET /" {
			t.Fatalf("0-RTT to the issuing process: %q", early)
		}
		clock.advance(time.Second)
		if _, early := serveFlight(t, server(), flight); len(early) != 0 {
			t.Fatal("0-RTT replay after a restart accepted")
		}
		// A ticket issued after the restart is fine at once.
		clock.advance(time.Second)
		second := server()
		sess = engineTicket(t, ccfg, second)
		if _, early := serveFlight(t, second, firstFlight(t, ccfg, sess, nil, []byte("GET /"))); string(early) != "GET /" {
			t.Fatalf("0-RTT with a ticket from after the restart: %q", early)
		}
	})
}

// Point 9: freshness accepts a ClientHello within W of the client's send
// time as the ticket age tells it; the register must remember it that
// long, or a replay at insertion + W + ε passes.
func TestZeroRTTReplayAfterOneWindow(t *testing.T) {
	const w = 10 * time.Second
	p := getPKI(t, "ecdsa-p256")
	serverClock, clientClock := newTestClock(), newTestClock()
	scfg := serverConfig(p)
	scfg.Time, scfg.MaxEarlyData, scfg.EarlyDataWindow = serverClock.now, 1024, w
	ccfg := clientConfig(p)
	ccfg.Time = clientClock.now
	sess := engineTicket(t, ccfg, scfg)
	// The client's age runs ahead: it claims the ticket is W older than
	// the server knows it is, still within the window.
	serverClock.advance(time.Minute)
	clientClock.advance(time.Minute + w - time.Second)
	flight := firstFlight(t, ccfg, sess, nil, []byte("GET /"))
	if _, early := serveFlight(t, scfg, flight); string(early) != "GET /" {
		t.Fatalf("first use: %q", early)
	}
	for _, after := range []time.Duration{w / 2, w + time.Second, 2*w - 2*time.Second} {
		serverClock.advance(after)
		if _, early := serveFlight(t, scfg, flight); len(early) != 0 {
			t.Fatalf("replay %v after the first use accepted", after)
		}
		serverClock.advance(-after)
	}
	// Once it can no longer be fresh, freshness refuses it anyway.
	serverClock.advance(2*w + time.Second)
	if _, early := serveFlight(t, scfg, flight); len(early) != 0 {
		t.Fatal("stale replay accepted")
	}
}

// Point 15: a peer that asks for KeyUpdates and reads nothing makes us
// queue one reply, not one per request, sent before our next data (RFC
// 8446, Section 4.6.3); a peer that sends nothing but KeyUpdates is cut
// off.
func TestKeyUpdateFloodBounded(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s := handshakeEngines(t, clientConfig(p), serverConfig(p))
	c.takeOutput()
	// The server floods: each KeyUpdate requests an update.
	for range 20 {
		if err := s.sendKeyUpdate(true); err != nil {
			t.Fatal(err)
		}
	}
	flood := s.takeOutput()
	if err := c.feed(flood); err != nil {
		t.Fatal(err)
	}
	if out := c.takeOutput(); len(out) != 0 {
		t.Fatalf("client answered before it had data to send: %d bytes", len(out))
	}
	if _, err := c.writeApp([]byte("pong")); err != nil {
		t.Fatal(err)
	}
	out := bytes.Clone(c.takeOutput())
	if err := s.feed(out); err != nil {
		t.Fatalf("server reading the reply and the data: %v", err)
	}
	if got := countKeyUpdates(t, out) - 1; got != 1 {
		t.Fatalf("client sent %d KeyUpdate replies to 20 requests before its data, want 1", got)
	}
	if n := s.readApp(make([]byte, 8)); n != 4 {
		t.Fatalf("server read %d bytes of data after the reply, want 4", n)
	}
	// Still one connection: data flows both ways.
	s.writeApp([]byte("ping"))
	if err := c.feed(s.takeOutput()); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if n := c.readApp(buf); string(buf[:n]) != "ping" {
		t.Fatalf("after the flood: %q", buf[:n])
	}
	// Past the bound without data in between: unexpected_message.
	for range maxKeyUpdatesWithoutData + 1 {
		s.sendKeyUpdate(false)
	}
	if err := c.feed(s.takeOutput()); alertOf(err) != int(AlertUnexpectedMessage) {
		t.Fatalf("KeyUpdate flood: %v", err)
	}
}

// countKeyUpdates counts the records in out, which holds only KeyUpdate
// replies and the data written after them.
func countKeyUpdates(t *testing.T, out []byte) int {
	t.Helper()
	types, _ := recordLengths(t, out)
	return len(types)
}

// A register saved at a clean stop and loaded at the next start keeps its
// memory (a replay of what it accepted is refused) and its start (what
// predates that start is still refused); a malformed file is refused.
func TestMemoryStrikeRegisterSaveLoad(t *testing.T) {
	start := time.Unix(1_800_000_000, 123_456_789)
	r := NewMemoryStrikeRegister(10, start)
	now := start.Add(time.Minute)
	if fresh, err := r.CheckAndInsert([]byte("seen"), now, now.Add(-time.Second), now.Add(10*time.Second)); !fresh || err != nil {
		t.Fatal(fresh, err)
	}
	r.CheckAndInsert([]byte("old"), now, now.Add(-time.Second), now.Add(time.Millisecond))
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf, now.Add(2*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	later := now.Add(5 * time.Second)
	l, err := ReadMemoryStrikeRegister(buf.Bytes(), 10, later)
	if err != nil {
		t.Fatal(err)
	}
	if l.Since().Before(start) {
		t.Fatalf("loaded start %v is before the saved %v", l.Since(), start)
	}
	if fresh, err := l.CheckAndInsert([]byte("seen"), later, later.Add(-time.Second), later.Add(10*time.Second)); fresh || err != nil {
		t.Fatalf("replay after a clean restart: fresh=%v err=%v", fresh, err)
	}
	if fresh, err := l.CheckAndInsert([]byte("new"), later, start.Add(-time.Second), later); fresh || !errors.Is(err, ErrRegisterTooYoung) {
		t.Fatalf("a ClientHello from before the start: fresh=%v err=%v", fresh, err)
	}
	if fresh, err := l.CheckAndInsert([]byte("old"), later, later.Add(-time.Second), later.Add(time.Second)); !fresh || err != nil {
		t.Fatalf("an expired entry came back: fresh=%v err=%v", fresh, err)
	}
	for _, bad := range [][]byte{nil, []byte("ztls"), buf.Bytes()[:buf.Len()-1], append(bytes.Clone(buf.Bytes()), 0)} {
		if _, err := ReadMemoryStrikeRegister(bad, 10, later); err == nil {
			t.Fatalf("malformed file of %d bytes loaded", len(bad))
		}
	}
	// A register that saw everything (zero start) stays so.
	var zero bytes.Buffer
	NewMemoryStrikeRegister(1, time.Time{}).WriteTo(&zero, now)
	if z, err := ReadMemoryStrikeRegister(zero.Bytes(), 1, now); err != nil || !z.Since().IsZero() {
		t.Fatalf("zero start: %v %v", z, err)
	}
}

// A connection's trace stops at maxTrace events, however many KeyUpdates
// the peer sends over the connection's life.
func TestTraceBounded(t *testing.T) {
	c := &Conn{e: newEngine(&Config{InsecureSkipVerify: true}, true)}
	for range 10 * maxTrace {
		c.e.event(EventPeerKeyUpdate)
		c.collectEvents()
	}
	if n := len(c.Trace()); n != maxTrace {
		t.Fatalf("trace of %d events, want %d", n, maxTrace)
	}
}
