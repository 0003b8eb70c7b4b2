package tls13

// Whole handshakes of RFC 8448 replayed through the engine with the RFC's
// randomness and keys: every byte the engine emits must equal the RFC's.

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13/internal/rfc8448"
	"github.com/ztls-project/ztls/tls13/internal/sig"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

func vectors(t *testing.T) func(string) []byte {
	v, err := rfc8448.Load()
	if err != nil {
		t.Fatal(err)
	}
	return func(k string) []byte {
		b, ok := v[k]
		if !ok {
			t.Fatalf("no vector %q", k)
		}
		return b
	}
}

// rfcTime is when the RFC's certificate was valid.
var rfcTime = time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC)

func rfcKey(t *testing.T, v func(string) []byte) *rsa.PrivateKey {
	n := func(k string) *big.Int { return new(big.Int).SetBytes(v(k)) }
	key := &rsa.PrivateKey{
		PublicKey: rsa.PublicKey{N: n("2/rsa.modulus"), E: int(n("2/rsa.public_exponent").Int64())},
		D:         n("2/rsa.private_exponent"),
		Primes:    []*big.Int{n("2/rsa.prime1"), n("2/rsa.prime2")},
	}
	key.Precompute()
	if err := key.Validate(); err != nil {
		t.Fatal(err)
	}
	return key
}

func mustEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs:\n got %x\nwant %x", what, got, want)
	}
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// resumptionMasterSecret is what a connected engine keeps to make or
// take tickets.
func resumptionMasterSecret(e *engine) []byte {
	switch st := e.st.(type) {
	case *clientConnected:
		return st.resMaster
	case *serverConnected:
		return st.resMaster
	}
	return nil
}

// rfcClientConfig reproduces the RFC's client: its randomness, its key
// share and its ClientHello's exact extension list.
func rfcClientConfig(t *testing.T, v func(string) []byte, sect string, now time.Time) *Config {
	hello, err := wire.ParseClientHello(v(sect + "/client.hello"))
	if err != nil {
		t.Fatal(err)
	}
	cert := v("3/server.certificate.cert_data")
	return &Config{
		Rand:               bytes.NewReader(concat(hello.Random[:], v(sect+"/client.x25519.private"))),
		Time:               func() time.Time { return now },
		ServerName:         "server",
		Groups:             []CurveID{X25519},
		InsecureSkipVerify: true, // the RFC's certificate has no SAN; checked byte for byte instead
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) != 1 || !bytes.Equal(raw[0], cert) {
				return errors.New("not the RFC's certificate")
			}
			return nil
		},
		testHookClientHello: func(ch *wire.ClientHello) {
			shares := ch.KeyShares
			ids, binders := ch.PSKIdentities, ch.PSKBinders
			*ch = *hello
			ch.KeyShares = shares
			ch.PSKIdentities, ch.PSKBinders = ids, binders
		},
	}
}

func TestRFC8448Simple1RTTClient(t *testing.T) {
	v := vectors(t)
	cfg := rfcClientConfig(t, v, "3", rfcTime)
	e := newEngine(cfg, true)
	if err := e.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ClientHello record", e.takeOutput(), v("3/client.hello.record"))

	if err := e.feed(concat(v("3/server.hello.record"), v("3/server.hs_flight.record"))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "client Finished record", e.takeOutput(), v("3/client.finished.record"))
	if !e.done {
		t.Fatal("handshake not complete")
	}
	if err := e.feed(v("3/server.new_session_ticket.record")); err != nil {
		t.Fatal(err)
	}
	if e.lastSession() == nil {
		t.Fatal("no session from the NewSessionTicket")
	}
	mustEqual(t, "resumption PSK", e.lastSession().PSK, v("3/psk"))
	mustEqual(t, "exporter master secret", e.exporter, v("3/exporter_master_secret"))
	mustEqual(t, "resumption master secret", resumptionMasterSecret(e), v("3/resumption_master_secret"))

	if _, err := e.writeApp(v("3/client.app_data.record.payload")); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "client application data record", e.takeOutput(), v("3/client.app_data.record"))
	if err := e.feed(v("3/server.app_data.record")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	mustEqual(t, "server application data", got[:e.readApp(got)], v("3/server.app_data.record.payload"))
	e.close()
	mustEqual(t, "client close_notify", e.takeOutput(), v("3/client.alert.record"))
	if err := e.feed(v("3/server.alert.record")); err != nil || !e.peerClosed {
		t.Fatalf("server close_notify not seen: %v", err)
	}
}

