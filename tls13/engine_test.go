package tls13

// ztls against itself: features whose both ends are ours (0-RTT paths,
// psk_ke, record size limit, padding, middlebox mode, KeyUpdate, concurrency).

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/record"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

func TestSelfAllSuitesAndGroups(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, s := range []CipherSuite{TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256} {
		for _, g := range []CurveID{X25519, P256, P384, X25519MLKEM768} {
			ccfg := clientConfig(p)
			ccfg.CipherSuites, ccfg.Groups = []CipherSuite{s}, []CurveID{g}
			c, sv, cerr, serr := pair(t, ccfg, serverConfig(p))
			if cerr != nil || serr != nil {
				t.Fatalf("%s/%s: client %v, server %v", s.String(), g.String(), cerr, serr)
			}
			go echo(sv)
			roundTrip(t, c, "self")
			if st := c.ConnectionState(); st.CipherSuite != s || st.Group != g {
				t.Fatalf("negotiated %v/%v", st.CipherSuite, st.Group)
			}
		}
	}
}

// resumptionPair runs one full handshake to get a ticket, returning it.
func firstTicket(t *testing.T, ccfg, scfg *Config) *ClientSession {
	t.Helper()
	c, s, cerr, serr := pair(t, ccfg, scfg)
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	go echo(s)
	roundTrip(t, c, "get a ticket")
	sess := c.Session()
	if sess == nil {
		t.Fatal("no ticket")
	}
	return sess
}

