package tls13

// Native fuzz targets for the engine: arbitrary bytes fed to a server, to a
// client after its ClientHello, and to either side of a finished
// handshake must never panic, and every error must be a *LocalError (we
// sent an alert) or an *AlertError (the peer sent one).
//
// The engines here are deterministic (seeded Rand, fixed Time, fixed ticket
// key, Ed25519 server key), so a byte stream recorded from one real
// handshake replays against a fresh engine: the seeds reach the encrypted
// part of the handshake, not just the first parser.
//
//	go test -run '^$' -fuzz '^FuzzServerEngine$' -fuzztime 30s ./tls13/

import (
	"bytes"
	"crypto/ecdh"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

// seededRand returns the same byte stream for the same seed.
func seededRand(seed byte) io.Reader {
	var s [32]byte
	s[0] = seed
	return rand.NewChaCha8(s)
}

// alwaysFresh is a StrikeRegister that accepts every ClientHello (a
// register turned off), so a replayed 0-RTT seed still reaches the
// early-data paths, and only a BFE key can refuse a replay.
type alwaysFresh struct{}

func (alwaysFresh) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return true, nil
}

// fuzzEnv holds the configurations of the fuzz targets. A Config keeps its
// lazily made secrets (cookie key) for the whole process, and each engine
// gets a freshly seeded Rand, so every run of a variant behaves the same.
type fuzzEnv struct {
	now     time.Time
	servers []*Config // server variants
	clients []*Config // client variants
	session *ClientSession
	zoffer  *ZDataOffer // ZTLS: what a client found in DNS; every server has its key
}

// clientModes: each client variant runs plain, offering env.session,
// offering env.session with 0-RTT data, and opening with ZTLS (Z-data and
// early data).
const clientModes = 4

// fuzzZKeys serves one Z-data key to the fuzzed servers.
type fuzzZKeys struct{ key *ZDataKey }

func (k fuzzZKeys) LookupZData(id uint32, hash [32]byte, now time.Time) *ZDataKey {
	if id == k.key.ID && hash == k.key.Hash && !now.Before(k.key.NotBefore) && !now.After(k.key.NotAfter) {
		return k.key
	}
	return nil
}

// newFuzzZData makes a fixed x25519 Z-data key and the matching client offer.
func newFuzzZData(t testing.TB, now time.Time, p *testPKI) (ZDataKeys, *ZDataOffer) {
	priv, err := ecdh.X25519().NewPrivateKey(bytes.Repeat([]byte{0x5a}, 32))
	if err != nil {
		t.Fatal(err)
	}
	key := &ZDataKey{
		ID: 7, Hash: [32]byte{7, 7, 7}, Host: "localhost", Group: X25519, MaxEarlyData: 4096, ALPN: "h2",
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		ECDH: func(peer []byte) ([]byte, error) {
			pub, err := ecdh.X25519().NewPublicKey(peer)
			if err != nil {
				return nil, err
			}
			return priv.ECDH(pub)
		},
	}
	offer := &ZDataOffer{ID: key.ID, Hash: key.Hash, Group: X25519, Share: priv.PublicKey().Bytes(),
		MaxEarlyData: key.MaxEarlyData, ALPN: key.ALPN, Leaf: p.server.Leaf}
	return fuzzZKeys{key}, offer
}

var (
	fuzzEnvOnce sync.Once
	theFuzzEnv  *fuzzEnv
)

