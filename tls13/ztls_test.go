package tls13

// ZTLS in the engine (docs/ztls-spec.md, Section 2-5), with a Z-data key made in the test;
// package zdata's records and keyring are tested end to end in their own
// package and by the dial tests.

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

type testZKeys struct {
	mu   sync.Mutex
	keys []*ZDataKey
}

func (k *testZKeys) LookupZData(id uint32, hash [32]byte, now time.Time) *ZDataKey {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range k.keys {
		if key.ID == id && key.Hash == hash && !now.Before(key.NotBefore) && !now.After(key.NotAfter) {
			return key
		}
	}
	return nil
}

// newZData makes a Z-data key for host and the client's offer for it.
func newZData(t testing.TB, curve ecdh.Curve, group CurveID, host, alpn string, p *testPKI) (*ZDataOffer, *ZDataKey) {
	priv, err := curve.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var hash [32]byte
	rand.Read(hash[:])
	now := clock.Now()
	key := &ZDataKey{
		ID: 7, Hash: hash, Host: host, Group: group, MaxEarlyData: 4096, ALPN: alpn,
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Hour),
		ECDH: func(peer []byte) ([]byte, error) {
			pub, err := curve.NewPublicKey(peer)
			if err != nil {
				return nil, err
			}
			return priv.ECDH(pub)
		},
	}
	offer := &ZDataOffer{ID: 7, Hash: hash, Group: group, Share: priv.PublicKey().Bytes(),
		MaxEarlyData: 4096, ALPN: alpn, Leaf: p.server.Leaf}
	return offer, key
}

type ztlsSetup struct {
	p     *testPKI
	offer *ZDataOffer
	key   *ZDataKey
	ccfg  *Config
	scfg  *Config
}

func newZTLSSetup(t *testing.T) *ztlsSetup {
	p := getPKI(t, "ecdsa-p256")
	offer, key := newZData(t, ecdh.X25519(), X25519, "localhost", "", p)
	scfg := serverConfig(p)
	scfg.ZData = &testZKeys{keys: []*ZDataKey{key}}
	// The key was made just now, by this test: no server took early data
	// under it before this register, which may say so (the zero time).
	scfg.StrikeRegister = NewMemoryStrikeRegister(1000, time.Time{})
	return &ztlsSetup{p: p, offer: offer, key: key, ccfg: clientConfig(p), scfg: scfg}
}

