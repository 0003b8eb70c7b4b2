package zdata

// Post-quantum Z-data with a Bloom filter encryption key
// (docs/ztls-spec.md, Sections 9.2 and 9.4): a Service with a BFE key
// publishes its v3 records with bfe=, the key files keep them, and a
// first flight under such a record is accepted once, its replay refused
// by the punctured key, also after a restart.

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// TestPQBFERecords: a post-quantum Service with BFE gives each v3 key,
// once the period's BFE key file exists, its v3 record with bfe= (same
// key share, Zdata_id and validity; its own zdata_hash and signature) and
// publishes only that one; before the file exists it publishes the v3
// record without bfe=. A classical Service issuing v3 keys beside its own
// (Options.PostQuantum) gives the v2 twin and the v3 record of a period
// the same BFE key.
func TestPQBFERecords(t *testing.T) {
	now := clock.Now()
	f := newFixture(t, "ecdsa-p256", Options{Group: GroupX25519MLKEM768, BFEConnections: bfeOpts.BFEConnections,
		BFEFalsePositiveRate: bfeOpts.BFEFalsePositiveRate}, nil)
	f.svc.BFEDir, f.svc.BFEServe = t.TempDir(), true
	t.Cleanup(f.svc.CloseBFE)
	if _, err := f.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.svc.Records(now) {
		if !r.V3 || len(r.BFE) != 0 {
			t.Fatalf("before the BFE key files exist: record v3 %v with %d bytes of bfe=, want v3 records without bfe=", r.V3, len(r.BFE))
		}
	}
	if _, err := f.svc.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	recs := f.svc.Records(now)
	if len(recs) != len(f.svc.Keyring.Published(now)) || len(recs) == 0 {
		t.Fatalf("%d records published for %d keys, want one each", len(recs), len(f.svc.Keyring.Published(now)))
	}
	for _, r := range recs {
		k := f.svc.Keyring.Get(r.ID)
		if !r.V3 || r.V2 || r.BFEPublicKey() == nil || k.BFE == nil || k.BFE.Record != r || k.BFE.State() == nil {
			t.Fatalf("record %d: v3 %v v2 %v bfe %v: want the v3 record with bfe=, its key state open", r.ID, r.V3, r.V2, r.BFEPublicKey() != nil)
		}
		txt := r.TXT()
		back, err := ParseTXT(txt)
		if err != nil || txt[0] != Version3 || !slicesHasPrefix(txt, "bfe=") {
			t.Fatalf("TXT %q: %v", txt[0], err)
		}
		if err := back.Verify(f.leaf.Cert, testHost, testPort); err != nil {
			t.Fatalf("the v3 record with bfe= does not verify: %v", err)
		}
		if back.ZDataHash() == k.Record.ZDataHash() || !bytes.Equal(back.KeyShare, k.Record.KeyShare) || back.ID != k.Record.ID {
			t.Fatal("the record with bfe= must share the key share and id of the key's record and differ in zdata_hash")
		}
		// Section 9.2: no v3 record verifies as a v2 one, with or without bfe=.
		relabelled := back.Clone()
		relabelled.V3, relabelled.V2 = false, true
		if err := relabelled.Verify(f.leaf.Cert, testHost, testPort); err == nil {
			t.Fatal("a v3 record with bfe= verified as a v2 record")
		}
		zk := f.svc.Keyring.LookupZData(r.ID, r.ZDataHash(), r.NotBefore)
		if zk == nil || zk.Decapsulate == nil || zk.Group != GroupX25519MLKEM768 {
			t.Fatalf("the keyring does not serve the v3 record with bfe= with its BFE key: %+v", zk)
		}
	}

	both := newFixtureWith(t, f.ca, f.leaf, Options{PostQuantum: true, BFEConnections: bfeOpts.BFEConnections,
		BFEFalsePositiveRate: bfeOpts.BFEFalsePositiveRate}, nil)
	both.svc.BFEDir, both.svc.BFEServe = t.TempDir(), true
	t.Cleanup(both.svc.CloseBFE)
	if _, err := both.svc.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := both.svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	bfeOf := map[bool]map[int64]string{true: {}, false: {}}
	for _, k := range both.svc.Keyring.All() {
		if k.BFE == nil {
			t.Fatalf("key %d (v3 %v) has no BFE twin", k.Record.ID, k.Record.V3)
		}
		bfeOf[k.Record.V3][k.Record.NotBefore.Unix()] = string(k.BFE.Record.BFE)
	}
	for nb, v3 := range bfeOf[true] {
		if v2, ok := bfeOf[false][nb]; !ok || v2 != v3 {
			t.Fatalf("period %d: the v3 record's bfe= differs from the v2 twin's", nb)
		}
	}
}

func slicesHasPrefix(strs []string, prefix string) bool {
	for _, s := range strs {
		if strings.HasPrefix(s, prefix) {
			return true
		}
	}
	return false
}