func getFuzzEnv(t testing.TB) *fuzzEnv {
	ed := getPKI(t, "ed25519")
	fuzzEnvOnce.Do(func() {
		env := &fuzzEnv{now: clock.Now()}
		clock := func() time.Time { return env.now }
		zkeys, zoffer := newFuzzZData(t, env.now, ed)
		env.zoffer = zoffer
		server := func() *Config {
			c := serverConfig(ed)
			c.Time, c.MaxEarlyData, c.StrikeRegister = clock, 1024, alwaysFresh{}
			c.ZData = zkeys
			c.TicketKey = [32]byte{1, 2, 3}
			c.NextProtos = []string{"h2", "http/1.1"}
			return c
		}
		plain := server()
		auth := server()
		auth.ClientAuth, auth.ClientCAs = RequireAndVerifyClientCert, ed.pool()
		pskKE := server()
		pskKE.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
		p256First := server()
		p256First.Groups = []CurveID{P256, X25519}
		env.servers = []*Config{plain, auth, pskKE, p256First}

		client := func() *Config {
			c := clientConfig(ed)
			c.Time = clock
			c.Groups = []CurveID{X25519, P256}
			c.NextProtos = []string{"h2"}
			return c
		}
		c0 := client()
		c1 := client()
		c1.Certificates = []Certificate{ed.client}
		c2 := client()
		c2.MiddleboxCompat = true
		c3 := client()
		c3.PSKModes = []PSKMode{PSKModeKE, PSKModeDHEKE}
		env.clients = []*Config{c0, c1, c2, c3}
		theFuzzEnv = env
	})
	return theFuzzEnv
}

func (env *fuzzEnv) serverEngine(variant byte) *engine {
	cfg := env.servers[int(variant)%len(env.servers)]
	cfg.Rand = seededRand(variant)
	e := newEngine(cfg, false)
	e.startServer()
	return e
}

// clientEngine returns a client after startClient, in one of the
// clientModes of one of the client configurations.
func (env *fuzzEnv) clientEngine(variant byte) *engine {
	n := len(env.clients)
	cfg := env.clients[int(variant)%n]
	cfg.Rand = seededRand(variant)
	e := newEngine(cfg, true)
	var sess *ClientSession
	var early []byte
	request := []byte("GET / HTTP/1.1\r\n\r\n")
	var z *ZDataOffer
	switch int(variant) % (clientModes * n) / n {
	case 1:
		sess = env.session
	case 2:
		sess, early = env.session, request
	case 3:
		z, early = env.zoffer, request
	}
	e.startClient(sess, z, early)
	return e
}

// checkEngineErr fails unless err is nil or one of the engine's two error types.
func checkEngineErr(t *testing.T, err error) {
	t.Helper()
	switch err.(type) {
	case nil, *LocalError, *AlertError:
	default:
		t.Fatalf("engine returned %T: %v", err, err)
	}
}

// shuttle runs a handshake between two engines in memory and returns
// everything each one sent, also when the handshake fails (a server that
// requires a certificate from a client without one).
func shuttle(cli, srv *engine) (fromClient, fromServer []byte, err error) {
	for round := 0; round < 10; round++ {
		c := cli.takeOutput()
		fromClient = append(fromClient, c...)
		if len(c) > 0 {
			if err := srv.feed(c); err != nil {
				return fromClient, append(fromServer, srv.takeOutput()...), err
			}
		}
		s := srv.takeOutput()
		fromServer = append(fromServer, s...)
		if len(c) == 0 && len(s) == 0 {
			break
		}
		if len(s) > 0 {
			if err := cli.feed(s); err != nil {
				return append(fromClient, cli.takeOutput()...), fromServer, err
			}
		}
	}
	if !cli.done || !srv.done {
		return fromClient, fromServer, errors.New("handshake did not finish")
	}
	return fromClient, fromServer, nil
}

// ensureSession makes env.session with a deterministic handshake.
func (env *fuzzEnv) ensureSession(t testing.TB) {
	if env.session != nil {
		return
	}
	cli, srv := env.clientEngine(0), env.serverEngine(0)
	if _, _, err := shuttle(cli, srv); err != nil {
		t.Fatal(err)
	}
	if cli.lastSession() == nil {
		t.Fatal("no ticket")
	}
	env.session = cli.lastSession()
}