// earlyServer accepts one connection, reads its 0-RTT data, answers it
// with 0.5-RTT data, then echoes.
func earlyServer(t *testing.T, scfg *Config) (addr string, got chan []byte) {
	got = make(chan []byte, 1)
	addr = serve(t, loopback(t), func(raw net.Conn) {
		c := Server(raw, scfg)
		if err := c.HandshakeEarly(context.Background()); err != nil {
			got <- nil
			return
		}
		early, err := io.ReadAll(readerFunc(c.ReadEarlyData))
		if err != nil {
			got <- nil
			return
		}
		if len(early) > 0 {
			c.Write(append([]byte("early:"), early...)) // 0.5-RTT
		}
		got <- early
		if err := c.Handshake(); err != nil {
			return
		}
		echo(c)
	})
	return addr, got
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

func TestSelfZeroRTTAccepted(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	scfg := serverConfig(p)
	scfg.MaxEarlyData = 1024
	sess := firstTicket(t, clientConfig(p), scfg)
	if sess.MaxEarlyData != 1024 {
		t.Fatalf("ticket allows %d bytes of early data", sess.MaxEarlyData)
	}
	addr, got := earlyServer(t, scfg)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := Client(raw, clientConfig(p))
	defer c.Close()
	c.SetSession(sess)
	c.SetEarlyData([]byte("GET /"), false)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := c.ConnectionState()
	if !st.EarlyDataOffered || !st.EarlyDataAccepted || !st.DidResume {
		t.Fatalf("state %+v", st)
	}
	if early := <-got; string(early) != "GET /" {
		t.Fatalf("server read early data %q", early)
	}
	buf := make([]byte, 64)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	n, err := io.ReadAtLeast(c, buf, len("early:GET /"))
	if err != nil || string(buf[:n]) != "early:GET /" {
		t.Fatalf("0.5-RTT answer %q, %v", buf[:n], err)
	}
}

func TestSelfZeroRTTRejectedResends(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	var key [32]byte
	rand.Read(key[:])
	scfg := serverConfig(p)
	scfg.MaxEarlyData, scfg.TicketKey = 1024, key
	sess := firstTicket(t, clientConfig(p), scfg)
	// A server with the same ticket key that takes no early data.
	strict := serverConfig(p)
	strict.TicketKey = key
	addr, got := earlyServer(t, strict)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := Client(raw, clientConfig(p))
	defer c.Close()
	c.SetSession(sess)
	c.SetEarlyData([]byte("idempotent"), true)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := c.ConnectionState()
	if !st.EarlyDataOffered || st.EarlyDataAccepted || !st.DidResume {
		t.Fatalf("state %+v", st)
	}
	if early := <-got; len(early) != 0 {
		t.Fatalf("server saw early data %q", early)
	}
	// The data was resent after the handshake: the echo brings it back.
	buf := make([]byte, 10)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "idempotent" {
		t.Fatalf("resent data came back as %q, %v", buf, err)
	}
}

func TestSelfZeroRTTReplayRefused(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	scfg := serverConfig(p)
	scfg.MaxEarlyData = 1024
	sess := firstTicket(t, clientConfig(p), scfg)
	// Capture a client's first flight (ClientHello + 0-RTT) from the engine.
	e := newEngine(clientConfig(p), true)
	if err := e.startClient(sess, nil, []byte("transfer 100")); err != nil {
		t.Fatal(err)
	}
	flight := append([]byte(nil), e.takeOutput()...)
	for i, want := range []bool{true, false, false} {
		s := newEngine(scfg, false)
		s.startServer()
		if err := s.feed(flight); err != nil {
			t.Fatal(err)
		}
		if s.info.EarlyDataAccepted != want {
			t.Fatalf("delivery %d: early data accepted = %v", i, s.info.EarlyDataAccepted)
		}
		if !want && s.earlyBuffered() != 0 {
			t.Fatal("replayed early data reached the application")
		}
	}
}

func TestSelfPSKKE(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	ccfg, scfg := clientConfig(p), serverConfig(p)
	ccfg.PSKModes = []PSKMode{PSKModeKE}
	scfg.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
	sess := firstTicket(t, ccfg, scfg)
	ccfg2 := clientConfig(p)
	ccfg2.PSKModes = []PSKMode{PSKModeKE}
	ccfg2.ClientSessionCache = NewLRUClientSessionCache(1)
	ccfg2.ClientSessionCache.Put("localhost", sess)
	c, s, cerr, serr := pair(t, ccfg2, scfg)
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	go echo(s)
	roundTrip(t, c, "psk_ke")
	if st := c.ConnectionState(); !st.DidResume || st.Group != 0 {
		t.Fatalf("resumed=%v group=%v, want psk_ke", st.DidResume, st.Group)
	}
}

// The server takes the first of its PSK modes that the client offers
// too: a client offering both gets psk_ke only from a server that lists
// it first.
func TestPSKModeServerPreference(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, tc := range []struct {
		name   string
		server []PSKMode
		pskKE  bool
	}{
		{"server prefers a key exchange", []PSKMode{PSKModeDHEKE, PSKModeKE}, false},
		{"server prefers psk_ke", []PSKMode{PSKModeKE, PSKModeDHEKE}, true},
		{"server allows psk_dhe_ke only", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ccfg, scfg := clientConfig(p), serverConfig(p)
			ccfg.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
			ccfg.ClientSessionCache = NewLRUClientSessionCache(1)
			scfg.PSKModes = tc.server
			firstTicket(t, ccfg, scfg)
			c, s, cerr, serr := pair(t, ccfg, scfg)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			go echo(s)
			roundTrip(t, c, "resumed")
			if st := c.ConnectionState(); !st.DidResume || (st.Group == 0) != tc.pskKE {
				t.Fatalf("resumed=%v group=%v, want psk_ke %v", st.DidResume, st.Group, tc.pskKE)
			}
		})
	}
}

