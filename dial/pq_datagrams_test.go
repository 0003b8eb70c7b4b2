package dial

// A post-quantum ZTLS first flight over TurboTLS (docs/ztls-spec.md,
// Section 9.7; docs/turbotls-spec.md, Sections 2 and 3): the ClientHello
// with the client's X25519MLKEM768 key share and ztls_kem in its
// datagrams, counted on the client's socket and at the server, and the
// anti-amplification bound kept.

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/turbo"
)

// turboHeaderLen is a TurboTLS datagram's header: type, conn_id,
// flight_length, offset, fragment_length (docs/turbotls-spec.md, Section 2).
const turboHeaderLen = 21

// datagramCount counts one client's TurboTLS datagrams and reassembles
// both flights from their fragments.
type datagramCount struct {
	mu                 sync.Mutex
	sent, received     int // datagrams
	sentBytes, rcvd    int // bytes, headers and padding included
	clientFlight, srvF []byte
}

// note takes one datagram of type 1 (request) or 2 (response).
func (d *datagramCount) note(b []byte, out bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if out {
		d.sent++
		d.sentBytes += len(b)
	} else {
		d.received++
		d.rcvd += len(b)
	}
	if len(b) < turboHeaderLen {
		return
	}
	flightLen := int(b[13])<<16 | int(b[14])<<8 | int(b[15])
	off := int(b[16])<<16 | int(b[17])<<8 | int(b[18])
	n := int(binary.BigEndian.Uint16(b[19:21]))
	if off+n > flightLen || turboHeaderLen+n > len(b) {
		return
	}
	flight := &d.srvF
	if b[0] == 1 {
		flight = &d.clientFlight
	}
	if len(*flight) < flightLen {
		*flight = append(*flight, make([]byte, flightLen-len(*flight))...)
	}
	copy((*flight)[off:], b[turboHeaderLen:turboHeaderLen+n])
}

// countingUDP is a client UDP socket whose datagrams a datagramCount sees.
type countingUDP struct {
	net.Conn
	d *datagramCount
}

func (c countingUDP) Write(b []byte) (int, error) {
	c.d.note(b, true)
	return c.Conn.Write(b)
}

func (c countingUDP) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.d.note(b[:n], false)
	}
	return n, err
}

// TestPQTurboDatagrams: a post-quantum ZTLS connection over TurboTLS.
// The client's flight (a ClientHello of about 2.7 kB, with its
// X25519MLKEM768 key share and ztls_kem, then the early data) takes three
// request datagrams of 1200 bytes, the server answers with its flight
// (the early request's answer inside), and the server's UDP bytes, all
// sent before TCP validated the address, stay within 3x the client's
// (docs/turbotls-spec.md, Section 3). The counts go in
// docs/ztls-spec.md, Section 9.7.
func TestPQTurboDatagrams(t *testing.T) {
	w := startWorld(t, lab.Options{PostQuantum: true, Turbo: true})
	d, _ := turboDatagrams(t, w)
	hello := clientHelloRecordLen(d.clientFlight)
	if !containsKEM(d.clientFlight) || hello < 2500 || hello > 3000 {
		t.Fatalf("ClientHello record of %d bytes, ztls_kem %v: want about 2.7 kB with ztls_kem (Section 9.7)", hello, containsKEM(d.clientFlight))
	}
	if d.sent < 3 {
		t.Fatalf("%d requests for a %d-byte flight: want at least three", d.sent, len(d.clientFlight))
	}
	// Classical ZTLS over TurboTLS, for comparison (Section 9.7's figures).
	cw := startWorld(t, lab.Options{Turbo: true})
	cd, _ := turboDatagrams(t, cw)
	if containsKEM(cd.clientFlight) || cd.sent >= d.sent {
		t.Fatalf("classical: %d requests, ztls_kem %v: want fewer requests, no ztls_kem", cd.sent, containsKEM(cd.clientFlight))
	}
}

// turboDatagrams connects to w over TurboTLS with ZTLS, counting the
// datagrams on the client's socket, and checks them against the server's
// counters and the anti-amplification bound.
func turboDatagrams(t *testing.T, w *lab.World) (*datagramCount, turbo.Stats) {
	t.Helper()
	d := &datagramCount{}
	ctx := wrapUDP(func(c net.Conn) net.Conn { return countingUDP{Conn: c, d: d} })
	r, err := connectCtx(t, ctx, w, func(o *Options) { o.Turbo, o.TurboWait = true, 5*time.Second })
	if err != nil {
		t.Fatal(err)
	}
	if rep := r.Report; rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.Transport != "turbo" || !rep.AnswerInFirstFlight {
		t.Fatalf("mode %s (%s), early data %+v, transport %s (%s), answer in first flight %v: want ZTLS answered in TurboTLS's UDP flight",
			rep.Mode, rep.FallbackReason, rep.EarlyData, rep.Transport, rep.TurboFallback, rep.AnswerInFirstFlight)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	st := w.Turbo.Stats()
	t.Logf("post-quantum %v: client flight %d bytes (ClientHello record %d bytes): %d request datagrams, %d bytes",
		r.Report.EarlyData.PostQuantum, len(d.clientFlight), clientHelloRecordLen(d.clientFlight), d.sent, d.sentBytes)
	t.Logf("server flight %d bytes: %d response datagrams, %d bytes; server counted %d in (%d bytes), %d out (%d bytes), %d held by the 3x rule",
		len(d.srvF), d.received, d.rcvd, st.DatagramsIn, st.BytesIn, st.DatagramsOut, st.BytesOut, st.AmplificationHeld)
	if d.sentBytes != 1200*d.sent {
		t.Fatalf("%d requests of %d bytes: want each padded to 1200", d.sent, d.sentBytes)
	}
	if int64(d.sent) != st.DatagramsIn || int64(d.sentBytes) != st.BytesIn || int64(d.received) != st.DatagramsOut || int64(d.rcvd) != st.BytesOut {
		t.Fatalf("client and server counts differ: client %d/%d bytes out, %d/%d in; server %+v", d.sent, d.sentBytes, d.received, d.rcvd, st)
	}
	// Every UDP byte goes before TCP validates the address (the link
	// record comes after the server's flight).
	if st.BytesOut > 3*st.BytesIn || d.received > d.sent {
		t.Fatalf("server sent %d bytes in %d datagrams for %d bytes in %d requests: over 3x, or more datagrams than requests",
			st.BytesOut, d.received, st.BytesIn, d.sent)
	}
	return d, st
}

// clientHelloRecordLen is the length of the flight's first TLS record
// (the ClientHello's, header included), 0 if it is not a handshake record.
func clientHelloRecordLen(flight []byte) int {
	if len(flight) < 5 || flight[0] != 22 {
		return 0
	}
	return 5 + int(binary.BigEndian.Uint16(flight[3:5]))
}