// driveEngine runs e against a peer on the other end of c until the peer
// closes, returning every byte the peer sent.
func driveEngine(e *engine, c net.Conn) []byte {
	var got []byte
	buf := make([]byte, 32*1024)
	for {
		if out := e.takeOutput(); len(out) > 0 {
			if _, err := c.Write(out); err != nil {
				return got
			}
		}
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if n > 0 && e.feed(buf[:n]) != nil {
			return got
		}
		if err != nil {
			return got
		}
	}
}

// goPeerStream records what a crypto/tls peer sends to engine e in a full handshake.
func goPeerStream(e *engine, peer func(net.Conn) *tls.Conn) []byte {
	a, b := memPipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		tc := peer(b)
		tc.Handshake()
		b.Close()
	}()
	got := driveEngine(e, a)
	a.Close()
	<-done
	return got
}

// goClientStreams records what crypto/tls clients send to server variant 0
// in full handshakes, one per group.
func goClientStreams(t testing.TB, env *fuzzEnv) [][]byte {
	ed := getPKI(t, "ed25519")
	var streams [][]byte
	for _, g := range []tls.CurveID{tls.X25519, tls.X25519MLKEM768, tls.CurveP256} {
		streams = append(streams, goPeerStream(env.serverEngine(0), func(c net.Conn) *tls.Conn {
			return tls.Client(c, &tls.Config{RootCAs: ed.pool(), ServerName: "localhost",
				CurvePreferences: []tls.CurveID{g}, Time: func() time.Time { return env.now }})
		}))
	}
	return streams
}

// goServerStreams records what a crypto/tls server sends to each plain
// client variant (index = variant).
func goServerStreams(t testing.TB, env *fuzzEnv) [][]byte {
	ed := getPKI(t, "ed25519")
	var streams [][]byte
	for cv := range len(env.clients) {
		streams = append(streams, goPeerStream(env.clientEngine(byte(cv)), func(c net.Conn) *tls.Conn {
			return tls.Server(c, &tls.Config{Certificates: []tls.Certificate{ed.goSrv},
				ClientAuth: tls.RequestClientCert, NextProtos: []string{"h2"}})
		}))
	}
	return streams
}

func FuzzServerEngine(f *testing.F) {
	env := getFuzzEnv(f)
	env.ensureSession(f)
	// Whole client streams of real handshakes, one per server variant and
	// client variant (full, with a ticket, with a ticket and 0-RTT).
	for sv := range len(env.servers) {
		for cv := range clientModes * len(env.clients) {
			cli, srv := env.clientEngine(byte(cv)), env.serverEngine(byte(sv))
			fromClient, _, _ := shuttle(cli, srv)
			f.Add(byte(sv), fromClient)
			// And the first ClientHello record alone.
			if len(fromClient) > 5 {
				n := 5 + int(fromClient[3])<<8 | int(fromClient[4])
				f.Add(byte(sv), fromClient[:min(n, len(fromClient))])
			}
		}
	}
	// crypto/tls clients.
	for _, stream := range goClientStreams(f, env) {
		f.Add(byte(0), stream)
	}
	f.Fuzz(func(t *testing.T, variant byte, data []byte) {
		e := env.serverEngine(variant)
		err := e.feed(data)
		checkEngineErr(t, err)
		e.takeOutput()
		if err != nil {
			// Errors are sticky.
			if again := e.feed([]byte{22, 3, 3, 0, 0}); again != err {
				t.Fatalf("second feed after %v returned %v", err, again)
			}
			return
		}
		if e.done {
			e.writeApp([]byte("hello"))
			e.sendKeyUpdate(true)
			e.close()
			e.takeOutput()
		}
	})
}

