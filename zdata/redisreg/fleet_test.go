package redisreg

import (
	"bytes"
	"context"
	"crypto/x509"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	ztlsclock "github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// recordingConn keeps a copy of everything written through it.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *recordingConn) sent() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.out.Bytes()...)
}

// serverResult is what one server connection's application saw.
type serverResult struct {
	early []byte
	state tls13.ConnectionState
	err   error
}

// fleetServer is a ZTLS server on loopback whose application answers
// early data in its first flight and reports what it saw.
func fleetServer(t *testing.T, cfg *tls13.Config) (addr string, results <-chan serverResult) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan serverResult, 8)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer nc.Close()
				c := tls13.Server(nc, cfg)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				var res serverResult
				if res.err = c.HandshakeEarly(ctx); res.err == nil {
					res.early, res.err = io.ReadAll(earlyReader{c})
					if len(res.early) > 0 {
						c.Write(append([]byte("early answer: "), res.early...))
					}
					if res.err == nil {
						res.err = c.HandshakeContext(ctx)
					}
					if res.err == nil && len(res.early) == 0 {
						buf := make([]byte, 256)
						n, _ := c.Read(buf)
						c.Write(append([]byte("late answer: "), buf[:n]...))
					}
				}
				res.state = c.ConnectionState()
				ch <- res
			}()
		}
	}()
	t.Cleanup(func() { l.Close(); wg.Wait() })
	return l.Addr().String(), ch
}

type earlyReader struct{ c *tls13.Conn }

func (r earlyReader) Read(p []byte) (int, error) { return r.c.ReadEarlyData(p) }

// testFleetReplay: two servers of a fleet (same seed, same certificate)
// share one Redis strike register (TestModes: on each mode). A client
// that verified Z-data from DNS gets its early request answered in the
// first flight; the captured first flight replayed to either server never
// reaches the application; with Redis down early data is refused but the
// connection is still served.
func testFleetReplay(t *testing.T, e *redisEnv) {
	fleetReplay(t, e.opts, e.downForFleet())
}

// fleetReplay runs the fleet of TestFleetReplayAndFailClosed on a register
// reached through opts; stop, when not nil, stops Redis for the
// fail-closed part.
func fleetReplay(t *testing.T, opts Options, stop func()) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"server.test"}})
	cert := tls13.Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}
	seed := bytes.Repeat([]byte{0x42}, 32)
	now := ztlsclock.Now()

	var addrs []string
	var results []<-chan serverResult
	var svcs []*zdata.Service
	for i := 0; i < 2; i++ {
		svc, err := zdata.NewService("server.test", 443, cert, zdata.Options{}, seed)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Rotate(now); err != nil {
			t.Fatal(err)
		}
		// The register's clock starts a minute back so its startup window
		// (which the unit tests cover) is already over.
		o := opts
		o.Now = func() time.Time { return ztlsclock.Now().Add(-time.Minute) }
		reg, err := New(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { reg.Close() })
		addr, res := fleetServer(t, &tls13.Config{Certificates: []tls13.Certificate{cert}, ZData: svc.Keyring, StrikeRegister: reg})
		addrs, results, svcs = append(addrs, addr), append(results, res), append(svcs, svc)
	}

	rec, rleaf := clientSelects(t, svcs[0], leaf, ca, now)

	dial := func(addr string, resend bool) (*recordingConn, string, tls13.ConnectionState) {
		t.Helper()
		return dialEarly(t, addr, ca, rec.Offer(rleaf), resend)
	}

	// Member 0 answers the early request in its first flight.
	rc, answer, st := dial(addrs[0], false)
	if !st.ZTLS || !st.EarlyDataAccepted || answer != "early answer: GET /" {
		t.Fatalf("first contact: ztls=%v early=%v answer=%q", st.ZTLS, st.EarlyDataAccepted, answer)
	}
	if r := <-results[0]; r.err != nil || string(r.early) != "GET /" {
		t.Fatalf("server 0 saw %q, %v", r.early, r.err)
	}

	// The captured first flight replayed to each member of the fleet.
	flight := rc.sent()
	for i, addr := range addrs {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		nc.Write(flight)
		nc.Close() // the attacker cannot go on: it holds no keys
		r := <-results[i]
		if len(r.early) != 0 || r.state.EarlyDataAccepted {
			t.Fatalf("replay to server %d reached the application: %q", i, r.early)
		}
		if !strings.Contains(r.state.ZTLSRejectReason, "replay") {
			t.Fatalf("replay to server %d: reject reason %q", i, r.state.ZTLSRejectReason)
		}
	}

	// Member 1 serves a new client with early data too (fleet agreement).
	if _, answer, st := dial(addrs[1], false); !st.EarlyDataAccepted || answer != "early answer: GET /" {
		t.Fatalf("fleet member 1: early=%v answer=%q", st.EarlyDataAccepted, answer)
	}
	<-results[1]

	// Redis down: early data refused, the request still answered.
	if stop == nil {
		return
	}
	stop()
	_, answer, st = dial(addrs[0], true)
	if st.EarlyDataAccepted || answer != "late answer: GET /" {
		t.Fatalf("Redis down: early=%v answer=%q", st.EarlyDataAccepted, answer)
	}
	if r := <-results[0]; !strings.Contains(r.state.ZTLSRejectReason, "strike register") {
		t.Fatalf("Redis down: reject reason %q", r.state.ZTLSRejectReason)
	}
}

// clientSelects is the client's view of DNS: the record it selects, and
// its leaf, from what svc publishes at now.
func clientSelects(t testing.TB, svc *zdata.Service, leaf *testpki.Leaf, ca *testpki.CA, now time.Time) (*zdata.Record, *x509.Certificate) {
	t.Helper()
	var txt [][]string
	var tlsa []*dns.TLSA
	for _, rr := range zdata.ZoneRRs(svc.Records(now), leaf.Chain[0], nil, time.Minute) {
		switch v := rr.(type) {
		case *dns.TXT:
			txt = append(txt, v.Txt)
		case *dns.TLSA:
			tlsa = append(tlsa, v)
		}
	}
	sel := zdata.NewSelector("server.test", 443, zdata.SelectOptions{Roots: ca.Pool(), Now: now})
	sel.StartChains(tlsa, nil)
	rec, rleaf, err := sel.Select(txt)
	if err != nil {
		t.Fatal(err)
	}
	return rec, rleaf
}

// dialEarly connects to addr with the Z-data offer, sends "GET /" as early
// data (again after the handshake if resend and it was refused), and
// returns the connection's recording, the answer and its state.
func dialEarly(t *testing.T, addr string, ca *testpki.CA, offer *tls13.ZDataOffer, resend bool) (*recordingConn, string, tls13.ConnectionState) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rc := &recordingConn{Conn: nc}
	c := tls13.Client(rc, &tls13.Config{ServerName: "server.test", RootCAs: ca.Pool()})
	defer c.Close()
	c.SetZData(offer)
	c.SetEarlyData([]byte("GET /"), resend)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return rc, string(buf[:n]), c.ConnectionState()
}