// A client offering psk_ke alone with a session makes no key share: the
// key_share list is empty, the server resumes without one, and a server
// that does not take the ticket asks for a share (HelloRetryRequest) and
// completes a full handshake.
func TestPSKKEOnlySendsNoKeyShare(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	scfg := serverConfig(p)
	scfg.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
	ccfg := clientConfig(p)
	ccfg.PSKModes = []PSKMode{PSKModeKE}
	ccfg.ClientSessionCache = NewLRUClientSessionCache(1)
	var shares []int
	ccfg.testHookClientHello = func(ch *wire.ClientHello) { shares = append(shares, len(ch.KeyShares)) }
	firstTicket(t, ccfg, scfg)
	if len(shares) != 1 || shares[0] == 0 {
		t.Fatalf("first ClientHello (no session) had %v key shares", shares)
	}

	for _, tc := range []struct {
		name   string
		server *Config
		resume bool
	}{
		{"ticket taken", scfg, true},
		{"ticket not ours", func() *Config { c := serverConfig(p); c.PSKModes = scfg.PSKModes; return c }(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shares = nil
			c, s, cerr, serr := pair(t, ccfg, tc.server)
			if cerr != nil || serr != nil {
				t.Fatal(cerr, serr)
			}
			go echo(s)
			roundTrip(t, c, "psk_ke only")
			st := c.ConnectionState()
			if len(shares) != 1 || shares[0] != 0 {
				t.Fatalf("ClientHello with a psk_ke-only session had %v key shares, want none", shares)
			}
			hrr := hasEvent(c.Trace(), EventHelloRetryRequest)
			if st.DidResume != tc.resume || hrr == tc.resume || (st.Group == 0) != tc.resume {
				t.Fatalf("resumed %v, retry %v, group %v; want resumed %v", st.DidResume, hrr, st.Group, tc.resume)
			}
		})
	}
}

// recordLengths splits a byte stream into records and returns their payload lengths.
func recordLengths(t *testing.T, b []byte) (types []record.ContentType, lens []int) {
	var d record.Deframer
	d.Write(b)
	for {
		typ, payload, ok, err := d.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		types = append(types, typ)
		lens = append(lens, len(payload))
	}
}

// handshakeEngines completes a handshake between two engines in memory.
func handshakeEngines(t *testing.T, ccfg, scfg *Config) (c, s *engine) {
	t.Helper()
	c, s = newEngine(ccfg, true), newEngine(scfg, false)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	for i := 0; i < 10 && !(c.done && s.done); i++ {
		if err := s.feed(c.takeOutput()); err != nil {
			t.Fatal(err)
		}
		if err := c.feed(s.takeOutput()); err != nil {
			t.Fatal(err)
		}
	}
	if !c.done || !s.done {
		t.Fatal("handshake did not finish")
	}
	s.takeOutput()
	return c, s
}

func TestSelfRecordSizeLimitAndPadding(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	ccfg := clientConfig(p)
	ccfg.RecordSizeLimit = 512
	scfg := serverConfig(p)
	scfg.PadTo = 64
	c, s := handshakeEngines(t, ccfg, scfg)
	if _, err := s.writeApp(bytes.Repeat([]byte("x"), 5000)); err != nil {
		t.Fatal(err)
	}
	out := append([]byte(nil), s.takeOutput()...)
	_, lens := recordLengths(t, out)
	total := 0
	for _, l := range lens {
		inner := l - 16 // AEAD tag
		if inner > 512 {
			t.Fatalf("record of %d bytes over the client's limit of 512", inner)
		}
		if inner%64 != 0 && inner != 512 {
			t.Fatalf("record plaintext %d not padded to 64", inner)
		}
		total += inner
	}
	if err := c.feed(out); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6000)
	if n := c.readApp(got); n != 5000 {
		t.Fatalf("read %d bytes", n)
	}
}

func TestSelfMiddleboxCompat(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	ccfg := clientConfig(p)
	ccfg.MiddleboxCompat = true
	c, s := newEngine(ccfg, true), newEngine(serverConfig(p), false)
	c.startClient(nil, nil, nil)
	s.startServer()
	if err := s.feed(c.takeOutput()); err != nil {
		t.Fatal(err)
	}
	flight := s.takeOutput()
	types, _ := recordLengths(t, flight)
	if len(types) < 3 || types[0] != record.TypeHandshake || types[1] != record.TypeChangeCipherSpec {
		t.Fatalf("server records %v: want ServerHello then ChangeCipherSpec", types)
	}
	if err := c.feed(flight); err != nil {
		t.Fatal(err)
	}
	types, _ = recordLengths(t, c.takeOutput())
	if types[0] != record.TypeChangeCipherSpec {
		t.Fatalf("client second flight %v: want ChangeCipherSpec first", types)
	}
}

