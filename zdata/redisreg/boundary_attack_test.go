package redisreg

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// The boundary attacks of issue 25: in the last minute of a period, a
// flight under the next period's key is captured; the memory that would
// refuse its replay is lost (a restart of a server on the default
// register, a FLUSHALL of the fleet's Redis, the same under a BFE key);
// the flight is replayed within its freshness window. Every anti-replay
// guard measures from the key's not-before, so a key that a server took
// before its not-before (it did, 60 s early) let the replay through. No
// server takes a key before its not-before now (tls13.ZDataLive), and a
// client at that instant uses the current period's record, so the flight
// is accepted at most once and honest clients keep their early data.

// boundaryWorld is a fleet of servers (same seed, same certificate) at a
// settable instant near the rollover to the period that starts at nb.
type boundaryWorld struct {
	t       *testing.T
	clk     *ztlsclock.Manual
	nb      time.Time
	ca      *testpki.CA
	leaf    *testpki.Leaf
	cert    tls13.Certificate
	seed    []byte
	bfe     bool
	members []*boundaryMember
}

type boundaryMember struct {
	svc     *zdata.Service
	addr    string
	results <-chan serverResult
}

func newBoundaryWorld(t *testing.T, bfeKeys bool) *boundaryWorld {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"server.test"}})
	// The next rollover after now (certificates are valid around now).
	nb := ztlsclock.Now().Truncate(time.Hour).Add(time.Hour)
	return &boundaryWorld{t: t, clk: ztlsclock.NewManual(nb.Add(-2 * time.Hour)), nb: nb, ca: ca, leaf: leaf,
		cert: tls13.Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert},
		seed: bytes.Repeat([]byte{0x42}, 32), bfe: bfeKeys}
}

// member starts one server holding the fleet's keys at the world's
// instant, with register as its strike register and, for BFE, log as its
// puncture log.
func (w *boundaryWorld) member(register tls13.StrikeRegister, log *PunctureLog) *boundaryMember {
	t := w.t
	opts := zdata.Options{}
	if w.bfe {
		opts = zdata.Options{BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 64}
	}
	svc, err := zdata.NewService("server.test", 443, w.cert, opts, w.seed)
	if err != nil {
		t.Fatal(err)
	}
	if w.bfe {
		svc.BFEDir, svc.BFEServe, svc.BFELog = t.TempDir(), true, log
		t.Cleanup(svc.CloseBFE)
	}
	w.rotate(svc)
	addr, res := fleetServer(t, &tls13.Config{Certificates: []tls13.Certificate{w.cert}, ZData: svc.Keyring,
		StrikeRegister: register, Time: w.clk.Now})
	m := &boundaryMember{svc: svc, addr: addr, results: res}
	w.members = append(w.members, m)
	return m
}

// rotate does what a serving process's keeper does at the world's
// instant: BFE keys an epoch ahead, then the key ring's rotation.
func (w *boundaryWorld) rotate(svc *zdata.Service) {
	if w.bfe {
		if _, err := svc.GenerateBFE(context.Background(), w.clk.Now()); err != nil {
			w.t.Fatal(err)
		}
	}
	if _, err := svc.Rotate(w.clk.Now()); err != nil {
		w.t.Fatal(err)
	}
}

// setTime moves the world to nb+at and rotates every member's keys.
func (w *boundaryWorld) setTime(at time.Duration) {
	w.clk.Set(w.nb.Add(at))
	for _, m := range w.members {
		w.rotate(m.svc)
	}
}

// nextOffer is a first flight's offer under the next period's record (the
// v2 twin with BFE), as a client took it in the last minute before.
func (w *boundaryWorld) nextOffer(m *boundaryMember) *tls13.ZDataOffer {
	keys := m.svc.Keyring.All()
	next := keys[len(keys)-1]
	if !next.Record.NotBefore.Equal(w.nb) {
		w.t.Fatalf("the key ring holds no key for the period at %v", w.nb)
	}
	return w.offer(next.Record, next.BFE)
}

func (w *boundaryWorld) offer(rec *zdata.Record, bk *zdata.BFEKey) *tls13.ZDataOffer {
	if w.bfe {
		rec = bk.Record
	}
	offer := rec.Offer(w.leaf.Cert)
	if w.bfe {
		offer.Prepared = rec.Prepare(nil)
	}
	return offer
}

// honestOffer is what a client selects from the member's DNS at the
// world's instant.
func (w *boundaryWorld) honestOffer(m *boundaryMember) *tls13.ZDataOffer {
	rec, leaf := clientSelects(w.t, m.svc, w.leaf, w.ca, w.clk.Now())
	if w.bfe && len(rec.BFE) == 0 {
		w.t.Fatal("the client did not pick a v2 record")
	}
	offer := rec.Offer(leaf)
	if w.bfe {
		offer.Prepared = rec.Prepare(nil)
	}
	return offer
}

