package tls13

// ECH interop with Go's crypto/tls (RFC 9849), both roles: accepted,
// rejected with retry configs (and the retry), GREASE.

import (
	"bytes"
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"
)

// goECHServer runs Go's server with ECH keys and reports each
// handshake's state.
func goECHServer(t *testing.T, e *echSetup, keys ...ECHKey) (string, <-chan tls.ConnectionState) {
	t.Helper()
	return goECHServerWith(t, e, nil, keys...)
}

// goECHServerWith is goECHServer with the curves Go's server takes (nil:
// its defaults).
func goECHServerWith(t *testing.T, e *echSetup, curves []tls.CurveID, keys ...ECHKey) (string, <-chan tls.ConnectionState) {
	t.Helper()
	cfg := &tls.Config{CurvePreferences: curves, MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{e.p.goSrv,
		{Certificate: e.public.Chain, PrivateKey: e.public.PrivateKey, Leaf: e.public.Leaf}}}
	for _, k := range keys {
		cfg.EncryptedClientHelloKeys = append(cfg.EncryptedClientHelloKeys,
			tls.EncryptedClientHelloKey{Config: k.Config, PrivateKey: k.PrivateKey, SendAsRetry: k.SendAsRetry})
	}
	states := make(chan tls.ConnectionState, 4)
	addr := serve(t, loopback(t), func(c net.Conn) {
		tc := tls.Server(c, cfg)
		if err := tc.Handshake(); err != nil {
			return
		}
		states <- tc.ConnectionState()
		echo(tc)
	})
	return addr, states
}

func TestECHGoServerAccepts(t *testing.T) {
	e := newECHSetup(t)
	addr, states := goECHServer(t, e, e.key)
	c, err := Dial("tcp", addr, e.ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "inside ECH")
	if st := c.ConnectionState(); st.ECH != ECHAccepted || !st.PeerCertificates[0].Equal(e.p.server.Leaf) {
		t.Fatalf("client: ECH %q", st.ECH)
	}
	if st := <-states; !st.ECHAccepted || st.ServerName != echInnerName {
		t.Fatalf("Go's server: accepted %v, SNI %q", st.ECHAccepted, st.ServerName)
	}
}

func TestECHGoServerRejectsThenRetry(t *testing.T) {
	e := newECHSetup(t)
	addr, states := goECHServer(t, e, e.key)
	e.ccfg.ECHConfigList = echList(t, newECHKey(t, 1))
	_, err := Dial("tcp", addr, e.ccfg)
	var rej *ECHRejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("dial with a stale config: %v, want an ECHRejectedError", err)
	}
	if !bytes.Equal(rej.RetryConfigList, e.list) {
		t.Fatal("Go's retry configs are not its config list")
	}
	e.ccfg.ECHConfigList = rej.RetryConfigList
	c, err := Dial("tcp", addr, e.ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "retried")
	if c.ConnectionState().ECH != ECHAccepted {
		t.Fatal("retry not accepted")
	}
	if st := <-states; !st.ECHAccepted {
		t.Fatal("Go's server did not accept the retry")
	}
}

// GREASE against Go's server with ECH keys (which cannot open the
// GREASE extension and so reads the ClientHello as it is): with ALPN, then
// resumed with the ticket (the GREASE payload then sized for the PSK),
// and after a HelloRetryRequest (the second ClientHello repeats the
// first's GREASE extension).
func TestECHGoServerGrease(t *testing.T) {
	e := newECHSetup(t)
	addr, _ := goECHServer(t, e, e.key)
	e.ccfg.ECHConfigList, e.ccfg.ECHGrease = nil, true
	e.ccfg.NextProtos = []string{"h2", "http/1.1"}
	e.ccfg.ClientSessionCache = NewLRUClientSessionCache(4)
	for i := 0; i < 2; i++ {
		c, err := Dial("tcp", addr, e.ccfg)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, "grease") // reading also takes the ticket in
		if st := c.ConnectionState(); st.ECH != ECHGrease || st.DidResume != (i == 1) {
			t.Fatalf("connection %d: ECH %q, resumed %v", i, st.ECH, st.DidResume)
		}
		c.Close()
	}
	hrr := newECHSetup(t)
	addr, _ = goECHServerWith(t, hrr, []tls.CurveID{tls.CurveP256}, hrr.key)
	hrr.ccfg.ECHConfigList, hrr.ccfg.ECHGrease = nil, true
	c, err := Dial("tcp", addr, hrr.ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "grease after HelloRetryRequest")
	if st := c.ConnectionState(); st.ECH != ECHGrease || st.Group != P256 {
		t.Fatalf("ECH %q, group %v: want GREASE after a HelloRetryRequest for P-256", st.ECH, st.Group)
	}
}