// run does a ZTLS handshake in memory: the client's first flight, the
// server's first flight with its 0.5-RTT answer, then the client's Finished.
func (z *ztlsSetup) run(t *testing.T, request []byte, tamper func([]byte) []byte) (c, s *engine, answer []byte, err error) {
	c, s = newEngine(z.ccfg, true), newEngine(z.scfg, false)
	if err := c.startClient(nil, z.offer, request); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	first := c.takeOutput()
	if tamper != nil {
		first = tamper(first)
	}
	if err := s.feed(first); err != nil {
		return c, s, nil, err
	}
	got := make([]byte, 4096)
	if n := s.readEarly(got); n > 0 {
		if _, err := s.writeApp(append([]byte("answer to "), got[:n]...)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.feed(s.takeOutput()); err != nil {
		return c, s, nil, err
	}
	// Everything the client can read now came in the server's first flight.
	answer = got[:c.readApp(got)]
	if err := s.feed(c.takeOutput()); err != nil {
		return c, s, answer, err
	}
	return c, s, answer, nil
}

func TestZTLSAcceptedFirstFlightAnswer(t *testing.T) {
	z := newZTLSSetup(t)
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.done || !s.done {
		t.Fatal("handshake not complete after one round trip")
	}
	if string(answer) != "answer to GET /" {
		t.Fatalf("first-flight answer %q", answer)
	}
	for _, st := range []ConnectionState{c.info, s.info} {
		if !st.ZTLSOffered || !st.ZTLS || !st.EarlyDataAccepted || !st.CertificateOmitted {
			t.Fatalf("state %+v", st)
		}
	}
	// The event order proves the round trip: the client saw its early data
	// accepted and the answer before it sent anything after the ClientHello.
	if !hasEventOrder(c.events, EventClientHelloSent, EventEarlyDataAccepted, EventPeerFinished, EventHandshakeDone) {
		t.Fatalf("client events %v", c.events)
	}
}

func hasEventOrder(evs []Event, want ...Event) bool {
	i := 0
	for _, e := range evs {
		if i < len(want) && e == want[i] {
			i++
		}
	}
	return i == len(want)
}

// An offer without its TLSA leaf cannot be checked against the client's
// certificate policy, so nothing is encrypted to its key: the handshake
// is plain TLS 1.3 and the request goes after it.
func TestZTLSNotOfferedWithoutLeaf(t *testing.T) {
	z := newZTLSSetup(t)
	z.offer.Leaf = nil
	c, _, answer, err := z.run(t, []byte("x"), nil)
	if err != nil || len(answer) != 0 {
		t.Fatalf("%v %q", err, answer)
	}
	if c.info.ZTLSOffered || c.info.EarlyDataOffered || !strings.Contains(c.info.ZTLSSkipped, "without its TLSA leaf") {
		t.Fatalf("offered=%v skipped %q", c.info.ZTLSOffered, c.info.ZTLSSkipped)
	}
	if c.info.CertificateOmitted || len(c.info.VerifiedChains) == 0 {
		t.Fatal("the server must send (and the client verify) its Certificate")
	}
}

func TestZTLSP256(t *testing.T) {
	z := newZTLSSetup(t)
	z.offer, z.key = newZData(t, ecdh.P256(), P256, "localhost", "", z.p)
	z.scfg.ZData = &testZKeys{keys: []*ZDataKey{z.key}}
	c, _, answer, err := z.run(t, []byte("p256"), nil)
	if err != nil || !c.info.ZTLS || string(answer) != "answer to p256" {
		t.Fatalf("%v ztls=%v %q", err, c.info.ZTLS, answer)
	}
}

// rejected checks a handshake that completes as plain TLS 1.3 with the
// early data refused and never delivered to the server's application.
func rejected(t *testing.T, c, s *engine, answer []byte, err error, reason string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if !c.done || !s.done {
		t.Fatal("fallback handshake did not complete")
	}
	if c.info.ZTLS || s.info.ZTLS || c.info.EarlyDataAccepted || s.earlyBuffered() > 0 || len(answer) > 0 {
		t.Fatal("early data accepted")
	}
	if !bytes.Contains([]byte(s.info.ZTLSRejectReason), []byte(reason)) {
		t.Fatalf("server's reason %q, want %q", s.info.ZTLSRejectReason, reason)
	}
}

func TestZTLSRejections(t *testing.T) {
	t.Run("server without Z-data keys", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.scfg.ZData = nil
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "no Z-data keys")
	})
	t.Run("Z-data of another key", func(t *testing.T) {
		z := newZTLSSetup(t)
		other, _ := newZData(t, ecdh.X25519(), X25519, "localhost", "", z.p)
		z.offer = other
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "no live Z-data")
	})
	t.Run("expired on the server", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.key.NotAfter = clock.Now().Add(-time.Hour)
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "no live Z-data")
	})
	t.Run("key ring hands out a key before its not-before", func(t *testing.T) {
		// The server checks tls13.ZDataLive itself: the anti-replay
		// guards measure from the not-before, so no key may be taken
		// earlier, whatever the ZDataKeys implementation returns.
		z := newZTLSSetup(t)
		z.key.NotBefore = clock.Now().Add(30 * time.Second)
		z.scfg.ZData = laxZKeys{z.key}
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "not live")
	})
	t.Run("SNI is not the signed host", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.key.Host = "other.test"
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "not the Z-data's host")
	})
	t.Run("ALPN differs", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.key.ALPN = "h2"
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "ALPN")
	})
	t.Run("client clock far off", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.ccfg.Time = func() time.Time { return clock.Now().Add(-time.Minute) }
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "clock")
	})
	t.Run("strike register down fails closed", func(t *testing.T) {
		z := newZTLSSetup(t)
		z.scfg.StrikeRegister = brokenRegister{}
		c, s, a, err := z.run(t, []byte("x"), nil)
		rejected(t, c, s, a, err, "strike register unavailable")
	})
}

// laxZKeys returns its key for any id, hash and time.
type laxZKeys struct{ key *ZDataKey }

func (k laxZKeys) LookupZData(uint32, [32]byte, time.Time) *ZDataKey { return k.key }

