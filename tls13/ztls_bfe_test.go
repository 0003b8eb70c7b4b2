package tls13

// ZTLS with a Bloom filter encryption key (docs/ztls-spec.md, Section 7):
// the early secret needs both ZS and the BFE key, a replayed first flight
// finds its key punctured, and a ztls_bfe that does not fit the record
// named is refused.

import (
	"context"
	"crypto/ecdh"
	"crypto/tls"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13/internal/keyschedule"
	"github.com/ztls-project/ztls/tls13/internal/suite"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// newBFEKey generates a small BFE key (n = 64 decapsulations) for tests.
func newBFEKey(t testing.TB) (*bfe.PublicKey, string) {
	t.Helper()
	params, err := bfe.NewParams(64, 1.0/64)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "epoch.bfe")
	pk, err := bfe.GenerateKey(context.Background(), path, bfe.KeyGenConfig{Epoch: 7, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	return pk, path
}

// newBFEZTLSSetup is newZTLSSetup with a BFE key on the record, a
// strike register that never refuses, and the server's key state.
func newBFEZTLSSetup(t *testing.T) (*ztlsSetup, *bfe.KeyState, string) {
	z := newZTLSSetup(t)
	pk, path := newBFEKey(t)
	ks, err := bfe.OpenKeyState(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ks.Close() })
	z.offer.BFE = pk
	z.key.Decapsulate = func(ct []byte) ([]byte, error) { return ks.Decapsulate(context.Background(), ct) }
	z.scfg.StrikeRegister = alwaysFresh{} // off: only the BFE key can refuse a replay
	return z, ks, path
}

func TestZTLSBFEAccepted(t *testing.T) {
	z, ks, _ := newBFEZTLSSetup(t)
	prepared := PrepareZData(z.offer.Group, z.offer.Share, nil)
	if err := prepared.EncapsulateBFE(z.offer.BFE, nil); err != nil {
		t.Fatal(err)
	}
	z.offer.Prepared = prepared
	c, s, answer, err := z.run(t, []byte("GET /"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(answer) != "answer to GET /" {
		t.Fatalf("answer %q (server: %q)", answer, s.info.ZTLSRejectReason)
	}
	for _, st := range []ConnectionState{c.info, s.info} {
		if !st.ZTLS || !st.ZTLSBFE || !st.EarlyDataAccepted {
			t.Fatalf("state %+v", st)
		}
	}
	if ks.Punctured() == 0 {
		t.Fatal("the server's key was not punctured")
	}
}

// The attack: record a client's first flight and send it again, to the
// same server, whose strike register is off. The BFE key was punctured
// on the first delivery, so the replay's early data is refused and the
// application sees the request once.
func TestZTLSBFEReplayRefusedWithoutRegister(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	var flight []byte
	c, s, answer, err := z.run(t, []byte("POST /pay"), func(b []byte) []byte {
		flight = append([]byte(nil), b...)
		return b
	})
	if err != nil || !s.info.ZTLSBFE || string(answer) != "answer to POST /pay" {
		t.Fatalf("first delivery: %v %+v %q", err, s.info, answer)
	}
	_ = c
	s2 := newEngine(z.scfg, false)
	s2.startServer()
	if err := s2.feed(flight); err != nil {
		t.Fatal(err)
	}
	if s2.earlyBuffered() > 0 || s2.info.EarlyDataAccepted {
		t.Fatal("replayed early data accepted")
	}
	if !strings.Contains(s2.info.ZTLSRejectReason, "punctured") {
		t.Fatalf("reason %q", s2.info.ZTLSRejectReason)
	}
}

// The attack: strip ztls_bfe from a BFE client's ClientHello (a downgrade
// to the ECDH-only secret). The record named has a BFE key, so the server
// refuses the early data; the client's secret had the BFE key in it anyway.
func TestZTLSBFEStrippedCiphertextRejected(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	z.ccfg.testHookClientHello = func(ch *wire.ClientHello) { ch.ZTLSBFE = nil }
	c, s, a, err := z.run(t, []byte("x"), nil)
	rejected(t, c, s, a, err, "missing for one with")
}

// A ciphertext for a record without a BFE key is refused, not ignored:
// the client's early secret has a key the server cannot know.
func TestZTLSBFECiphertextForV1RecordRejected(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	z.key.Decapsulate = nil
	c, s, a, err := z.run(t, []byte("x"), nil)
	rejected(t, c, s, a, err, "without a BFE key")
}

// A BFE-less client (no BFE on its offer: it used the v1 record) to a
// server whose other record has a BFE key: plain ZTLS, as today.
func TestZTLSBFELessClientGetsZTLS(t *testing.T) {
	z := newZTLSSetup(t)
	_, key2 := newZData(t, ecdh.X25519(), X25519, "localhost", "", z.p)
	pk, path := newBFEKey(t)
	ks, err := bfe.OpenKeyState(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ks.Close()
	_ = pk
	key2.ID = 8
	key2.Decapsulate = func(ct []byte) ([]byte, error) { return ks.Decapsulate(context.Background(), ct) }
	z.scfg.ZData = &testZKeys{keys: []*ZDataKey{z.key, key2}}
	c, s, answer, err := z.run(t, []byte("v1"), nil)
	if err != nil || !c.info.ZTLS || c.info.ZTLSBFE || s.info.ZTLSBFE || string(answer) != "answer to v1" {
		t.Fatalf("%v %+v %q", err, s.info, answer)
	}
}

// A failing decapsulation (here: the fleet's puncture log is down) rejects
// early data and the handshake goes on as TLS 1.3: fail closed.
func TestZTLSBFEDecapsulationErrorFailsClosed(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	z.key.Decapsulate = func([]byte) ([]byte, error) { return nil, errors.New("puncture log unreachable") }
	c, s, a, err := z.run(t, []byte("x"), nil)
	rejected(t, c, s, a, err, "puncture log unreachable")
}

// ztls_bfe without ztls is a protocol error.
func TestZTLSBFEWithoutZTLSAborts(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	z.ccfg.testHookClientHello = func(ch *wire.ClientHello) { ch.ZTLS, ch.EarlyData = nil, false }
	_, _, _, err := z.run(t, nil, nil)
	if a := alertOf(err); a != int(AlertIllegalParameter) {
		t.Fatalf("err %v (alert %d), want illegal_parameter", err, a)
	}
}

// copyFile copies a key file (the thief's snapshot of the server's disk).
func copyFile(t *testing.T, from string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), filepath.Base(from))
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if p, err := os.ReadFile(bfe.PointTablePath(from)); err == nil {
		if err := os.WriteFile(bfe.PointTablePath(to), p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// binderOpens reports whether an early secret made from ikm verifies the
// recorded ClientHello's ztls binder: exactly when ikm gives the early
// secret (and so client_early_traffic_secret) of that flight.
func binderOpens(ch *wire.ClientHello, ikm []byte) bool {
	early := suite.Lookup(ch.ZTLS.EarlySuite)
	es := keyschedule.NewEarlySecret(early.Hash, ikm)
	truncated := ch.Raw[:len(ch.Raw)-ch.BindersLen()]
	return keyschedule.VerifyFinished(early.Hash, es.BinderKey("ztls binder"), hashOf(early.Hash, truncated), ch.ZTLS.Binder)
}

// Forward secrecy of the first flight. Record a client's first flight;
// the server accepts it. Then take the server's whole persisted key state:
// its Z-data private key and its BFE key file. With them the thief gets
// ZS, but the recorded ciphertext no longer decapsulates (its slots are
// erased), and ZS alone does not give the early secret. A snapshot of the
// key file taken before the handshake shows what the erasure took away.
func TestZTLSBFEForwardSecrecy(t *testing.T) {
	z, ks, path := newBFEZTLSSetup(t)
	before := copyFile(t, path)
	var flight []byte
	_, s, answer, err := z.run(t, []byte("secret request"), func(b []byte) []byte {
		flight = append([]byte(nil), b...)
		return b
	})
	if err != nil || !s.info.ZTLSBFE || string(answer) != "answer to secret request" {
		t.Fatalf("%v %+v %q", err, s.info, answer)
	}
	// The first record of the flight holds the ClientHello.
	n := int(flight[3])<<8 | int(flight[4])
	ch, err := wire.ParseClientHello(flight[5 : 5+n])
	if err != nil {
		t.Fatal(err)
	}
	var share []byte
	for _, k := range ch.KeyShares {
		if k.Group == uint16(z.key.Group) {
			share = k.Data
		}
	}
	zs, err := z.key.ECDH(share) // the stolen Z-data private key
	if err != nil {
		t.Fatal(err)
	}

	stolen := copyFile(t, path) // the key file as the server left it
	if err := ks.Close(); err != nil {
		t.Fatal(err)
	}
	thief, err := bfe.OpenKeyState(stolen, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer thief.Close()
	if _, err := thief.Decapsulate(context.Background(), ch.ZTLSBFE); !errors.Is(err, bfe.ErrPunctured) {
		t.Fatalf("stolen key state decapsulated the recorded ciphertext: %v", err)
	}
	if binderOpens(ch, zs) {
		t.Fatal("ZS alone gives the early secret")
	}
	var zero [32]byte
	if binderOpens(ch, append(append([]byte(nil), zs...), zero[:]...)) {
		t.Fatal("ZS with a zero BFE key gives the early secret")
	}

	// The control: the key file before the handshake still held the slots.
	old, err := bfe.OpenKeyState(before, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	k, err := old.Decapsulate(context.Background(), ch.ZTLSBFE)
	if err != nil {
		t.Fatal(err)
	}
	if !binderOpens(ch, append(append([]byte(nil), zs...), k...)) {
		t.Fatal("control: ZS || K_bfe does not give the early secret")
	}
}

// A Go crypto/tls client (no ztls, no ztls_bfe) completes plain TLS 1.3
// with a server whose Z-data has a BFE key.
func TestZTLSBFEServerWithGoClient(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	addr := serve(t, NewListener(loopback(t), z.scfg), echo)
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: z.p.pool(), ServerName: "localhost", MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "hello from crypto/tls")
}

// The attack: flip a byte of the ztls_bfe ciphertext on the wire (the
// client's key was for the intact one). Decapsulation's FO check (or the
// binder) refuses it: early data rejected, plain TLS 1.3 completes.
func TestZTLSBFEMauledCiphertextRejected(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	z.ccfg.testHookClientHello = func(ch *wire.ClientHello) {
		ch.ZTLSBFE = append([]byte(nil), ch.ZTLSBFE...)
		ch.ZTLSBFE[len(ch.ZTLSBFE)-1] ^= 1
	}
	c, s, a, err := z.run(t, []byte("x"), nil)
	rejected(t, c, s, a, err, "BFE: ")
}

// After a HelloRetryRequest the second ClientHello carries neither ztls
// nor ztls_bfe (docs/ztls-spec.md, Section 7.2): a ztls_bfe left in it
// would be ztls_bfe without ztls, which the server aborts on, so the
// handshake completing shows both went.
func TestZTLSBFEAfterHelloRetryRequest(t *testing.T) {
	z, _, _ := newBFEZTLSSetup(t)
	z.scfg.Groups = []CurveID{P384} // forces a retry: the client sends no P-384 share
	z.ccfg.Groups = []CurveID{X25519, P384}
	c, s, answer, err := z.run(t, []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	finishRetried(t, c, s)
	if !c.done || !s.done || c.info.ZTLS || c.info.ZTLSBFE || len(answer) > 0 || s.earlyBuffered() > 0 {
		t.Fatalf("after HRR: done %v/%v ztls %v", c.done, s.done, c.info.ZTLS)
	}
}
