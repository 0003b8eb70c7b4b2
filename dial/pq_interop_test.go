package dial

// A ciphertext the server's key does not decapsulate, and older clients,
// against a service that publishes v3 records (docs/ztls-spec.md,
// Sections 9.5 and 9.9).

import (
	"bytes"
	"context"
	"crypto/mlkem"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// countingServer is a lab world whose server counts the requests it
// receives (early or not) and keeps the reason it gave for refusing a
// ztls offer.
type countingServer struct {
	requests atomic.Int32
	mu       sync.Mutex
	reasons  []string
}

func (s *countingServer) handler(c *tls13.Conn) {
	if err := c.HandshakeEarly(context.Background()); err != nil {
		return
	}
	s.mu.Lock()
	s.reasons = append(s.reasons, c.ConnectionState().ZTLSRejectReason)
	s.mu.Unlock()
	buf := make([]byte, 4096)
	if n, _ := c.ReadEarlyData(buf); n > 0 {
		s.requests.Add(1)
		c.Write([]byte("hello"))
		c.Handshake()
		c.CloseWrite()
		return
	}
	if n, _ := c.Read(buf); n > 0 {
		s.requests.Add(1)
		c.Write([]byte("hello"))
	}
	c.CloseWrite()
}

// offerFor selects among txt as a client of this release does (the
// lab's TLSA leaf, the client's certificate policy) and returns the
// verified offer.
func offerFor(t *testing.T, w *lab.World, cfg *tls13.Config, txt [][]string) (*tls13.ZDataOffer, *zdata.Record) {
	t.Helper()
	trust := newPolicy(cfg)
	sel := zdata.NewSelector(w.Host, w.Port, zdata.SelectOptions{Now: clock.Now(), Policy: trust.check})
	sel.StartChains([]*dns.TLSA{zdata.TLSA(w.Host, w.Port, w.Cert.Chain[0], time.Minute)}, nil)
	rec, leaf, err := sel.Select(txt)
	if err != nil {
		t.Fatal(err)
	}
	offer := trust.offer(leaf)
	rec.FillOffer(offer)
	return offer, rec
}

// handshakeWith connects to the world's server with offer and the
// request as early data, sends the request after the handshake when it
// was rejected (as dial does), and returns the state and the answer.
func handshakeWith(t *testing.T, w *lab.World, cfg *tls13.Config, offer *tls13.ZDataOffer) (tls13.ConnectionState, string) {
	t.Helper()
	raw, err := net.Dial("tcp", w.ServerAddr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls13.Client(raw, cfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // real time: a deadline
	c.SetZData(offer)
	c.SetEarlyData([]byte("GET /"), false)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := c.ConnectionState()
	if !st.EarlyDataAccepted {
		if _, err := c.Write([]byte("GET /")); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := io.ReadAll(c)
	return st, string(b)
}

// TestPQCiphertextNotDecapsulated: the client encapsulates to another
// ML-KEM-768 key while its ztls extension names the service's v3 record,
// so the server decapsulates a ciphertext not made for its key, exactly
// as a mauled one (FIPS 203 implicit rejection gives a wrong key): the
// binder fails, the server says only "binder does not verify", rejects
// the early data and completes TLS 1.3, and the request, resent after the
// handshake, is received exactly once.
func TestPQCiphertextNotDecapsulated(t *testing.T) {
	srv := &countingServer{}
	w := startWorld(t, lab.Options{PostQuantum: true, Handler: srv.handler})
	cfg := w.ClientTLS()
	cfg.ServerName = w.Host
	offer, rec := offerFor(t, w, cfg, txtOfRecs(w.Service.Records(clock.Now())))
	if !rec.V3 {
		t.Fatal("the client did not select the v3 record")
	}
	other, err := mlkem.GenerateKey768()
	if err != nil {
		t.Fatal(err)
	}
	copy(offer.Share, other.EncapsulationKey().Bytes()) // the ML-KEM half comes first (Section 9.1)
	st, answer := handshakeWith(t, w, cfg, offer)
	if st.ZTLS || st.EarlyDataAccepted || !st.EarlyDataOffered || answer != "hello" || srv.requests.Load() != 1 {
		t.Fatalf("ztls %v, early offered %v accepted %v, answer %q, %d requests at the server: want TLS 1.3, the request once",
			st.ZTLS, st.EarlyDataOffered, st.EarlyDataAccepted, answer, srv.requests.Load())
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.reasons) != 1 || srv.reasons[0] != "binder does not verify" {
		t.Fatalf("server's reasons %q, want the binder's only", srv.reasons)
	}
}

// TestPQOlderClients: against a service that publishes v3 records beside
// announcing classical ones, a client of an earlier release (it skips
// v=ztls3 records, and Zdata_ids are opaque to it) gets classical ZTLS,
// and a TLS 1.3 client without ztls (Go's crypto/tls) a TLS 1.3
// handshake, X25519MLKEM768.
func TestPQOlderClients(t *testing.T) {
	srv := &countingServer{}
	w := startWorld(t, lab.Options{PostQuantum: true, Handler: srv.handler})
	_, classical := pqRecords(t, w, clock.Now())
	cfg := w.ClientTLS()
	cfg.ServerName = w.Host
	offer, rec := offerFor(t, w, cfg, txtOfRecs(classical)) // what an older client's parser keeps
	if rec.V3 || !rec.AnnouncesPQ() {
		t.Fatalf("record v3 %v, announcing %v", rec.V3, rec.AnnouncesPQ())
	}
	st, answer := handshakeWith(t, w, cfg, offer)
	if !st.ZTLS || !st.EarlyDataAccepted || st.ZTLSKEM || answer != "hello" {
		t.Fatalf("older client: ztls %v, early accepted %v, kem %v, answer %q", st.ZTLS, st.EarlyDataAccepted, st.ZTLSKEM, answer)
	}

	c, err := tls.Dial("tcp", w.ServerAddr, &tls.Config{RootCAs: w.Roots, ServerName: w.Host, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET /")); err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(c)
	if cs := c.ConnectionState(); string(b) != "hello" || cs.CurveID != tls.X25519MLKEM768 {
		t.Fatalf("crypto/tls: %q, group %v", b, cs.CurveID)
	}
}

// TestPQCiphertextMauledInTransit: a path flips one byte of the ML-KEM
// ciphertext in the ztls_kem extension of the first flight. The server's
// decapsulation yields a wrong key (implicit rejection), the binder
// fails and it rejects the early data, saying only "binder does not
// verify"; the client's handshake then fails on the changed transcript.
// Nothing of the request is accepted or answered, and it is never sent
// under a classical key.
func TestPQCiphertextMauledInTransit(t *testing.T) {
	srv := &countingServer{}
	w := startWorld(t, lab.Options{PostQuantum: true, Handler: srv.handler})
	// The path: 127.0.0.2 at the server's port, to the server.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(w.Port)))
	if err != nil {
		t.Skipf("127.0.0.2 not usable: %v", err)
	}
	defer ln.Close()
	var mauled atomic.Bool
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go maulKEM(c, w.ServerAddr, &mauled)
		}
	}()
	r, err := connect(t, w, func(o *Options) { o.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.2")} })
	if !mauled.Load() {
		t.Fatal("no ztls_kem extension seen in the first flight")
	}
	if err == nil && r.Report.EarlyData.Accepted {
		t.Fatalf("mauled ciphertext: early data accepted (%+v)", r.Report)
	}
	t.Logf("client: %v", err)
	// The client's handshake can fail on the changed transcript before
	// the server's handler has noted its reason: wait for it (5 s at most).
	for i := 0; i < 500; i++ {
		srv.mu.Lock()
		n := len(srv.reasons)
		srv.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if len(srv.reasons) == 0 || srv.reasons[0] != "binder does not verify" || srv.requests.Load() != 0 {
		t.Fatalf("server's reasons %q, %d requests received: want the binder's, none", srv.reasons, srv.requests.Load())
	}
}

// maulKEM relays c to addr, flipping a byte of the ML-KEM ciphertext in
// the first ztls_kem extension it sees in the client's bytes (codepoint
// 0xFF5C, a 1122-byte body holding a 1120-byte kem_share).
func maulKEM(c net.Conn, addr string, mauled *atomic.Bool) {
	defer c.Close()
	s, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer s.Close()
	go func() { io.Copy(c, s); c.Close() }()
	pattern := []byte{0xFF, 0x5C, 0x04, 0x62, 0x04, 0x60}
	var seen []byte
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			chunk := buf[:n]
			if !mauled.Load() {
				seen = append(seen, chunk...)
				if i := bytes.Index(seen, pattern); i >= 0 && i+len(pattern)+100 <= len(seen) {
					seen[i+len(pattern)+100] ^= 0x01
					mauled.Store(true)
					chunk = seen
				} else {
					continue // hold the bytes until the ciphertext is in
				}
			}
			if _, err := s.Write(chunk); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
