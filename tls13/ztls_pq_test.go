package tls13

// Post-quantum ZTLS (docs/ztls-spec.md, Section 9): a v3 record's
// X25519MLKEM768 key, the client's ztls_kem, ZS = ss_M || ss_X, and the
// attacks on it (a mauled ciphertext, a stripped ztls_kem, a ztls_kem for
// a classical record), each refused.

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/mlkem"
	"crypto/sha256"
	"crypto/tls"
	"encoding/binary"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// newPQZData makes an X25519MLKEM768 Z-data key from the 96 private bytes
// priv (random when nil) and the client's offer for it.
func newPQZData(t testing.TB, host string, priv []byte, p *testPKI) (*ZDataOffer, *ZDataKey, *ZDataKEMKey) {
	t.Helper()
	var kk *ZDataKEMKey
	var err error
	if priv == nil {
		kk, err = GenerateZDataKEMKey(nil)
	} else {
		kk, err = NewZDataKEMKey(priv)
	}
	if err != nil {
		t.Fatal(err)
	}
	offer, key := newZData(t, ecdh.X25519(), X25519, host, "", p)
	key.ID, offer.ID = 9, 9
	key.Hash[0]++
	offer.Hash = key.Hash
	key.Group, offer.Group = X25519MLKEM768, X25519MLKEM768
	key.ECDH = kk.Shared
	offer.Share = kk.Public()
	return offer, key, kk
}

// newPQZTLSSetup is newZTLSSetup with a post-quantum record only.
func newPQZTLSSetup(t *testing.T) *ztlsSetup {
	z := newZTLSSetup(t)
	z.offer, z.key, _ = newPQZData(t, "localhost", nil, z.p)
	z.scfg.ZData = &testZKeys{keys: []*ZDataKey{z.key}}
	return z
}