func TestSelfKeyUpdateBothWays(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s, cerr, serr := pair(t, clientConfig(p), serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	go echo(s)
	for i := 0; i < 3; i++ {
		if err := c.KeyUpdate(i%2 == 0); err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, "after key update")
	}
	if err := s.KeyUpdate(true); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "after server key update")
	// The client's answer leaves before its next data (RFC 8446, Section
	// 4.6.3), which may be this round trip's or, when the request arrived
	// after the client wrote, the next one's.
	roundTrip(t, c, "after the answer")
	count := func(tr []TraceEvent) (n int) {
		for _, e := range tr {
			if e.Event == EventKeyUpdate {
				n++
			}
		}
		return
	}
	// client: 3 own + 1 answer to the server's request; server: 2 answers + 1 own.
	if got := count(c.Trace()); got != 4 {
		t.Fatalf("client sent %d KeyUpdates, want 4", got)
	}
	if got := count(s.Trace()); got != 3 {
		t.Fatalf("server sent %d KeyUpdates, want 3", got)
	}
}

func TestSelfConcurrentReadWrite(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s, cerr, serr := pair(t, clientConfig(p), serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	const size = 4 << 20
	data := make([]byte, size)
	rand.Read(data)
	var wg sync.WaitGroup
	for _, conn := range []*Conn{c, s} {
		conn.SetDeadline(time.Now().Add(20 * time.Second))
		wg.Add(2)
		go func(conn *Conn) {
			defer wg.Done()
			if _, err := conn.Write(data); err != nil {
				t.Error(err)
			}
		}(conn)
		go func(conn *Conn) {
			defer wg.Done()
			got := make([]byte, size)
			if _, err := io.ReadFull(conn, got); err != nil {
				t.Error(err)
			} else if !bytes.Equal(got, data) {
				t.Error("data corrupted")
			}
		}(conn)
	}
	wg.Wait()
}

func TestSelfExporterAndClose(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s, cerr, serr := pair(t, clientConfig(p), serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	a, _ := c.ExportKeyingMaterial("EXPORTER-test", nil, 48)
	b, _ := s.ExportKeyingMaterial("EXPORTER-test", nil, 48)
	if !bytes.Equal(a, b) || len(a) != 48 {
		t.Fatal("exporters differ")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	s.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("server read after close_notify: %v, want io.EOF", err)
	}
}

// Many handshakes share one Config, as every server does; run with -race.
func TestSharedConfigConcurrentHandshakes(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	scfg := &Config{Certificates: []Certificate{{Chain: p.server.Chain, PrivateKey: p.server.PrivateKey}}} // Leaf parsed lazily
	ccfg := clientConfig(p)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, s := newEngine(ccfg, true), newEngine(scfg, false)
			c.startClient(nil, nil, nil)
			s.startServer()
			for j := 0; j < 4 && !(c.done && s.done); j++ {
				if err := s.feed(c.takeOutput()); err != nil {
					t.Error(err)
					return
				}
				if err := c.feed(s.takeOutput()); err != nil {
					t.Error(err)
					return
				}
			}
			if !c.done || !s.done {
				t.Error("handshake did not finish")
			}
		}()
	}
	wg.Wait()
}

