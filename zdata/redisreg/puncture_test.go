package redisreg

import (
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/bfe"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// noStrike is a strike register turned off: every ClientHello is fresh
// to it, so only the BFE keys and their shared punctures refuse replays.
type noStrike struct{}

func (noStrike) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return true, nil
}

// The attack: two fleet members race on one ciphertext's positions (a
// replay sent to both at once). The script is atomic: exactly one sees
// every position unset. (TestModes: on each mode.)
func testPunctureLogRace(t *testing.T, e *redisEnv) {
	epoch := uint64(ztlsclock.Now().Add(-time.Minute).Unix())
	past := func(o *Options) { o.Now = func() time.Time { return ztlsclock.Now().Add(-2 * time.Hour) } }
	logs := []*PunctureLog{e.newReg(t, nil, past).PunctureLog("server.test", 443, time.Hour), e.newReg(t, nil, past).PunctureLog("server.test", 443, time.Hour)}
	pos := []uint32{3, 99, 1000, 70000}
	// A new Redis: the first call records when its memory begins.
	if _, err := logs[0].TestAndSet(context.Background(), epoch, []uint32{1}); err != nil {
		t.Fatal(err)
	}
	const n = 16
	var wg sync.WaitGroup
	fresh := make(chan bool, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(l *PunctureLog) {
			defer wg.Done()
			was, err := l.TestAndSet(context.Background(), epoch, pos)
			if err != nil {
				t.Error(err)
				return
			}
			all := true
			for _, w := range was {
				all = all && !w
			}
			fresh <- all
		}(logs[i%2])
	}
	wg.Wait()
	close(fresh)
	winners := 0
	for f := range fresh {
		if f {
			winners++
		}
	}
	if winners != 1 {
		t.Fatalf("%d callers saw the positions unset, want exactly 1", winners)
	}
	// Another service's or epoch's bitmap is separate.
	was, err := logs[0].TestAndSet(context.Background(), epoch+3600, pos)
	if err != nil || was[0] {
		t.Fatalf("next epoch: %v %v", was, err)
	}
}

// Redis down, or its memory younger than the epoch: an error (bfe refuses
// the ciphertext), never "unset".
func TestPunctureLogFailsClosed(t *testing.T) {
	s := startRedis(t, 0)
	reg, err := New(Options{Addr: s.addr, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	l := reg.PunctureLog("server.test", 443, time.Hour)
	// The register's clock is now: a new Redis's memory begins after an
	// epoch that began a minute ago.
	if _, err := l.TestAndSet(context.Background(), uint64(ztlsclock.Now().Add(-time.Minute).Unix()), []uint32{1}); !errors.Is(err, tls13.ErrRegisterTooYoung) {
		t.Fatalf("memory younger than the epoch: %v", err)
	}
	s.stop()
	if _, err := l.TestAndSet(context.Background(), uint64(ztlsclock.Now().Add(time.Hour).Unix()), []uint32{1}); err == nil {
		t.Fatal("Redis down: no error")
	}
}

// testFleetBFEReplay: two fleet members derive the same BFE key from the
// seed and share punctures in Redis (TestModes: on each mode); their
// strike registers are off. A captured first flight replayed to the
// member that took it and to the other one never reaches the application;
// with Redis down (plaintext and TLS: see downForFleet) early data is
// refused (fail closed) and the request answered after the handshake.
func testFleetBFEReplay(t *testing.T, e *redisEnv) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"server.test"}})
	cert := tls13.Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}
	seed := bytes.Repeat([]byte{0x42}, 32)
	now := ztlsclock.Now()

	var addrs []string
	var results []<-chan serverResult
	var svcs []*zdata.Service
	for i := 0; i < 2; i++ {
		svc, err := zdata.NewService("server.test", 443, cert, zdata.Options{BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 64}, seed)
		if err != nil {
			t.Fatal(err)
		}
		svc.BFEDir, svc.BFEServe = t.TempDir(), true
		reg := e.newReg(t, nil, func(o *Options) { o.Now = func() time.Time { return ztlsclock.Now().Add(-2 * time.Hour) } })
		svc.BFELog = reg.PunctureLog("server.test", 443, zdata.EpochLength)
		t.Cleanup(svc.CloseBFE)
		if _, err := svc.GenerateBFE(context.Background(), now); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Rotate(now); err != nil {
			t.Fatal(err)
		}
		addr, res := fleetServer(t, &tls13.Config{Certificates: []tls13.Certificate{cert}, ZData: svc.Keyring, StrikeRegister: noStrike{}})
		addrs, results, svcs = append(addrs, addr), append(results, res), append(svcs, svc)
	}

	rec, rleaf := clientSelects(t, svcs[0], leaf, ca, now)
	if len(rec.BFE) == 0 {
		t.Fatal("the client did not pick the v2 record")
	}

	dial := func(addr string, resend bool) (*recordingConn, string, tls13.ConnectionState) {
		t.Helper()
		offer := rec.Offer(rleaf)
		offer.Prepared = rec.Prepare(nil) // encapsulated before the dial
		return dialEarly(t, addr, ca, offer, resend)
	}

	rc, answer, st := dial(addrs[0], false)
	if !st.ZTLS || !st.ZTLSBFE || !st.EarlyDataAccepted || answer != "early answer: GET /" {
		t.Fatalf("first contact: ztls=%v bfe=%v early=%v answer=%q", st.ZTLS, st.ZTLSBFE, st.EarlyDataAccepted, answer)
	}
	if r := <-results[0]; r.err != nil || string(r.early) != "GET /" {
		t.Fatalf("server 0 saw %q, %v", r.early, r.err)
	}

	flight := rc.sent()
	for i, addr := range addrs {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(flight)
		nc.Close()
		r := <-results[i]
		if len(r.early) != 0 || r.state.EarlyDataAccepted {
			t.Fatalf("replay to server %d reached the application: %q", i, r.early)
		}
		if !strings.Contains(r.state.ZTLSRejectReason, "punctured") {
			t.Fatalf("replay to server %d: reject reason %q", i, r.state.ZTLSRejectReason)
		}
	}
	// Member 1 learnt the punctures from Redis and erased those slots of
	// its own copy of the key.
	// (The key the client used: near the hour the next one is live too.)
	var k1 *zdata.Key
	for _, k := range svcs[1].Keyring.Live(now) {
		if k.Record.ID == rec.ID {
			k1 = k
		}
	}
	if k1 == nil || k1.BFE.State().Punctured() == 0 {
		t.Fatal("member 1 did not erase the slots punctured by member 0")
	}

	// A new client to member 1: accepted (the fleet agrees on the key).
	if _, answer, st := dial(addrs[1], false); !st.ZTLSBFE || answer != "early answer: GET /" {
		t.Fatalf("fleet member 1: bfe=%v answer=%q", st.ZTLSBFE, answer)
	}
	<-results[1]

	// Redis down: early data refused, the request still answered.
	stop := e.downForFleet()
	if stop == nil {
		return
	}
	stop()
	_, answer, st = dial(addrs[0], true)
	if st.EarlyDataAccepted || answer != "late answer: GET /" {
		t.Fatalf("Redis down: early=%v answer=%q", st.EarlyDataAccepted, answer)
	}
	if r := <-results[0]; !strings.HasPrefix(r.state.ZTLSRejectReason, "BFE: ") {
		t.Fatalf("Redis down: reject reason %q", r.state.ZTLSRejectReason)
	}
}

var _ bfe.PunctureLog = (*PunctureLog)(nil)