type brokenRegister struct{}

func (brokenRegister) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return false, errors.New("connection refused")
}

func TestZTLSWrongBinderRejectedBeforeServerHello(t *testing.T) {
	z := newZTLSSetup(t)
	c, s := newEngine(z.ccfg, true), newEngine(z.scfg, false)
	c.startClient(nil, z.offer, []byte("x"))
	first := c.takeOutput()
	// The ClientHello record comes first; its last byte is the binder's.
	chLen := 5 + (int(first[3])<<8 | int(first[4]))
	first[chLen-1] ^= 1
	s.startServer()
	if err := s.feed(first[:chLen]); err != nil {
		t.Fatal(err)
	}
	if s.info.ZTLS || s.info.ZTLSRejectReason != "binder does not verify" {
		t.Fatalf("reason %q", s.info.ZTLSRejectReason)
	}
	sh, err := wire.ParseServerHello(firstHandshakeMessage(t, s.takeOutput()))
	if err != nil || sh.HasZTLS {
		t.Fatalf("ServerHello echoes ztls after a bad binder (%v)", err)
	}
}

func firstHandshakeMessage(t *testing.T, records []byte) []byte {
	n := int(records[3])<<8 | int(records[4])
	return records[5 : 5+n]
}

func TestZTLSReplayRefused(t *testing.T) {
	z := newZTLSSetup(t)
	c := newEngine(z.ccfg, true)
	c.startClient(nil, z.offer, []byte("transfer 100"))
	flight := append([]byte(nil), c.takeOutput()...)
	// A fleet: two servers with the same Z-data key and one strike register.
	reg := NewMemoryStrikeRegister(1000, time.Time{})
	for i, want := range []bool{true, false, false} {
		scfg := z.scfg.Clone()
		scfg.StrikeRegister = reg
		s := newEngine(scfg, false)
		s.startServer()
		if err := s.feed(flight); err != nil {
			t.Fatal(err)
		}
		if s.info.ZTLS != want || (!want && s.earlyBuffered() > 0) {
			t.Fatalf("delivery %d: accepted=%v early bytes=%d", i, s.info.ZTLS, s.earlyBuffered())
		}
		if !want && s.info.ZTLSRejectReason != "replayed ClientHello" {
			t.Fatalf("reason %q", s.info.ZTLSRejectReason)
		}
	}
}

func TestZTLSInvalidShareAborts(t *testing.T) {
	z := newZTLSSetup(t)
	z.ccfg.testHookClientHello = func(ch *wire.ClientHello) {
		for i := range ch.KeyShares {
			if ch.KeyShares[i].Group == uint16(X25519) {
				ch.KeyShares[i].Data = make([]byte, 32) // low-order point: all-zero ECDH
			}
		}
	}
	_, s, _, err := z.run(t, []byte("x"), nil)
	wantAlert(t, err, AlertIllegalParameter)
	if !sentAlert(s.takeOutput(), AlertIllegalParameter) {
		t.Fatal("no illegal_parameter alert sent")
	}
}

func TestZTLSServerReusingZDataShareAborts(t *testing.T) {
	z := newZTLSSetup(t)
	z.scfg.testHookServerHello = func(sh *wire.ServerHello) {
		if sh.HasZTLS {
			sh.KeyShare.Data = z.offer.Share
		}
	}
	_, _, _, err := z.run(t, []byte("x"), nil)
	wantAlert(t, err, AlertIllegalParameter)
}

func TestZTLSStrippedByAttacker(t *testing.T) {
	z := newZTLSSetup(t)
	strip := func(first []byte) []byte {
		n := 5 + (int(first[3])<<8 | int(first[4]))
		ch, err := wire.ParseClientHello(first[5:n])
		if err != nil {
			t.Fatal(err)
		}
		ch.ZTLS, ch.Order = nil, nil
		raw, err := ch.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		out := append([]byte{22, 3, 1, byte(len(raw) >> 8), byte(len(raw))}, raw...)
		return append(out, first[n:]...)
	}
	c, s, answer, err := z.run(t, []byte("secret request"), strip)
	if s.earlyBuffered() > 0 || len(answer) > 0 || s.info.EarlyDataAccepted {
		t.Fatal("early data exposed after ztls was stripped")
	}
	if err == nil && c.done && s.done {
		t.Fatal("handshake completed although an attacker changed the ClientHello")
	}
}

