package tls13

// ZTLS with a Bloom filter encryption key (docs/ztls-spec.md, Section 7):
// the early secret needs both ZS and the BFE key, a replayed first flight
// finds its key punctured, and a ztls_bfe that does not fit the record
// named is refused.

import (
	"context"
	"crypto/ecdh"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

// noStrikeRegister is a strike register turned off: it calls every
// ClientHello fresh, so only the BFE key can refuse a replay.
type noStrikeRegister struct{}

func (noStrikeRegister) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return true, nil
}

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
	z.scfg.StrikeRegister = noStrikeRegister{}
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