// TestPQBFEReplayRefusedAfterRestart: a Z-data directory of group
// X25519MLKEM768 with BFE (what `zdata new --group x25519mlkem768
// --bfe-connections N` makes) keeps its v3 records with bfe= in its key
// files. A client's first flight under one is accepted, post-quantum and
// with BFE; the server restarts (the directory loaded again, the key
// state reopened, a fresh strike register that refuses nothing); the
// recorded first flight replayed to it finds its BFE key punctured and
// its early data refused.
func TestPQBFEReplayRefusedAfterRestart(t *testing.T) {
	now := clock.Now()
	path := filepath.Join(t.TempDir(), "zd")
	if err := os.MkdirAll(path, 0o700); err != nil {
		t.Fatal(err)
	}
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{testHost}})
	certFile, keyFile := leaf.WritePEM(t, path)
	cfg := ServiceConfig{Host: testHost, Port: testPort, Cert: filepath.Base(certFile), Key: filepath.Base(keyFile),
		Group: GroupX25519MLKEM768, BFEConnections: bfeOpts.BFEConnections, BFEFalsePositiveRate: bfeOpts.BFEFalsePositiveRate}
	newBFEDir(t, path, cfg, now)
	first := servingDir(t, path)
	var rec *Record
	for _, r := range first.Records(now) {
		if r.ValidAt(now) {
			rec = r
		}
	}
	if rec == nil || !rec.V3 || rec.BFEPublicKey() == nil {
		t.Fatalf("the directory publishes no current v3 record with bfe= (%+v)", rec)
	}
	scfg := &tls13.Config{Certificates: []tls13.Certificate{first.Service.Cert}, ZData: first.Keyring,
		StrikeRegister: tls13.NewMemoryStrikeRegister(100, time.Time{})}
	ccfg := &tls13.Config{RootCAs: ca.Pool(), ServerName: testHost}
	flight, cst, sst, early := recordedHandshake(t, ccfg, scfg, rec.Offer(leaf.Cert), "GET /pq-bfe")
	if !cst.EarlyDataAccepted || !sst.ZTLSKEM || !sst.ZTLSBFE || early != "GET /pq-bfe" {
		t.Fatalf("first delivery: client %+v\nserver %+v, early %q: want post-quantum ZTLS with BFE", cst, sst, early)
	}
	first.Service.CloseBFE()

	restarted := servingDir(t, path)
	scfg2 := &tls13.Config{Certificates: []tls13.Certificate{restarted.Service.Cert}, ZData: restarted.Keyring,
		StrikeRegister: tls13.NewMemoryStrikeRegister(100, time.Time{})}
	st, got := replayFlight(t, scfg2, flight)
	if st.EarlyDataAccepted || got != "" || !strings.Contains(st.ZTLSRejectReason, "punctured") {
		t.Fatalf("replay after the restart: accepted %v, early %q, reason %q: want refused, the BFE key punctured", st.EarlyDataAccepted, got, st.ZTLSRejectReason)
	}
}

// servingDir loads the directory at path as a server does: the BFE key
// states open.
func servingDir(t *testing.T, path string) *Dir {
	t.Helper()
	d, err := LoadDir(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Service.BFEServe = true
	t.Cleanup(d.Service.CloseBFE)
	if _, err := d.Service.AttachBFE(); err != nil {
		t.Fatal(err)
	}
	return d
}

// recordingConn keeps what the client writes.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out []byte
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	c.out = append(c.out, b...)
	c.mu.Unlock()
	return c.Conn.Write(b)
}

// recordedHandshake runs a ZTLS handshake over loopback with offer and
// early data earlyData, and returns the client's bytes (its first
// flight first), both states and the early data the server read.
func recordedHandshake(t *testing.T, ccfg, scfg *tls13.Config, offer *tls13.ZDataOffer, earlyData string) (flight []byte, cst, sst tls13.ConnectionState, early string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // real time: a deadline for a stuck test
	defer cancel()
	done := make(chan error, 1)
	go func() {
		raw, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer raw.Close()
		s := tls13.Server(raw, scfg)
		if err = s.HandshakeEarly(ctx); err == nil {
			buf := make([]byte, 64)
			n, _ := s.ReadEarlyData(buf)
			early = string(buf[:n])
			err = s.HandshakeContext(ctx)
			sst = s.ConnectionState()
		}
		done <- err
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	rc := &recordingConn{Conn: raw}
	defer rc.Close()
	c := tls13.Client(rc, ccfg)
	c.SetZData(offer)
	c.SetEarlyData([]byte(earlyData), false)
	if err := c.HandshakeContext(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]byte(nil), rc.out...), c.ConnectionState(), sst, early
}

// replayFlight sends flight, a client's recorded bytes, to a server of
// cfg and returns its state once it has decided on the early data, and
// the early data it read.
func replayFlight(t *testing.T, cfg *tls13.Config, flight []byte) (tls13.ConnectionState, string) {
	t.Helper()
	cEnd, sEnd := net.Pipe()
	defer cEnd.Close()
	go func() {
		cEnd.Write(flight)
		io.Copy(io.Discard, cEnd)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // real time: a deadline for a stuck test
	defer cancel()
	s := tls13.Server(sEnd, cfg)
	defer s.Close()
	if err := s.HandshakeEarly(ctx); err != nil {
		return s.ConnectionState(), ""
	}
	buf := make([]byte, 64)
	n, _ := s.ReadEarlyData(buf)
	return s.ConnectionState(), string(buf[:n])
}