func TestRFC8448Simple1RTTServer(t *testing.T) {
	v := vectors(t)
	key := rfcKey(t, v)
	ch := v("3/client.hello")
	sh, err := wire.ParseServerHello(v("3/server.hello"))
	if err != nil {
		t.Fatal(err)
	}
	ee, err := wire.ParseEncryptedExtensions(v("3/server.encrypted_extensions"))
	if err != nil {
		t.Fatal(err)
	}
	// The RSA-PSS salt the RFC's server drew, recovered from its signature.
	th := hashOf(crypto.SHA256, concat(ch, v("3/server.hello"), v("3/server.encrypted_extensions"), v("3/server.certificate")))
	cv, err := wire.ParseCertificateVerify(v("3/server.certificate_verify"))
	if err != nil {
		t.Fatal(err)
	}
	salt, err := sig.RecoverPSSSalt(&key.PublicKey, crypto.SHA256, hashOf(crypto.SHA256, sig.SignedContent(sig.ServerContext, th)), cv.Signature)
	if err != nil {
		t.Fatal(err)
	}
	cert := v("3/server.certificate.cert_data")
	leaf, err := x509.ParseCertificate(cert)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{
		Rand:                bytes.NewReader(concat(sh.Random[:], v("3/server.x25519.private"), salt, make([]byte, 64))),
		Time:                func() time.Time { return rfcTime },
		Certificates:        []Certificate{{Chain: [][]byte{cert}, PrivateKey: key, Leaf: leaf}},
		testHookServerHello: func(m *wire.ServerHello) { m.Order = sh.Order },
		testHookEncryptedExtensions: func(m *wire.EncryptedExtensions) {
			m.SupportedGroups, m.ServerName, m.Order = ee.SupportedGroups, ee.ServerName, ee.Order
		},
	}
	e := newEngine(cfg, false)
	e.startServer()
	if err := e.feed(v("3/client.hello.record")); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "server flight", e.takeOutput(), concat(v("3/server.hello.record"), v("3/server.hs_flight.record")))
	if err := e.feed(v("3/client.finished.record")); err != nil {
		t.Fatal(err)
	}
	if !e.done {
		t.Fatal("handshake not complete")
	}
	e.takeOutput() // our NewSessionTicket (the RFC's ticket format is the server's own)
	mustEqual(t, "resumption master secret", resumptionMasterSecret(e), v("3/resumption_master_secret"))
	if err := e.feed(v("3/client.app_data.record")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	mustEqual(t, "client application data", got[:e.readApp(got)], v("3/client.app_data.record.payload"))
	if _, err := e.writeApp(v("3/server.app_data.record.payload")); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "server application data record", e.takeOutput(), v("3/server.app_data.record"))
}

// rfcSession is the client's state after Section 3's NewSessionTicket.
func rfcSession(t *testing.T, v func(string) []byte, received time.Time) *ClientSession {
	nst, err := wire.ParseNewSessionTicket(v("3/server.new_session_ticket"))
	if err != nil {
		t.Fatal(err)
	}
	return &ClientSession{
		Suite: TLS_AES_128_GCM_SHA256, PSK: v("3/psk"), Ticket: nst.Ticket, AgeAdd: nst.AgeAdd,
		ReceivedAt: received, Lifetime: time.Duration(nst.Lifetime) * time.Second,
		ServerName: "server", MaxEarlyData: nst.MaxEarlyData,
	}
}