func FuzzClientEngine(f *testing.F) {
	env := getFuzzEnv(f)
	env.ensureSession(f)
	// Whole server streams answering each deterministic ClientHello.
	for cv := range clientModes * len(env.clients) {
		for sv := range len(env.servers) {
			cli, srv := env.clientEngine(byte(cv)), env.serverEngine(byte(sv))
			_, fromServer, _ := shuttle(cli, srv)
			f.Add(byte(cv), fromServer)
		}
	}
	// crypto/tls servers answering the same ClientHellos.
	for cv, stream := range goServerStreams(f, env) {
		f.Add(byte(cv), stream)
	}
	f.Fuzz(func(t *testing.T, variant byte, data []byte) {
		e := env.clientEngine(variant)
		e.takeOutput()
		err := e.feed(data)
		checkEngineErr(t, err)
		e.takeOutput()
		if err == nil && e.done {
			e.writeApp([]byte("hello"))
			e.sendKeyUpdate(true)
			e.close()
			e.takeOutput()
		}
	})
}

// donePair returns a client and a server that finished a deterministic
// handshake (the client has taken the server's ticket).
func donePair(t testing.TB, env *fuzzEnv) (cli, srv *engine) {
	cli, srv = env.clientEngine(0), env.serverEngine(0)
	if _, _, err := shuttle(cli, srv); err != nil {
		t.Fatal(err)
	}
	return cli, srv
}

func FuzzRecordAfterHandshake(f *testing.F) {
	env := getFuzzEnv(f)
	// Records each side really sends after the handshake, in the order
	// the other side expects them (so sequence numbers match).
	for toServer := range 2 {
		cli, srv := donePair(f, env)
		from := srv
		if toServer == 1 {
			from = cli
		}
		var stream []byte
		step := func(do func()) {
			do()
			out := from.takeOutput()
			f.Add(byte(toServer), out)
			stream = append(stream, out...)
		}
		step(func() { from.writeApp([]byte("ping")) })
		step(func() { from.writeApp(bytes.Repeat([]byte{'x'}, 20000)) })
		step(func() { from.sendKeyUpdate(true) })
		step(func() { from.writeApp([]byte("after the key update")) })
		if toServer == 0 {
			step(func() { from.st.(*serverConnected).sendSessionTicket(from) })
		}
		step(func() { from.close() })
		f.Add(byte(toServer), stream)
	}
	f.Add(byte(0), []byte{21, 3, 3, 0, 2, 2, 40})       // plaintext alert after keys
	f.Add(byte(1), []byte{20, 3, 3, 0, 1, 1})           // late ChangeCipherSpec
	f.Add(byte(1), []byte{23, 3, 3, 0, 17, 1, 2, 3, 4}) // truncated protected record
	f.Fuzz(func(t *testing.T, toServer byte, data []byte) {
		cli, srv := donePair(t, env)
		to, from := cli, srv
		if toServer&1 == 1 {
			to, from = srv, cli
		}
		err := to.feed(data)
		checkEngineErr(t, err)
		// Whatever came in, the receiver can still answer or has failed
		// cleanly, and the other side survives its output.
		to.writeApp([]byte("reply"))
		to.close()
		checkEngineErr(t, from.feed(to.takeOutput()))
		buf := make([]byte, 64)
		for to.readApp(buf) > 0 {
		}
	})
}

func FuzzSessionUnmarshal(f *testing.F) {
	env := getFuzzEnv(f)
	env.ensureSession(f)
	good, err := env.session.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	early := *env.session
	early.MaxEarlyData, early.ALPN = 1024, "h2"
	b, _ := early.MarshalBinary()
	f.Add(b)
	f.Add(good[:len(good)-1])
	f.Add([]byte{})
	f.Add([]byte{1, 0x13, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		var s ClientSession
		if err := s.UnmarshalBinary(data); err != nil {
			return
		}
		// Whatever parses encodes back to the same bytes.
		again, err := s.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary of a parsed session: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("round trip changed the encoding:\n in  %x\n out %x", data, again)
		}
	})
}