// TestPeerKeyUpdateEvent: a KeyUpdate received shows in the trace as
// peer_key_update, before the key_update that answers a request for one.
func TestPeerKeyUpdateEvent(t *testing.T) {
	if got := EventPeerKeyUpdate.String(); got != "peer_key_update" {
		t.Fatalf("EventPeerKeyUpdate.String() = %q", got)
	}
	p := getPKI(t, "ecdsa-p256")
	c, s, cerr, serr := pair(t, clientConfig(p), serverConfig(p))
	if cerr != nil || serr != nil {
		t.Fatal(cerr, serr)
	}
	go echo(s)
	if err := c.KeyUpdate(true); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "after a requested update")
	if err := c.KeyUpdate(false); err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "after an unrequested update")
	keyUpdates := func(tr []TraceEvent) (evs []string) {
		for _, e := range tr {
			if e.Event == EventKeyUpdate || e.Event == EventPeerKeyUpdate {
				evs = append(evs, e.Event.String())
			}
		}
		return evs
	}
	// The echo's answer follows the server's reply, so both traces are
	// complete once the round trip is.
	want := map[string][]string{
		"client": {"key_update", "peer_key_update", "key_update"},
		"server": {"peer_key_update", "key_update", "peer_key_update"},
	}
	for side, conn := range map[string]*Conn{"client": c, "server": s} {
		if got := keyUpdates(conn.Trace()); !slices.Equal(got, want[side]) {
			t.Errorf("%s trace: %v, want %v", side, got, want[side])
		}
	}
}

// An unexpected message names what arrived and what the state expected
// (unexpected_message, RFC 8446, Section 6.2).
func TestUnexpectedMessageSaysWhatWasExpected(t *testing.T) {
	e := newEngine(&Config{InsecureSkipVerify: true}, true)
	cert, err := (&wire.Certificate{}).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		st   state
		want string
	}{
		{&clientExpectEncryptedExtensions{}, "unexpected message: got Certificate, want EncryptedExtensions"},
		{&clientExpectCertificate{keys: &clientKeys{p: &clientHelloParams{}}}, "unexpected message: got Finished, want CertificateRequest, Certificate or CompressedCertificate"},
		{&serverConnected{}, "unexpected message: got ClientHello, want KeyUpdate"},
		{&clientConnected{}, "unexpected message: got Certificate, want NewSessionTicket or KeyUpdate"},
	} {
		typ, msg := uint8(cert[0]), cert
		switch c.st.(type) {
		case *clientExpectCertificate:
			typ = wire.TypeFinished
		case *serverConnected:
			typ = wire.TypeClientHello
		}
		_, err := c.st.handle(e, typ, msg)
		if alertOf(err) != int(AlertUnexpectedMessage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%T: %v, want unexpected_message saying %q", c.st, err, c.want)
		}
	}
}

// Application data is lent from the record buffer when nothing else waits
// to be read (keepApp). Whatever comes next (more input by feed or into
// inputSpace, a second record in the same input, a bad record after it)
// must not change what the reader gets.
func TestSelfLentApplicationData(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s := handshakeEngines(t, clientConfig(p), serverConfig(p))
	seal := func(b byte, n int) []byte {
		t.Helper()
		if _, err := s.writeApp(bytes.Repeat([]byte{b}, n)); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), s.takeOutput()...)
	}
	read := func(n int) string {
		t.Helper()
		buf := make([]byte, n)
		return string(buf[:c.readApp(buf)])
	}
	want := func(b byte, n int) string { return strings.Repeat(string(rune(b)), n) }

	// Partly read, then more input through feed and through inputSpace.
	if err := c.feed(seal('a', 5000)); err != nil {
		t.Fatal(err)
	}
	if got := read(1000); got != want('a', 1000) {
		t.Fatal("first read differs")
	}
	if err := c.feed(seal('b', 3000)); err != nil {
		t.Fatal(err)
	}
	rec := seal('c', 2000)
	copy(c.inputSpace(len(rec), false), rec)
	if err := c.feedSpace(len(rec)); err != nil {
		t.Fatal(err)
	}
	if got := read(20000); got != want('a', 4000)+want('b', 3000)+want('c', 2000) {
		t.Fatalf("read %d bytes, not the 9000 sent", len(got))
	}

	// Two records in one input, then a record with a bad type.
	in := append(seal('d', 100), seal('e', 200)...)
	if err := c.feed(in); err != nil {
		t.Fatal(err)
	}
	if got := read(1000); got != want('d', 100)+want('e', 200) {
		t.Fatalf("two records: %q", got)
	}
	if err := c.feed(append(seal('f', 300), 99, 3, 3)); err == nil {
		t.Fatal("bad record accepted")
	}
	if got := read(1000); got != want('f', 300) {
		t.Fatalf("after the failure: %q", got)
	}
}