// ourECHServer runs our server and reports each handshake's state.
func ourECHServer(t *testing.T, scfg *Config) (string, <-chan ConnectionState) {
	t.Helper()
	states := make(chan ConnectionState, 4)
	addr := serve(t, loopback(t), func(c net.Conn) {
		s := Server(c, scfg)
		if err := s.Handshake(); err != nil {
			return
		}
		states <- s.ConnectionState()
		echo(s)
	})
	return addr, states
}

func goECHClient(e *echSetup, list []byte) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, ServerName: echInnerName, RootCAs: e.p.pool(),
		EncryptedClientHelloConfigList: list}
}

func TestECHGoClientAccepted(t *testing.T) {
	e := newECHSetup(t)
	addr, states := ourECHServer(t, e.scfg)
	c, err := tls.Dial("tcp", addr, goECHClient(e, e.list))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	roundTrip(t, c, "Go inside ECH")
	if !c.ConnectionState().ECHAccepted {
		t.Fatal("Go's client: ECH not accepted")
	}
	if st := <-states; st.ECH != ECHAccepted || st.ServerName != echInnerName {
		t.Fatalf("our server: ECH %q, SNI %q", st.ECH, st.ServerName)
	}
}

func TestECHGoClientStaleConfig(t *testing.T) {
	e := newECHSetup(t)
	addr, _ := ourECHServer(t, e.scfg)
	_, err := tls.Dial("tcp", addr, goECHClient(e, echList(t, newECHKey(t, 1))))
	var rej *tls.ECHRejectionError
	if !errors.As(err, &rej) {
		t.Fatalf("Go's client with a stale config: %v, want an ECH rejection", err)
	}
	if !bytes.Equal(rej.RetryConfigList, e.list) {
		t.Fatal("Go's client did not get our retry configs")
	}
	c, err := tls.Dial("tcp", addr, goECHClient(e, rej.RetryConfigList))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.ConnectionState().ECHAccepted {
		t.Fatal("Go's retry not accepted")
	}
}

// HelloRetryRequest with ECH against Go: Go's server takes only P-256;
// our server, only P-256, answers Go's client.
func TestECHGoHelloRetryRequest(t *testing.T) {
	e := newECHSetup(t)
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, CurvePreferences: []tls.CurveID{tls.CurveP256},
		Certificates:             []tls.Certificate{e.p.goSrv, {Certificate: e.public.Chain, PrivateKey: e.public.PrivateKey, Leaf: e.public.Leaf}},
		EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{Config: e.key.Config, PrivateKey: e.key.PrivateKey, SendAsRetry: true}}}
	addr := goServer(t, cfg, goEcho)
	c, err := Dial("tcp", addr, e.ccfg)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "after a retry")
	if st := c.ConnectionState(); st.ECH != ECHAccepted || st.Group != P256 || !hasEvent(c.Trace(), EventHelloRetryRequest) {
		t.Fatalf("our client: ECH %q, group %v", st.ECH, st.Group)
	}
	c.Close()
	stale := e.ccfg.Clone()
	stale.ECHConfigList = echList(t, newECHKey(t, 1))
	var rej *ECHRejectedError
	if _, err := Dial("tcp", addr, stale); !errors.As(err, &rej) || !bytes.Equal(rej.RetryConfigList, e.list) {
		t.Fatalf("our client, stale config, after a retry: %v", err)
	}

	e.scfg.Groups = []CurveID{P256}
	ours, states := ourECHServer(t, e.scfg)
	gc, err := tls.Dial("tcp", ours, goECHClient(e, e.list))
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if !gc.ConnectionState().ECHAccepted {
		t.Fatal("Go's client: ECH not accepted after our retry")
	}
	if st := <-states; st.ECH != ECHAccepted || st.Group != P256 {
		t.Fatalf("our server: ECH %q, group %v", st.ECH, st.Group)
	}
	_, err = tls.Dial("tcp", ours, goECHClient(e, echList(t, newECHKey(t, 1))))
	var grej *tls.ECHRejectionError
	if !errors.As(err, &grej) || !bytes.Equal(grej.RetryConfigList, e.list) {
		t.Fatalf("Go's client, stale config, after our retry: %v", err)
	}
}