// firstClientHello parses the ClientHello in the first record of a flight.
func firstClientHello(t *testing.T, flight []byte) *wire.ClientHello {
	t.Helper()
	n := int(flight[3])<<8 | int(flight[4])
	ch, err := wire.ParseClientHello(flight[5 : 5+n])
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestZTLSPQAccepted(t *testing.T) {
	z := newPQZTLSSetup(t)
	var flight []byte
	c, s, answer, err := z.run(t, []byte("GET /pq"), func(b []byte) []byte {
		flight = append([]byte(nil), b...)
		return b
	})
	if err != nil {
		t.Fatal(err)
	}
	if !c.info.ZTLS || !s.info.ZTLS || !c.info.ZTLSKEM || !s.info.ZTLSKEM || !c.info.EarlyDataAccepted {
		t.Fatalf("client %+v\nserver %+v", c.info, s.info)
	}
	if string(answer) != "answer to GET /pq" {
		t.Fatalf("answer %q", answer)
	}
	ch := firstClientHello(t, flight)
	if len(ch.ZTLSKEM) != mlkem.CiphertextSize768+32 {
		t.Fatalf("ztls_kem of %d bytes, want 1120", len(ch.ZTLSKEM))
	}
	for _, ks := range ch.KeyShares {
		if ks.Group == uint16(X25519) && bytes.Equal(ks.Data, ch.ZTLSKEM[1088:]) {
			t.Fatal("ztls_kem's x25519 share is also an ordinary key share")
		}
	}
}

// The encapsulation made ahead (PrepareZData) is the one sent.
func TestZTLSPQPrepared(t *testing.T) {
	z := newPQZTLSSetup(t)
	z.offer.Prepared = PrepareZData(X25519MLKEM768, z.offer.Share, nil)
	var flight []byte
	c, _, answer, err := z.run(t, []byte("x"), func(b []byte) []byte {
		flight = append([]byte(nil), b...)
		return b
	})
	if err != nil || !c.info.ZTLSKEM || string(answer) != "answer to x" {
		t.Fatalf("%v %+v %q", err, c.info, answer)
	}
	if ch := firstClientHello(t, flight); !bytes.Equal(ch.ZTLSKEM, z.offer.Prepared.kemShare) {
		t.Fatal("the handshake encapsulated again instead of taking the prepared ztls_kem")
	}
}

// expandLabel is HKDF-Expand-Label (RFC 8446, Section 7.1) written here
// from the RFC with crypto/hkdf, not the engine's key schedule.
func testExpandLabel(t *testing.T, secret []byte, label string, ctx []byte, n int) []byte {
	t.Helper()
	info := binary.BigEndian.AppendUint16(nil, uint16(n))
	info = append(info, byte(len("tls13 "+label)))
	info = append(info, "tls13 "+label...)
	info = append(info, byte(len(ctx)))
	info = append(info, ctx...)
	out, err := hkdf.Expand(sha256.New, secret, string(info), n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The combiner's known answer (docs/ztls-spec.md, Section 9.4), derived
// here from the definition with crypto/mlkem, crypto/ecdh and crypto/hkdf
// for a Z-data key and client randomness fixed by seeds: ZS is the
// ML-KEM-768 decapsulation of the ciphertext then the x25519 secret,
// ES = HKDF-Extract(0, ZS), and the ClientHello's binder is
// HMAC(finished_key(Derive-Secret(ES, "ztls binder", "")), Hash(truncated
// ClientHello)). The pinned values catch any change of the bytes.
func TestZTLSPQCombinerKnownAnswer(t *testing.T) {
	priv := make([]byte, ZDataKEMKeySize)
	seededRand(30).Read(priv)
	z := newZTLSSetup(t)
	z.offer, z.key, _ = newPQZData(t, "localhost", priv, z.p)
	z.scfg.ZData = &testZKeys{keys: []*ZDataKey{z.key}}
	z.ccfg.Rand = seededRand(31)
	z.ccfg.CipherSuites = []CipherSuite{TLS_AES_128_GCM_SHA256}
	var flight []byte
	_, s, _, err := z.run(t, []byte("kat"), func(b []byte) []byte {
		flight = append([]byte(nil), b...)
		return b
	})
	if err != nil || !s.info.ZTLSKEM {
		t.Fatalf("%v %+v", err, s.info)
	}
	ch := firstClientHello(t, flight)
	ct, peer := ch.ZTLSKEM[:1088], ch.ZTLSKEM[1088:]

	dk, err := mlkem.NewDecapsulationKey768(priv[:64])
	if err != nil {
		t.Fatal(err)
	}
	ssM, err := dk.Decapsulate(ct)
	if err != nil {
		t.Fatal(err)
	}
	xk, err := ecdh.X25519().NewPrivateKey(priv[64:])
	if err != nil {
		t.Fatal(err)
	}
	xp, err := ecdh.X25519().NewPublicKey(peer)
	if err != nil {
		t.Fatal(err)
	}
	ssX, err := xk.ECDH(xp)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(dk.EncapsulationKey().Bytes(), xk.PublicKey().Bytes()...); !bytes.Equal(z.offer.Share, want) {
		t.Fatal("the Z-data share is not ek || x25519 public (ML-KEM first)")
	}
	zs := append(append([]byte(nil), ssM...), ssX...)
	es, err := hkdf.Extract(sha256.New, zs, make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	empty := sha256.Sum256(nil)
	binderKey := testExpandLabel(t, es, "ztls binder", empty[:], 32)
	finished := testExpandLabel(t, binderKey, "finished", nil, 32)
	th := sha256.Sum256(ch.Raw[:len(ch.Raw)-ch.BindersLen()])
	mac := hmac.New(sha256.New, finished)
	mac.Write(th[:])
	if !hmac.Equal(mac.Sum(nil), ch.ZTLS.Binder) {
		t.Fatal("the binder is not the one of ES = HKDF-Extract(0, ss_M || ss_X)")
	}
	sum := func(b []byte) string { h := sha256.Sum256(b); return hex.EncodeToString(h[:8]) }
	if got := sum(ch.ZTLSKEM) + " " + hex.EncodeToString(es); got != pinnedPQKnownAnswer {
		t.Fatalf("kem_share hash and ES\n got %s\nwant %s", got, pinnedPQKnownAnswer)
	}
}

const pinnedPQKnownAnswer = "956ea2cda538b88f 90b1a7ee4008ed76458d9e1adbd191dbeef41bfbd0538a40873a27ee38361a04"

// A mauled ML-KEM ciphertext (the client's own hook flips a bit before
// the binder is computed, so the binder is right for the bytes sent):
// the server's decapsulation gives another key without an error (FIPS
// 203's implicit rejection), the binder fails, and the server does what
// it does for a wrong binder: no alert, early data rejected and skipped,
// nothing in the strike register, a TLS 1.3 handshake.
func TestZTLSPQMauledCiphertextIsAWrongBinder(t *testing.T) {
	for _, at := range []int{0, 500, 1087} {
		z := newPQZTLSSetup(t)
		strikes := &countingStrikes{StrikeRegister: z.scfg.StrikeRegister}
		z.scfg.StrikeRegister = strikes
		z.ccfg.testHookClientHello = func(ch *wire.ClientHello) {
			if ch.ZTLSKEM != nil {
				ch.ZTLSKEM = bytes.Clone(ch.ZTLSKEM)
				ch.ZTLSKEM[at] ^= 0x10
			}
		}
		c, s, a, err := z.run(t, []byte("POST /secret"), nil)
		rejected(t, c, s, a, err, "binder does not verify")
		if s.info.ZTLSRejectReason != "binder does not verify" {
			t.Fatalf("reason %q tells the mauled ciphertext from a wrong binder", s.info.ZTLSRejectReason)
		}
		if strikes.n != 0 {
			t.Fatalf("%d ClientHellos reached the strike register after a failed binder", strikes.n)
		}
	}
	// The control: a wrong binder (a bit of the ClientHello's last byte
	// flipped on the wire), the same reason.
	z := newPQZTLSSetup(t)
	c, s := newEngine(z.ccfg, true), newEngine(z.scfg, false)
	if err := c.startClient(nil, z.offer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	first := c.takeOutput()
	chLen := 5 + (int(first[3])<<8 | int(first[4]))
	first[chLen-1] ^= 1
	s.startServer()
	if err := s.feed(first[:chLen]); err != nil {
		t.Fatal(err)
	}
	if s.info.ZTLS || s.info.ZTLSRejectReason != "binder does not verify" {
		t.Fatalf("reason %q", s.info.ZTLSRejectReason)
	}
}

// Stripping ztls_kem (a downgrade to an x25519-only secret, or a bare
// attempt to skip the KEM) rejects early data: the record named decides.
func TestZTLSPQStrippedKEMRejected(t *testing.T) {
	z := newPQZTLSSetup(t)
	z.ccfg.testHookClientHello = func(ch *wire.ClientHello) { ch.ZTLSKEM = nil }
	c, s, a, err := z.run(t, []byte("x"), nil)
	rejected(t, c, s, a, err, "ztls_kem missing")
}

// A ztls_kem sent for a classical record is refused, not ignored.
func TestZTLSPQKEMForClassicalRecordRejected(t *testing.T) {
	z := newZTLSSetup(t)
	_, _, kk := newPQZData(t, "localhost", nil, z.p)
	z.ccfg.testHookClientHello = func(ch *wire.ClientHello) {
		ch.ZTLSKEM = append(make([]byte, 1088), kk.Public()[1184:]...)
	}
	c, s, a, err := z.run(t, []byte("x"), nil)
	rejected(t, c, s, a, err, "without an ML-KEM key")
}

// Protocol errors of the client's own making abort with illegal_parameter:
// ztls_kem without ztls, and a kem_share of the wrong length.
func TestZTLSPQMalformedKEMAborts(t *testing.T) {
	for name, hook := range map[string]func(*wire.ClientHello){
		"without ztls": func(ch *wire.ClientHello) { ch.ZTLS, ch.EarlyData = nil, false },
		"short":        func(ch *wire.ClientHello) { ch.ZTLSKEM = ch.ZTLSKEM[:1119] },
		"long":         func(ch *wire.ClientHello) { ch.ZTLSKEM = append(bytes.Clone(ch.ZTLSKEM), 0) },
	} {
		t.Run(name, func(t *testing.T) {
			z := newPQZTLSSetup(t)
			z.ccfg.testHookClientHello = hook
			_, s, _, err := z.run(t, []byte("x"), nil)
			if a := alertOf(err); a != int(AlertIllegalParameter) {
				t.Fatalf("err %v (alert %d), want illegal_parameter", err, a)
			}
			if s.earlyBuffered() > 0 {
				t.Fatal("early data buffered")
			}
		})
	}
}

// A client given a post-quantum share that fails FIPS 203's modulus check
// makes no ztls offer and completes TLS 1.3 (docs/ztls-spec.md, Section
// 9.1, key hygiene).
func TestZTLSPQInvalidShareSkipped(t *testing.T) {
	z := newPQZTLSSetup(t)
	z.offer.Share = bytes.Clone(z.offer.Share)
	for i := range 2 {
		z.offer.Share[i] = 0xff // a coefficient of 4095 >= q
	}
	c, s, a, err := z.run(t, []byte("x"), nil)
	if err != nil || !c.done || !s.done || c.info.ZTLSOffered || len(a) > 0 {
		t.Fatalf("%v offered=%v", err, c.info.ZTLSOffered)
	}
	if !strings.Contains(c.info.ZTLSSkipped, "invalid Z-data key share") {
		t.Fatalf("skipped because %q", c.info.ZTLSSkipped)
	}
}

// Coexistence (docs/ztls-spec.md, Section 9.9): a server holding a
// classical and a post-quantum key serves an older client's v1 offer
// (no ztls_kem) and a post-quantum client's offer, each under its key.
func TestZTLSPQServerWithBothKeys(t *testing.T) {
	z := newZTLSSetup(t)
	pqOffer, pqKey, _ := newPQZData(t, "localhost", nil, z.p)
	z.scfg.ZData = &testZKeys{keys: []*ZDataKey{z.key, pqKey}}
	z.scfg.StrikeRegister = alwaysFresh{}
	c, s, answer, err := z.run(t, []byte("v1"), nil)
	if err != nil || !c.info.ZTLS || c.info.ZTLSKEM || s.info.ZTLSKEM || string(answer) != "answer to v1" {
		t.Fatalf("v1 client: %v %+v %q", err, s.info, answer)
	}
	z.offer = pqOffer
	c, s, answer, err = z.run(t, []byte("v3"), nil)
	if err != nil || !c.info.ZTLSKEM || !s.info.ZTLSKEM || string(answer) != "answer to v3" {
		t.Fatalf("post-quantum client: %v %+v %q", err, s.info, answer)
	}
}

// countingStrikes counts the ClientHellos that reached the strike register.
type countingStrikes struct {
	StrikeRegister
	n int
}

func (c *countingStrikes) CheckAndInsert(key []byte, now, notBefore, expires time.Time) (bool, error) {
	c.n++
	return c.StrikeRegister.CheckAndInsert(key, now, notBefore, expires)
}

// Go's crypto/tls (X25519MLKEM768 by default) and OpenSSL complete TLS
// 1.3 against a server whose key ring holds post-quantum and classical
// Z-data keys: holding them changes nothing for a client without ztls.
func TestZTLSPQServerInterop(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	scfg := serverConfig(f.p)
	_, key, _ := newPQZData(t, "localhost", nil, f.p)
	_, classical := newZData(t, ecdh.X25519(), X25519, "localhost", "", f.p)
	scfg.ZData = &testZKeys{keys: []*ZDataKey{key, classical}}
	t.Run("go crypto/tls", func(t *testing.T) {
		addr, results := startZTLSServer(t, scfg)
		gc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: f.p.pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		roundTrip(t, gc, "pq-keys-go")
		if st := gc.ConnectionState(); st.Version != tls.VersionTLS13 || st.CurveID != tls.X25519MLKEM768 {
			t.Fatalf("version %x group %v", st.Version, st.CurveID)
		}
		if r := <-results; r.err != nil {
			t.Fatal(r.err)
		}
	})
	t.Run("openssl", func(t *testing.T) {
		addr, results := startZTLSServer(t, scfg)
		cli := opensslClient(t, f, addr)
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "pq-keys")
		cli.waitOutput("TLSv1.3")
	})
}

// A replayed post-quantum first flight (a v3 record without bfe=) is
// refused by the strike register, as a v1 flight is: the ML-KEM
// decapsulation gives the same key again, so only the register stops it.
func TestZTLSPQReplayRefused(t *testing.T) {
	z := newPQZTLSSetup(t)
	c := newEngine(z.ccfg, true)
	if err := c.startClient(nil, z.offer, []byte("transfer 100")); err != nil {
		t.Fatal(err)
	}
	flight := append([]byte(nil), c.takeOutput()...)
	for i, want := range []bool{true, false} {
		s := newEngine(z.scfg, false)
		s.startServer()
		if err := s.feed(flight); err != nil {
			t.Fatal(err)
		}
		if s.info.ZTLS != want || (!want && (s.earlyBuffered() > 0 || s.info.ZTLSRejectReason != "replayed ClientHello")) {
			t.Fatalf("delivery %d: accepted=%v early bytes=%d reason %q", i, s.info.ZTLS, s.earlyBuffered(), s.info.ZTLSRejectReason)
		}
	}
}

// After a HelloRetryRequest the second ClientHello carries neither ztls
// nor ztls_kem (docs/ztls-spec.md, Section 9.3), and the handshake
// completes without early data.
func TestZTLSPQAfterHelloRetryRequest(t *testing.T) {
	z := newPQZTLSSetup(t)
	z.scfg.Groups = []CurveID{P384} // forces a retry: the client sends no P-384 share
	z.ccfg.Groups = []CurveID{X25519MLKEM768, P384}
	c, s := newEngine(z.ccfg, true), newEngine(z.scfg, false)
	if err := c.startClient(nil, z.offer, []byte("x")); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	flight := c.takeOutput()
	if first := firstClientHello(t, flight); first.ZTLSKEM == nil {
		t.Fatal("the first ClientHello has no ztls_kem")
	}
	if err := s.feed(flight); err != nil {
		t.Fatal(err)
	}
	if err := c.feed(s.takeOutput()); err != nil {
		t.Fatal(err)
	}
	retry := c.takeOutput()
	// The second ClientHello is the first handshake record after any
	// change_cipher_spec.
	for len(retry) > 5 && retry[0] != 22 {
		retry = retry[5+(int(retry[3])<<8|int(retry[4])):]
	}
	if second := firstClientHello(t, retry); second.ZTLSKEM != nil || second.ZTLS != nil || second.EarlyData {
		t.Fatal("the second ClientHello kept ztls, ztls_kem or early_data")
	}
	if err := s.feed(retry); err != nil {
		t.Fatal(err)
	}
	finishRetried(t, c, s)
	if !c.done || !s.done || c.info.ZTLS || s.earlyBuffered() > 0 {
		t.Fatalf("after HRR: done %v/%v ztls %v", c.done, s.done, c.info.ZTLS)
	}
}