// dial sends "GET /" early under offer from a client whose clock is the
// world's, and returns what it sent and whether early data was accepted.
func (w *boundaryWorld) dial(m *boundaryMember, offer *tls13.ZDataOffer) ([]byte, serverResult) {
	t := w.t
	nc, err := net.DialTimeout("tcp", m.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc := &recordingConn{Conn: nc}
	c := tls13.Client(rc, &tls13.Config{ServerName: "server.test", RootCAs: w.ca.Pool(), Time: w.clk.Now})
	defer c.Close()
	c.SetZData(offer)
	c.SetEarlyData([]byte("GET /"), true)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	return rc.sent(), <-m.results
}

// replay delivers a captured flight to m, as an attacker who holds no key.
func (w *boundaryWorld) replay(m *boundaryMember, flight []byte) serverResult {
	nc, err := net.DialTimeout("tcp", m.addr, 5*time.Second)
	if err != nil {
		w.t.Fatal(err)
	}
	nc.Write(flight)
	nc.Close()
	return <-m.results
}

// boundaryInstants are the instants of the last minute at which the
// flight is captured, as offsets from the rollover.
var boundaryInstants = []time.Duration{-59 * time.Second, -30 * time.Second, -time.Second, -time.Millisecond}

// runBoundaryAttack: the captured flight is sent at nb+at to the first
// member, lose() runs 1 ms later, and the flight is replayed 2 ms later to
// every member lose() returns. The flight's early data must reach the
// servers' applications at most once, and every refusal says why.
func runBoundaryAttack(t *testing.T, w *boundaryWorld, at time.Duration, lose func() []*boundaryMember) {
	w.setTime(at)
	first := w.members[0]
	flight, r := w.dial(first, w.nextOffer(first))
	accepted := 0
	t.Logf("flight at %v: early data accepted %v %s", at, r.state.EarlyDataAccepted, r.state.ZTLSRejectReason)
	if r.state.EarlyDataAccepted {
		accepted++
	} else if r.state.ZTLSRejectReason == "" {
		t.Fatal("early data refused without a reason")
	}
	w.clk.Add(time.Millisecond)
	targets := lose()
	w.clk.Add(time.Millisecond)
	for i, m := range targets {
		r := w.replay(m, flight)
		t.Logf("replay %d: early data accepted %v %s", i, r.state.EarlyDataAccepted, r.state.ZTLSRejectReason)
		if r.state.EarlyDataAccepted || len(r.early) > 0 {
			accepted++
		} else if r.state.ZTLSRejectReason == "" {
			t.Fatalf("replay %d refused without a reason", i)
		}
	}
	if accepted > 1 {
		t.Fatalf("a flight captured at %v from the rollover was accepted %d times", at, accepted)
	}
}

// honestAt: a client that selects from DNS at nb+at gets its early data
// accepted by m (no fallback caused by the rotation). After a restart or a
// loss the guards refuse early data for up to 2W; that is not checked here.
func honestAt(t *testing.T, w *boundaryWorld, m *boundaryMember, at time.Duration) {
	w.setTime(at)
	if _, r := w.dial(m, w.honestOffer(m)); !r.state.EarlyDataAccepted || string(r.early) != "GET /" {
		t.Fatalf("honest client at %v from the rollover: early data refused (%s)", at, r.state.ZTLSRejectReason)
	}
}

// TestBoundaryRestartReplay: a server on the default in-memory register
// restarts in the last minute of a period.
func TestBoundaryRestartReplay(t *testing.T) {
	for _, at := range boundaryInstants {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			w := newBoundaryWorld(t, false)
			// The server has run since two hours before the rollover.
			w.member(tls13.NewMemoryStrikeRegister(1<<10, w.clk.Now()), nil)
			honestAt(t, w, w.members[0], at)
			runBoundaryAttack(t, w, at, func() []*boundaryMember {
				// The same keys, a new process: its memory begins now.
				return []*boundaryMember{w.member(tls13.NewMemoryStrikeRegister(1<<10, w.clk.Now()), nil)}
			})
		})
	}
}

// fleetLossAttack runs the boundary attack on a fleet of two members
// sharing one Redis (TestModes: FLUSHALL in the last minute of a period,
// the flight replayed to the other member, then to the one that took it):
// their strike register or, with bfeKeys, their BFE puncture log (strike
// registers off). The loss is a FLUSHALL of every primary: the flight's
// key, and so its Cluster slot, is not known to the test.
func fleetLossAttack(t *testing.T, e *redisEnv, bfeKeys bool) {
	for _, at := range boundaryInstants {
		t.Run(fmt.Sprint(at), func(t *testing.T) {
			e.flushAll(t)
			w := newBoundaryWorld(t, bfeKeys)
			for i := 0; i < 2; i++ {
				reg := e.newReg(t, w.clk, nil)
				warm(t, reg, w.clk) // Redis's memory complete since long before
				if bfeKeys {
					w.member(noStrike{}, reg.PunctureLog("server.test", 443, zdata.EpochLength))
				} else {
					w.member(reg, nil)
				}
			}
			honestAt(t, w, w.members[1], at)
			runBoundaryAttack(t, w, at, func() []*boundaryMember {
				e.flushAll(t)
				// The other member first: the one that took the flight
				// would set the ciphertext's positions in Redis again.
				return []*boundaryMember{w.members[1], w.members[0]}
			})
		})
	}
}