func TestRFC8448Resumed0RTTClient(t *testing.T) {
	v := vectors(t)
	// The RFC's obfuscated age minus age_add: the ticket is 6 ms old.
	cfg := rfcClientConfig(t, v, "4", rfcTime.Add(6*time.Millisecond))
	e := newEngine(cfg, true)
	if err := e.startClient(rfcSession(t, v, rfcTime), nil, v("4/client.early_data.record.payload")); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "ClientHello and early data", e.takeOutput(), concat(v("4/client.hello.record"), v("4/client.early_data.record")))

	if err := e.feed(concat(v("4/server.hello.record"), v("4/server.hs_flight.record"))); err != nil {
		t.Fatal(err)
	}
	if !e.info.EarlyDataAccepted || !e.info.DidResume {
		t.Fatalf("early data accepted=%v resumed=%v", e.info.EarlyDataAccepted, e.info.DidResume)
	}
	mustEqual(t, "EndOfEarlyData and Finished", e.takeOutput(), concat(v("4/client.end_of_early_data.record"), v("4/client.finished.record")))
	mustEqual(t, "exporter master secret", e.exporter, v("4/exporter_master_secret"))
	mustEqual(t, "resumption master secret", resumptionMasterSecret(e), v("4/resumption_master_secret"))
	if _, err := e.writeApp(v("4/client.app_data.record.payload")); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "client application data record", e.takeOutput(), v("4/client.app_data.record"))
	if err := e.feed(v("4/server.app_data.record")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 100)
	mustEqual(t, "server application data", got[:e.readApp(got)], v("4/server.app_data.record.payload"))
}

func TestRFC8448Resumed0RTTServer(t *testing.T) {
	v := vectors(t)
	sh, err := wire.ParseServerHello(v("4/server.hello"))
	if err != nil {
		t.Fatal(err)
	}
	ee, err := wire.ParseEncryptedExtensions(v("4/server.encrypted_extensions"))
	if err != nil {
		t.Fatal(err)
	}
	sess := rfcSession(t, v, rfcTime)
	cfg := &Config{
		Rand:         bytes.NewReader(concat(sh.Random[:], v("4/server.x25519.private"), make([]byte, 64))),
		Time:         func() time.Time { return rfcTime.Add(6 * time.Millisecond) },
		MaxEarlyData: sess.MaxEarlyData,
		// The ticket was issued before this Config's first handshake; the
		// register vouches for it (nothing else ever held the RFC's keys).
		StrikeRegister:      NewMemoryStrikeRegister(10, time.Time{}),
		testHookServerHello: func(m *wire.ServerHello) { m.Order = sh.Order },
		testHookEncryptedExtensions: func(m *wire.EncryptedExtensions) {
			m.SupportedGroups, m.ServerName, m.Order = ee.SupportedGroups, ee.ServerName, ee.Order
		},
		// The RFC's ticket is opaque; this server knows what it stands for.
		testHookTicket: func(ticket []byte) *sessionTicket {
			if !bytes.Equal(ticket, sess.Ticket) {
				return nil
			}
			return &sessionTicket{Suite: uint16(sess.Suite), CreatedNS: rfcTime.UnixNano(), AgeAdd: sess.AgeAdd,
				LifetimeS: uint32(sess.Lifetime / time.Second), MaxEarlyData: sess.MaxEarlyData, PSK: sess.PSK, SNI: "server"}
		},
	}
	e := newEngine(cfg, false)
	e.startServer()
	if err := e.feed(concat(v("4/client.hello.record"), v("4/client.early_data.record"))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "server flight", e.takeOutput(), concat(v("4/server.hello.record"), v("4/server.hs_flight.record")))
	got := make([]byte, 100)
	mustEqual(t, "early data", got[:e.readEarly(got)], v("4/client.early_data.record.payload"))
	if err := e.feed(concat(v("4/client.end_of_early_data.record"), v("4/client.finished.record"))); err != nil {
		t.Fatal(err)
	}
	if !e.done || !e.earlyEnded() {
		t.Fatal("handshake not complete")
	}
	mustEqual(t, "resumption master secret", resumptionMasterSecret(e), v("4/resumption_master_secret"))
	// A replay of the same first flight gets no 0-RTT (RFC 8446, Section 8).
	e2 := newEngine(cfg, false)
	cfg.testHookEncryptedExtensions = nil
	cfg.Rand = bytes.NewReader(concat(sh.Random[:], v("4/server.x25519.private"), make([]byte, 64)))
	e2.startServer()
	if err := e2.feed(concat(v("4/client.hello.record"), v("4/client.early_data.record"))); err != nil {
		t.Fatal(err)
	}
	if e2.info.EarlyDataAccepted || e2.earlyBuffered() != 0 {
		t.Fatal("replayed 0-RTT ClientHello was accepted")
	}
}
