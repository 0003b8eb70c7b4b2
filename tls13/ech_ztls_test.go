package tls13

// ZTLS inside ECH: the ztls extension, the Z-data record's id and hash,
// the ticket and the early data's key are in the inner ClientHello only.

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/wire"
)

type echZTLS struct {
	*echSetup
	z *ztlsSetup
}

func newECHZTLS(t *testing.T) *echZTLS {
	e := newECHSetup(t)
	z := newZTLSSetup(t)
	z.offer, z.key = newZData(t, ecdh.X25519(), X25519, echInnerName, "", z.p)
	z.scfg.ZData = &testZKeys{keys: []*ZDataKey{z.key}}
	e.scfg.ZData, e.scfg.StrikeRegister = z.scfg.ZData, z.scfg.StrikeRegister
	e.scfg.MaxEarlyData = 4096
	return &echZTLS{echSetup: e, z: z}
}

// earlyRun is echRun with early data: the server answers what early data
// it read in its first flight. read is all the server's application got.
func earlyRun(t *testing.T, ccfg, scfg *Config, z *ZDataOffer, session *ClientSession, request []byte) (c, s *engine, first, read []byte, cerr, serr error) {
	t.Helper()
	c, s = newEngine(ccfg, true), newEngine(scfg, false)
	if err := c.startClient(session, z, request); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	first = append([]byte(nil), c.takeOutput()...)
	if serr = s.feed(first); serr != nil {
		return
	}
	buf := make([]byte, 4096)
	if n := s.readEarly(buf); n > 0 {
		read = append(read, buf[:n]...)
		if _, err := s.writeApp(append([]byte("answer to "), buf[:n]...)); err != nil {
			t.Fatal(err)
		}
	}
	if cerr = c.feed(s.takeOutput()); cerr != nil {
		serr = s.feed(c.takeOutput())
		return
	}
	serr = s.feed(c.takeOutput())
	read = append(read, buf[:s.readApp(buf)]...)
	return
}

// checkOuterHidesZTLS: the first flight names neither the inner server,
// nor the Z-data record, nor carries ztls, ztls_bfe, ztls_kem, a PSK or
// the request in clear.
func checkOuterHidesZTLS(t *testing.T, first []byte, z *ZDataOffer, request []byte) {
	t.Helper()
	outer := outerHello(t, first)
	for _, typ := range outer.Order {
		switch typ {
		case wire.ExtZTLS, wire.ExtZTLSBFE, wire.ExtZTLSKEM:
			t.Fatalf("the outer ClientHello carries extension %#04x", typ)
		}
	}
	if outer.ZTLS != nil || outer.ServerName != echPublicName {
		t.Fatal("the outer ClientHello carries ztls or the inner name")
	}
	// Early data goes with a GREASE pre_shared_key (RFC 9849, Section
	// 6.1.2), as in a resumption.
	if len(outer.PSKIdentities) != 1 || len(outer.PSKIdentities[0].Identity) < 32 {
		t.Fatalf("the outer ClientHello has early_data and %d PSK identities, want one GREASE", len(outer.PSKIdentities))
	}
	for what, b := range map[string][]byte{"inner name": []byte(echInnerName), "request": request, "zdata_hash": z.Hash[:]} {
		if bytes.Contains(first, b) {
			t.Fatalf("the first flight has the %s in clear", what)
		}
	}
	if !outer.EarlyData {
		t.Fatal("the outer ClientHello lacks early_data (RFC 9849, Section 6.1: a rejecting server must skip the early records)")
	}
}

func TestECHZTLSAccepted(t *testing.T) {
	x := newECHZTLS(t)
	request := []byte("GET /secret-path")
	c, s, first, read, cerr, serr := earlyRun(t, x.ccfg, x.scfg, x.z.offer, nil, request)
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	if c.info.ECH != ECHAccepted || !c.info.ZTLS || !c.info.EarlyDataAccepted || !s.info.ZTLS || s.info.ServerName != echInnerName {
		t.Fatalf("client %+v; server's reason %q", c.info, s.info.ZTLSRejectReason)
	}
	if !bytes.Equal(read, request) {
		t.Fatalf("server read %q", read)
	}
	checkOuterHidesZTLS(t, first, x.z.offer, request)
}

// With ECH rejected, the early data (under the inner ClientHello's keys)
// reaches no application, the client fails with the retry configs, and
// the retry carries the request once, as early data accepted under ECH.
func TestECHZTLSRejectedEarlyDataNotAccepted(t *testing.T) {
	x := newECHZTLS(t)
	x.ccfg.ECHConfigList = echList(t, newECHKey(t, 1))
	request := []byte("POST /once")
	c, s, first, read, cerr, serr := earlyRun(t, x.ccfg, x.scfg, x.z.offer, nil, request)
	var rej *ECHRejectedError
	if !errors.As(cerr, &rej) || alertOf(serr) != int(AlertECHRequired) {
		t.Fatalf("client %v, server %v: want a rejection and ech_required", cerr, serr)
	}
	if len(read) != 0 || s.info.EarlyDataAccepted || s.info.ZTLSOffered || c.info.EarlyDataAccepted {
		t.Fatalf("early data reached the public name's server: %q", read)
	}
	if !hasEventOrder(c.events, EventClientHelloSent, EventEarlyDataRejected) {
		t.Fatalf("client events %v: the early data is not reported rejected", c.events)
	}
	checkOuterHidesZTLS(t, first, x.z.offer, request)

	x.ccfg.ECHConfigList = rej.RetryConfigList
	c, _, _, read, cerr, serr = earlyRun(t, x.ccfg, x.scfg, x.z.offer, nil, request)
	if cerr != nil || serr != nil || !c.info.EarlyDataAccepted || c.info.ECH != ECHAccepted || !bytes.Equal(read, request) {
		t.Fatalf("retry: %v %v, read %q", cerr, serr, read)
	}
}

