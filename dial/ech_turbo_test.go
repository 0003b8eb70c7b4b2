package dial

// Encrypted ClientHello over TurboTLS (docs/ztls-spec.md, Section 10.4),
// end to end against the lab's server with TurboTLS on loopback.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

// udpCapture keeps every datagram a TurboTLS UDP socket sends.
type udpCapture struct {
	mu   sync.Mutex
	sent [][]byte
}

type capturingConn struct {
	net.Conn
	c *udpCapture
}

func (w capturingConn) Write(p []byte) (int, error) {
	w.c.mu.Lock()
	w.c.sent = append(w.c.sent, append([]byte(nil), p...))
	w.c.mu.Unlock()
	return w.Conn.Write(p)
}

func (c *udpCapture) datagrams() [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.sent...)
}

// turboFlight reassembles the client flight from request datagrams
// (docs/turbotls-spec.md, Section 2: type, conn_id[12], uint24
// flight_length, uint24 offset, uint16 fragment_length, fragment).
func turboFlight(t *testing.T, dgrams [][]byte) []byte {
	t.Helper()
	var flight []byte
	for _, d := range dgrams {
		if len(d) < 21 || d[0] != 0x01 {
			t.Fatalf("not a TurboTLS request: % x", d[:min(len(d), 21)])
		}
		total := int(d[13])<<16 | int(d[14])<<8 | int(d[15])
		off := int(d[16])<<16 | int(d[17])<<8 | int(d[18])
		n := int(binary.BigEndian.Uint16(d[19:21]))
		if flight == nil {
			flight = make([]byte, total)
		}
		copy(flight[off:], d[21:21+n])
	}
	return flight
}

// startECHTurboWorld is an echWorld whose server also serves TurboTLS.
func startECHTurboWorld(t *testing.T) *echWorld {
	t.Helper()
	ew := &echWorld{}
	ew.World = startWorld(t, lab.Options{HTTPSZData: true, Turbo: true, AltNames: []string{echPublic}, Handler: ewHandler(ew)})
	return ew
}

// TestECHOverTurbo: a service publishing ech and TurboTLS is reached
// over TurboTLS with ECH accepted in the UDP flight, ZTLS inside, the
// request delivered once; the datagrams carry the public name and
// neither the host, nor the ztls extension, nor the request in clear.
func TestECHOverTurbo(t *testing.T) {
	ew := startECHTurboWorld(t)
	k := echKey(t, 4, true)
	ew.serverKeys(t, k)
	ew.publishECH(t, k)
	capture := &udpCapture{}
	ctx := wrapUDP(func(c net.Conn) net.Conn { return capturingConn{c, capture} })
	request := []byte("GET /private-path-over-turbo")
	r, err := connectCtx(t, ctx, ew.World, func(o *Options) {
		o.Turbo, o.TurboWait, o.ECH, o.Request = true, 5*time.Second, ECHRequire, request
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.Transport != "turbo" || rep.ECH != "accepted" || rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.ECHRetried {
		t.Fatalf("transport %s (%s), ECH %q (retried %v), mode %s (%s), early data %+v",
			rep.Transport, rep.TurboFallback, rep.ECH, rep.ECHRetried, rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	if n := ew.requests.Load(); n != 1 {
		t.Fatalf("the server received the request %d times, want once", n)
	}
	dgrams := capture.datagrams()
	if len(dgrams) == 0 {
		t.Fatal("no UDP datagram captured")
	}
	needles := map[string][]byte{"host": []byte(ew.Host), "request": request}
	for i, rec := range ew.Service.Records(clock.Now()) {
		h := rec.ZDataHash()
		needles[fmt.Sprintf("zdata_hash of record %d", i)] = h[:]
	}
	for _, d := range dgrams {
		for what, b := range needles {
			if bytes.Contains(d, b) {
				t.Fatalf("a datagram carries the %s in clear", what)
			}
		}
	}
	flight := turboFlight(t, dgrams)
	if !bytes.Contains(flight, []byte(echPublic)) {
		t.Fatal("the UDP flight does not carry the public name: not an ECH ClientHelloOuter")
	}
	for _, typ := range helloExtensions(t, flight) {
		if typ == ztlsCodepoint {
			t.Fatal("the outer ClientHello sent over UDP carries the ztls extension")
		}
	}
}

// TestECHOverTurboRejected: the record's config is for a key the server
// rotated away. The UDP flight rejects ECH (no early data reaches the
// server's application); the one retry, with the retry configs, runs on
// the TCP connection TurboTLS opened, and the request arrives once. With
// no retry configs and ECH required, the connection fails and the
// request never arrives.
func TestECHOverTurboRejected(t *testing.T) {
	ew := startECHTurboWorld(t)
	old, cur := echKey(t, 1, false), echKey(t, 2, true)
	ew.serverKeys(t, cur)
	ew.publishECH(t, old)
	r, err := connect(t, ew.World, func(o *Options) { o.Turbo, o.TurboWait = true, 5*time.Second })
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.ECH != "accepted" || !rep.ECHRetried || rep.Mode != "ztls" || !rep.EarlyData.Accepted ||
		!hasStep(rep, "turbo_ech_rejected") || !hasStep(rep, "ech_retry") || rep.Transport != "tcp" {
		t.Fatalf("transport %s (%s), ECH %q retried %v, mode %s (%s)", rep.Transport, rep.TurboFallback, rep.ECH, rep.ECHRetried, rep.Mode, rep.FallbackReason)
	}
	if n := ew.requests.Load(); n != 1 {
		t.Fatalf("the server received the request %d times, want once", n)
	}

	ew.serverKeys(t, echKey(t, 3, false)) // no retry configs
	_, err = connect(t, ew.World, func(o *Options) { o.Turbo, o.TurboWait, o.ECH = true, 5*time.Second, ECHRequire })
	if !errors.Is(err, ErrECHRequired) {
		t.Fatalf("ECH required, rejected without retry configs: %v", err)
	}
	if n := ew.requests.Load(); n != 1 {
		t.Fatalf("the server received the request %d times in all, want once", n)
	}
}