// finishRetried carries a handshake that took a HelloRetryRequest (so
// run's flights did not finish it) to its end, a few flights at most.
func finishRetried(t *testing.T, c, s *engine) {
	t.Helper()
	for i := 0; i < 3 && !(c.done && s.done); i++ {
		if err := c.feed(s.takeOutput()); err != nil {
			t.Fatal(err)
		}
		if err := s.feed(c.takeOutput()); err != nil {
			t.Fatal(err)
		}
	}
}

func TestZTLSAfterHelloRetryRequest(t *testing.T) {
	z := newZTLSSetup(t)
	z.scfg.Groups = []CurveID{P384} // forces a retry: the client sends no P-384 share
	z.ccfg.Groups = []CurveID{X25519, P384}
	c, s, answer, err := z.run(t, []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	finishRetried(t, c, s)
	if !c.done || !s.done || c.info.ZTLS || len(answer) > 0 || s.earlyBuffered() > 0 {
		t.Fatalf("after HRR: done %v/%v ztls %v", c.done, s.done, c.info.ZTLS)
	}
}

// A Z-data record that announces client certificates (field 10 = Y): the
// server's first flight carries a CertificateRequest. A server that only
// asks (RequestClientCert) answers the early request; a server that
// requires or verifies certificates rejects the early data, since it
// arrives before any certificate (docs/ztls-spec.md, Section 1 field 10), and the client
// resends it after the handshake, authenticated.
func TestZTLSWithClientCertificate(t *testing.T) {
	z := newZTLSSetup(t)
	z.scfg.ClientAuth = RequestClientCert
	z.ccfg.Certificates = []Certificate{z.p.client}
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !c.done || !s.done || !c.info.ZTLS || !c.info.CertificateOmitted || string(answer) != "answer to GET /" {
		t.Fatalf("ztls=%v omitted=%v answer %q", c.info.ZTLS, c.info.CertificateOmitted, answer)
	}
	if len(s.info.PeerCertificates) == 0 {
		t.Fatal("server did not receive the client's certificate")
	}
	for _, auth := range []ClientAuthType{RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert} {
		z := newZTLSSetup(t)
		z.scfg.ClientAuth, z.scfg.ClientCAs = auth, z.p.pool()
		z.ccfg.Certificates = []Certificate{z.p.client}
		c, s, answer, err := z.run(t, []byte("GET /"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.info.ZTLS || c.info.EarlyDataAccepted || len(answer) > 0 || s.earlyBuffered() > 0 || s.info.EarlyDataAccepted {
			t.Fatalf("ClientAuth %d: early data acted on before the client's certificate: ztls=%v answer %q", auth, c.info.ZTLS, answer)
		}
		if !strings.Contains(s.info.ZTLSRejectReason, "client certificates") {
			t.Fatalf("ClientAuth %d: reject reason %q", auth, s.info.ZTLSRejectReason)
		}
		if !c.done || !s.done || len(s.info.PeerCertificates) == 0 {
			t.Fatalf("ClientAuth %d: handshake did not complete with the client's certificate", auth)
		}
	}
}

// TestZTLSPreparedShare: a share prepared ahead (PrepareZData) is the
// ClientHello's key share and carries the handshake; it serves one
// handshake only (the next makes a fresh share), and a share prepared for
// another Z-data share is ignored.
func TestZTLSPreparedShare(t *testing.T) {
	z := newZTLSSetup(t)
	prep := PrepareZData(z.offer.Group, z.offer.Share, nil)
	offer := *z.offer
	offer.Prepared = prep
	z.offer = &offer
	seen := map[string]bool{}
	for i := 0; i < 2; i++ {
		c := newEngine(z.ccfg, true)
		if err := c.startClient(nil, z.offer, []byte("GET /")); err != nil {
			t.Fatal(err)
		}
		ch, err := wire.ParseClientHello(firstHandshakeMessage(t, c.takeOutput()))
		if err != nil {
			t.Fatal(err)
		}
		var share []byte
		for _, ks := range ch.KeyShares {
			if ks.Group == uint16(X25519) {
				share = ks.Data
			}
		}
		if seen[string(share)] {
			t.Fatalf("handshake %d reused a key share", i)
		}
		seen[string(share)] = true
		if used := bytes.Equal(share, prep.share.Public()); used != (i == 0) {
			t.Fatalf("handshake %d: prepared share used %v", i, used)
		}
	}
	// A full handshake with a fresh prepared share is accepted as ZTLS.
	offer.Prepared = PrepareZData(z.offer.Group, z.offer.Share, nil)
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil || !c.info.ZTLS || !s.info.ZTLS || string(answer) != "answer to GET /" {
		t.Fatalf("with a prepared share: err %v, ZTLS %v/%v, answer %q", err, c.info.ZTLS, s.info.ZTLS, answer)
	}
	// Prepared for another Z-data share: not used, and ZTLS still works.
	other, _ := newZData(t, ecdh.X25519(), X25519, "localhost", "", z.p)
	mismatch := PrepareZData(X25519, other.Share, nil)
	offer.Prepared = mismatch
	c, s, _, err = z.run(t, []byte("GET /"), nil)
	if err != nil || !c.info.ZTLS || !s.info.ZTLS || mismatch.taken.Load() {
		t.Fatalf("mismatched prepared share: err %v, ZTLS %v/%v, taken %v", err, c.info.ZTLS, s.info.ZTLS, mismatch.taken.Load())
	}
}

// TestZDataKeyShareMadeAhead: a key share made before the Z-data landed
// becomes the prepared share (and the ClientHello's) of one Prepare only;
// a second Prepare, or one for another group, makes a new share.
func TestZDataKeyShareMadeAhead(t *testing.T) {
	z := newZTLSSetup(t)
	ks := NewZDataKeyShare(X25519, nil)
	prep := ks.Prepare(z.offer.Group, z.offer.Share, nil)
	if prep.err != nil || prep.share != ks.share {
		t.Fatalf("Prepare did not use the share made ahead (err %v)", prep.err)
	}
	if again := ks.Prepare(z.offer.Group, z.offer.Share, nil); again.err != nil || bytes.Equal(again.share.Public(), ks.share.Public()) {
		t.Fatalf("a second Prepare reused the key share (err %v)", again.err)
	}
	p256 := NewZDataKeyShare(P256, nil)
	if other := p256.Prepare(X25519, z.offer.Share, nil); other.err != nil || other.share == p256.share || p256.taken.Load() {
		t.Fatal("a share made for P-256 was used for x25519 Z-data")
	}
	if bad := NewZDataKeyShare(X25519MLKEM768, nil); bad.err == nil {
		t.Fatal("a key share for a group ztls v1 cannot use was made")
	}
	offer := *z.offer
	offer.Prepared = prep
	z.offer = &offer
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil || !c.info.ZTLS || !s.info.ZTLS || string(answer) != "answer to GET /" {
		t.Fatalf("with a share made ahead: err %v, ZTLS %v/%v, answer %q", err, c.info.ZTLS, s.info.ZTLS, answer)
	}
}

// TestZTLSConfiguredCodepoint: ZTLS works with the extension at another
// codepoint when both sides are configured alike; a server left at the
// default sees an unknown extension and rejects the early data (the
// handshake still completes); a codepoint that is another extension is
// refused.
func TestZTLSConfiguredCodepoint(t *testing.T) {
	z := newZTLSSetup(t)
	z.ccfg.ZTLSExtension, z.scfg.ZTLSExtension = 0xfe77, 0xfe77
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil || !c.info.ZTLS || !s.info.ZTLS || string(answer) != "answer to GET /" {
		t.Fatalf("both at 0xfe77: err %v, ZTLS %v/%v, answer %q", err, c.info.ZTLS, s.info.ZTLS, answer)
	}

	z = newZTLSSetup(t)
	z.ccfg.ZTLSExtension = 0xfe77
	c, s, answer, err = z.run(t, []byte("GET /"), nil)
	rejected(t, c, s, answer, err, "")

	z = newZTLSSetup(t)
	z.ccfg.ZTLSExtension = 0x0029 // pre_shared_key
	cl := newEngine(z.ccfg, true)
	if err := cl.startClient(nil, z.offer, []byte("GET /")); err == nil || !strings.Contains(err.Error(), "ZTLSExtension") {
		t.Fatalf("client with ZTLSExtension = pre_shared_key: %v", err)
	}
}