// Resumption with 0-RTT inside ECH: the ticket goes in the inner only.
func TestECHResumptionEarlyData(t *testing.T) {
	x := newECHZTLS(t)
	c, s := handshakeEngines(t, x.ccfg, x.scfg)
	if err := s.feed(c.takeOutput()); err != nil {
		t.Fatal(err)
	}
	if err := c.feed(s.takeOutput()); err != nil {
		t.Fatal(err)
	}
	session := c.lastSession()
	if session == nil || c.info.ECH != ECHAccepted {
		t.Fatalf("no ticket from the ECH handshake (ECH %q)", c.info.ECH)
	}
	request := []byte("GET /again")
	c, _, first, read, cerr, serr := earlyRun(t, x.ccfg, x.scfg, nil, session, request)
	if cerr != nil || serr != nil || !c.info.DidResume || !c.info.EarlyDataAccepted || !bytes.Equal(read, request) {
		t.Fatalf("client %v, server %v, resumed %v, read %q", cerr, serr, c.info.DidResume, read)
	}
	if bytes.Contains(first, session.Ticket) {
		t.Fatal("the ticket is in the first flight in clear")
	}
	checkOuterHidesZTLS(t, first, x.z.offer, request)
}

// Through Conn, with the rejected early data to be resent: the handshake
// fails with the retry configs and the public name's server never gets
// the request, neither as early data nor after the handshake.
func TestECHConnRejectedNoResend(t *testing.T) {
	x := newECHZTLS(t)
	x.ccfg.ECHConfigList = echList(t, newECHKey(t, 1))
	got := make(chan []byte, 1)
	addr := serve(t, loopback(t), func(c net.Conn) {
		s := Server(c, x.scfg)
		var all []byte
		buf := make([]byte, 4096)
		if err := s.HandshakeEarly(context.Background()); err == nil {
			n, _ := s.ReadEarlyData(buf)
			all = append(all, buf[:n]...)
			n, _ = s.Read(buf)
			all = append(all, buf[:n]...)
		}
		got <- all
	})
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := Client(raw, x.ccfg)
	c.SetZData(x.z.offer)
	c.SetEarlyData([]byte("GET /resend-me"), true)
	var rej *ECHRejectedError
	if err := c.Handshake(); !errors.As(err, &rej) || rej.RetryConfigList == nil {
		t.Fatalf("handshake: %v, want an ECHRejectedError with retry configs", err)
	}
	if b := <-got; len(b) != 0 {
		t.Fatalf("the public name's server read %q", b)
	}
	// A list with no usable config fails before anything is sent.
	x.ccfg.ECHConfigList = []byte{0, 1, 2}
	if _, err := Dial("tcp", addr, x.ccfg); err == nil || !strings.Contains(err.Error(), "ECHConfigList") {
		t.Fatalf("dial with a malformed list: %v", err)
	}
}

// recordingConn keeps every byte the client writes to the socket.
type recordingConn struct {
	net.Conn
	mu    sync.Mutex
	wrote []byte
}

func (r *recordingConn) Write(p []byte) (int, error) {
	r.mu.Lock()
	r.wrote = append(r.wrote, p...)
	r.mu.Unlock()
	return r.Conn.Write(p)
}

// The first flight as written to the socket by a Conn with ZTLS inside
// ECH, early data accepted: nothing in it names the server or the record.
func TestECHZTLSSocketCapture(t *testing.T) {
	x := newECHZTLS(t)
	request := []byte("GET /private-page")
	addr := serve(t, loopback(t), func(c net.Conn) {
		s := Server(c, x.scfg)
		if s.HandshakeEarly(context.Background()) != nil {
			return
		}
		buf := make([]byte, 100)
		n, _ := s.ReadEarlyData(buf)
		s.Write(append([]byte("answer to "), buf[:n]...))
		io.Copy(io.Discard, s)
	})
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingConn{Conn: raw}
	c := Client(rec, x.ccfg)
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.SetZData(x.z.offer)
	c.SetEarlyData(request, false)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	n, err := io.ReadAtLeast(c, got, len("answer to ")+len(request))
	if err != nil || string(got[:n]) != "answer to "+string(request) {
		t.Fatalf("answer %q, %v", got[:n], err)
	}
	if st := c.ConnectionState(); st.ECH != ECHAccepted || !st.ZTLS || !st.EarlyDataAccepted {
		t.Fatalf("ECH %q, ZTLS %v, early data %v", st.ECH, st.ZTLS, st.EarlyDataAccepted)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	checkOuterHidesZTLS(t, rec.wrote, x.z.offer, request)
}