// feedSpace stops at the first record that leaves application data to
// read; the records behind it (more data, a KeyUpdate, close_notify) wait
// in the record buffer until the data is read and resumeRecords runs.
func TestSelfFeedSpaceLeavesRecords(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	c, s := handshakeEngines(t, clientConfig(p), serverConfig(p))
	var in []byte
	for _, b := range []byte("xyz") {
		if _, err := s.writeApp(bytes.Repeat([]byte{b}, 1000)); err != nil {
			t.Fatal(err)
		}
		if b == 'y' {
			if err := s.sendKeyUpdate(false); err != nil {
				t.Fatal(err)
			}
		}
		in = append(in, s.takeOutput()...)
	}
	s.close()
	in = append(in, s.takeOutput()...)

	copy(c.inputSpace(len(in), false), in)
	if err := c.feedSpace(len(in)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 300)
	for rounds := 0; ; rounds++ {
		if rounds > 100 {
			t.Fatal("records never drained")
		}
		if c.appBuffered() > 0 {
			if c.peerClosed {
				t.Fatal("close_notify processed before the data in front of it was read")
			}
			got = append(got, buf[:c.readApp(buf)]...)
			continue
		}
		if !c.recordsWaiting() {
			break
		}
		if err := c.resumeRecords(); err != nil {
			t.Fatal(err)
		}
	}
	if want := strings.Repeat("x", 1000) + strings.Repeat("y", 1000) + strings.Repeat("z", 1000); string(got) != want {
		t.Fatalf("read %d bytes, not the 3000 sent in order", len(got))
	}
	if !c.peerClosed {
		t.Fatal("close_notify not processed")
	}
}

// TestSetWriteKeyKeepsTheInstalledKey: installing the write secret that
// already protects the output (the client's handshake key, set at
// ServerHello for its alerts and again before its Finished) keeps the
// HalfConn and its sequence number, so no nonce is used twice and no AEAD
// is set up twice; another secret installs a new HalfConn.
func TestSetWriteKeyKeepsTheInstalledKey(t *testing.T) {
	e := newEngine(clientConfig(getPKI(t, "ecdsa-p256")), true)
	e.suite = suite.Lookup(uint16(TLS_AES_128_GCM_SHA256))
	secret := bytes.Repeat([]byte{7}, 32)
	if err := e.setWriteKey(secret); err != nil {
		t.Fatal(err)
	}
	first := e.rout
	if _, err := first.Seal(nil, record.TypeAlert, []byte{1, 0}, 0); err != nil {
		t.Fatal(err)
	}
	if err := e.setWriteKey(bytes.Clone(secret)); err != nil {
		t.Fatal(err)
	}
	if e.rout != first || e.rout.Seq() != 1 {
		t.Fatalf("the same secret installed again: HalfConn kept %v, sequence number %d (want the same HalfConn at 1)", e.rout == first, e.rout.Seq())
	}
	other := bytes.Repeat([]byte{8}, 32)
	if err := e.setWriteKey(other); err != nil {
		t.Fatal(err)
	}
	if e.rout == first || e.rout.Seq() != 0 {
		t.Fatalf("a new secret kept the old HalfConn (%v) or its sequence number (%d)", e.rout == first, e.rout.Seq())
	}
}
