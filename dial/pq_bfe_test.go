package dial

// Post-quantum ZTLS with BFE end to end (docs/ztls-spec.md, Sections 9.2
// and 9.4): the lab's service has a BFE key, so its v3 records carry
// bfe=; the client's early data rests on ML-KEM-768, x25519 and the BFE
// key, and a path that records its first flight and sends it again finds
// the BFE key punctured.

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/zdata"
)

// freshRegister is a strike register that refuses nothing: only the BFE
// key's punctures can refuse a replay.
type freshRegister struct{}

func (freshRegister) CheckAndInsert([]byte, time.Time, time.Time, time.Time) (bool, error) {
	return true, nil
}

// startPQBFEWorld is a lab world publishing v3 records beside announcing
// classical ones, with a BFE key for each period (a small filter): the
// v3 records are published with bfe= and the classical ones with their
// v2 twins. The server's strike register refuses nothing.
func startPQBFEWorld(t *testing.T, srv *countingServer) *lab.World {
	t.Helper()
	w := startWorld(t, lab.Options{PostQuantum: true, Handler: srv.handler,
		ZDataOptions: zdata.Options{BFEConnections: 32, BFEFalsePositiveRate: 1.0 / 64}})
	now := clock.Now()
	w.Service.BFEDir, w.Service.BFEServe = t.TempDir(), true
	t.Cleanup(w.Service.CloseBFE)
	if _, err := w.Service.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Service.AttachBFE(); err != nil {
		t.Fatal(err)
	}
	w.ServerTLS.StrikeRegister = freshRegister{}
	if err := w.Republish(now); err != nil {
		t.Fatal(err)
	}
	v3, _ := pqRecords(t, w, now)
	for _, r := range v3 {
		if r.BFEPublicKey() == nil {
			t.Fatalf("v3 record %d published without bfe=", r.ID)
		}
	}
	return w
}

// startRecordingPath is the world's lab.RecordingPath, closed with the test.
func startRecordingPath(t *testing.T, w *lab.World) *lab.RecordingPath {
	t.Helper()
	p, err := w.StartRecordingPath()
	if err != nil {
		t.Skipf("127.0.0.2 not usable: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// viaPath sends the connection through 127.0.0.2.
func viaPath(o *Options) { o.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.2")} }

// TestPQBFEConnectAndReplay: the client takes the v3 record with bfe=
// and its early data is accepted, post-quantum and with BFE; the first
// flight, recorded on the path and sent to the server again, is refused
// early data (the BFE key punctured; the strike register refuses
// nothing), so the request is received once.
func TestPQBFEConnectAndReplay(t *testing.T) {
	srv := &countingServer{}
	w := startPQBFEWorld(t, srv)
	path := startRecordingPath(t, w)
	r, err := connect(t, w, viaPath)
	wantPQZTLS(t, r, err)
	if !r.Report.EarlyData.BFE || !r.Conn.ConnectionState().ZTLSBFE {
		t.Fatalf("early data %+v: want post-quantum with BFE", r.Report.EarlyData)
	}
	waitReasons(t, srv, 1)
	flight := path.ClientBytes(0)
	if !containsKEM(flight) {
		t.Fatal("no ztls_kem extension in the recorded first flight")
	}
	replay(t, w.ServerAddr, flight)
	reasons := waitReasons(t, srv, 2)
	if !strings.Contains(reasons[1], "punctured") || srv.requests.Load() != 1 {
		t.Fatalf("replay: server's reasons %q, %d requests received: want the BFE key punctured, the request once", reasons, srv.requests.Load())
	}
}

// replay sends flight to addr as a new connection and reads until the
// server closes it.
func replay(t *testing.T, addr string, flight []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // real time: a deadline
	if _, err := c.Write(flight); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	io.Copy(io.Discard, c)
}

// waitReasons waits (5 s at most) until the server has noted n reasons
// and returns them.
func waitReasons(t *testing.T, srv *countingServer, n int) []string {
	t.Helper()
	for i := 0; i < 500; i++ {
		srv.mu.Lock()
		got := append([]string(nil), srv.reasons...)
		srv.mu.Unlock()
		if len(got) >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the server noted fewer than %d connections", n)
	return nil
}

// kemPattern starts a ztls_kem extension for X25519MLKEM768: codepoint
// 0xFF5C, a 1122-byte body, a 1120-byte kem_share.
var kemPattern = []byte{0xFF, 0x5C, 0x04, 0x62, 0x04, 0x60}

// kemShareOf returns the kem_share of the first ztls_kem extension in a
// client's bytes, or nil.
func kemShareOf(flight []byte) []byte {
	i := bytes.Index(flight, kemPattern)
	if i < 0 || i+len(kemPattern)+1120 > len(flight) {
		return nil
	}
	return flight[i+len(kemPattern) : i+len(kemPattern)+1120]
}

func containsKEM(flight []byte) bool { return kemShareOf(flight) != nil }