// TestFuzzSeedsReachHandshakeEnd checks that the recorded streams the
// fuzz targets start from replay to a complete handshake, so the targets
// explore past the ClientHello.
func TestFuzzSeedsReachHandshakeEnd(t *testing.T) {
	env := getFuzzEnv(t)
	env.ensureSession(t)
	for cv := range clientModes * len(env.clients) {
		for sv := range len(env.servers) {
			cli, srv := env.clientEngine(byte(cv)), env.serverEngine(byte(sv))
			fromClient, fromServer, err := shuttle(cli, srv)
			if err != nil {
				if sv == 1 && cv%len(env.clients) != 1 {
					continue // no client certificate for a server that requires one
				}
				t.Fatalf("client %d to server %d: %v", cv, sv, err)
			}
			// The seeds cover what the modes are for.
			// A server that requires client certificates (server 1)
			// takes no early data (docs/ztls-spec.md, Section 1 field 10), and no
			// ticket issued to a client without a certificate.
			st, mode := cli.info, cv/len(env.clients)
			certOK := sv != 1
			if st.DidResume != ((mode == 1 || mode == 2) && certOK) || st.EarlyDataAccepted != (mode >= 2 && certOK) || st.ZTLS != (mode == 3 && certOK) {
				t.Errorf("client %d to server %d: resumed=%v early=%v ztls=%v", cv, sv, st.DidResume, st.EarlyDataAccepted, st.ZTLS)
			}
			s := env.serverEngine(byte(sv))
			if err := s.feed(fromClient); err != nil || !s.done {
				t.Errorf("client %d to server %d: replayed client stream: done=%v err=%v", cv, sv, s.done, err)
			}
			c := env.clientEngine(byte(cv))
			if err := c.feed(fromServer); err != nil || !c.done {
				t.Errorf("client %d to server %d: replayed server stream: done=%v err=%v", cv, sv, c.done, err)
			}
		}
	}
	for i, stream := range goClientStreams(t, env) {
		s := env.serverEngine(0)
		if err := s.feed(stream); err != nil || !s.done {
			t.Errorf("crypto/tls client %d: replayed stream: done=%v err=%v", i, s.done, err)
		}
	}
	for cv, stream := range goServerStreams(t, env) {
		c := env.clientEngine(byte(cv))
		if err := c.feed(stream); err != nil || !c.done {
			t.Errorf("crypto/tls server to client %d: replayed stream: done=%v err=%v", cv, c.done, err)
		}
	}
}

// FuzzParseTicket: a ticket's plaintext (as the server's key opens it) is
// parsed without panics, and whatever parses encodes back to its bytes.
func FuzzParseTicket(f *testing.F) {
	p := getPKI(f, "ecdsa-p256")
	for _, t := range []*sessionTicket{
		{Suite: uint16(TLS_AES_128_GCM_SHA256), CreatedNS: 1, PSK: make([]byte, 32), SNI: "localhost"},
		{Suite: uint16(TLS_AES_256_GCM_SHA384), PSK: make([]byte, 48), ALPN: "h2", ClientCerts: [][]byte{p.client.Chain[0], p.ca.DER}},
	} {
		b, err := marshalTicket(t)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := parseTicket(data)
		if err != nil {
			return
		}
		again, err := marshalTicket(tk)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("round trip: %v\n in  %x\n out %x", err, data, again)
		}
	})
}

// FuzzReadMemoryStrikeRegister: a saved register file from disk is parsed
// without panics, within its entry bound.
func FuzzReadMemoryStrikeRegister(f *testing.F) {
	r := NewMemoryStrikeRegister(4, time.Unix(1_800_000_000, 0))
	now := time.Unix(1_800_000_100, 0)
	r.CheckAndInsert([]byte("k1"), now, now, now.Add(time.Minute))
	r.CheckAndInsert(bytes.Repeat([]byte{7}, 32), now, now, now.Add(time.Minute))
	var buf bytes.Buffer
	r.WriteTo(&buf, now)
	f.Add(buf.Bytes())
	f.Add(buf.Bytes()[:buf.Len()-3])
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := ReadMemoryStrikeRegister(data, 4, now)
		if err != nil {
			return
		}
		if len(l.m) > 4 {
			t.Fatalf("%d entries loaded, bound 4", len(l.m))
		}
	})
}
