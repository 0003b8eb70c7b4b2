package tls13

import (
	"bytes"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13/internal/ech"
	"github.com/ztls-project/ztls/tls13/internal/wire"
)

const (
	echInnerName  = "server.test" // in getPKI's server leaf
	echPublicName = "public.ech.test"
)

// echSetup is a server with the inner name's certificate and the public
// name's, ECH keys, and a client for the inner name.
type echSetup struct {
	p      *testPKI
	key    ECHKey
	list   []byte
	public Certificate
	ccfg   *Config
	scfg   *Config
}

func newECHKey(t testing.TB, id uint8) ECHKey {
	t.Helper()
	k, err := GenerateECHKey(id, echPublicName, 32, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func echList(t testing.TB, keys ...ECHKey) []byte {
	t.Helper()
	l, err := MarshalECHConfigList(keys)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func newECHSetup(t testing.TB) *echSetup {
	t.Helper()
	p := getPKI(t, "ecdsa-p256")
	leaf := p.ca.Issue(t, publicLeafOpts())
	public := Certificate{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}
	key := newECHKey(t, 1)
	scfg := &Config{Certificates: []Certificate{p.server, public}, ECHKeys: []ECHKey{key}}
	ccfg := &Config{RootCAs: p.pool(), ServerName: echInnerName, ECHConfigList: echList(t, key)}
	return &echSetup{p: p, key: key, list: ccfg.ECHConfigList, public: public, ccfg: ccfg, scfg: scfg}
}

// echRun drives a client and a server engine in memory until both are
// done or one fails; first is the client's first flight as sent.
func echRun(t testing.TB, ccfg, scfg *Config, z *ZDataOffer, early []byte) (c, s *engine, first []byte, cerr, serr error) {
	t.Helper()
	c, s = newEngine(ccfg, true), newEngine(scfg, false)
	if err := c.startClient(nil, z, early); err != nil {
		return c, s, nil, err, nil
	}
	s.startServer()
	first = append([]byte(nil), c.takeOutput()...)
	out := first
	for i := 0; i < 6 && !(c.done && s.done); i++ {
		if serr = s.feed(out); serr != nil {
			c.feed(s.takeOutput())
			return
		}
		if cerr = c.feed(s.takeOutput()); cerr != nil {
			serr = s.feed(c.takeOutput())
			return
		}
		out = c.takeOutput()
	}
	return
}

// outerHello parses the ClientHello of a first flight.
func outerHello(t testing.TB, first []byte) *wire.ClientHello {
	t.Helper()
	ch, err := wire.ParseClientHello(firstHandshakeMessage(t.(*testing.T), first))
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func TestECHAccepted(t *testing.T) {
	e := newECHSetup(t)
	c, s, first, cerr, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
	if cerr != nil || serr != nil {
		t.Fatalf("client %v, server %v", cerr, serr)
	}
	if c.info.ECH != ECHAccepted || s.info.ECH != ECHAccepted {
		t.Fatalf("ECH: client %q, server %q", c.info.ECH, s.info.ECH)
	}
	if s.info.ServerName != echInnerName {
		t.Fatalf("server saw SNI %q, want the inner %q", s.info.ServerName, echInnerName)
	}
	if !c.info.PeerCertificates[0].Equal(e.p.server.Leaf) {
		t.Fatal("the server did not authenticate with the inner name's certificate")
	}
	outer := outerHello(t, first)
	if outer.ServerName != echPublicName {
		t.Fatalf("outer SNI %q, want the public name", outer.ServerName)
	}
	if bytes.Contains(first, []byte(echInnerName)) {
		t.Fatal("the inner server name is in the first flight in clear")
	}
	if _, ok := findExtension(outer.Extra, ech.ExtEncryptedClientHello); !ok {
		t.Fatal("no encrypted_client_hello in the outer ClientHello")
	}
}

func TestECHRejectedThenRetried(t *testing.T) {
	e := newECHSetup(t)
	stale := newECHKey(t, 1) // same id, another key: the server rotated it away
	e.ccfg.ECHConfigList = echList(t, stale)
	c, s, first, cerr, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
	var rej *ECHRejectedError
	if !errors.As(cerr, &rej) || alertOf(cerr) != int(AlertECHRequired) {
		t.Fatalf("client: %v, want an ECHRejectedError with ech_required", cerr)
	}
	if alertOf(serr) != int(AlertECHRequired) {
		t.Fatalf("server: %v, want the client's ech_required alert", serr)
	}
	if c.info.ECH != ECHRejected || s.info.ECH != ECHRejected || s.info.ServerName != echPublicName {
		t.Fatalf("ECH client %q server %q, server name %q", c.info.ECH, s.info.ECH, s.info.ServerName)
	}
	if !c.info.PeerCertificates[0].Equal(e.public.Leaf) {
		t.Fatal("the rejected handshake did not authenticate the public name")
	}
	if bytes.Contains(first, []byte(echInnerName)) {
		t.Fatal("the inner server name is in the first flight in clear")
	}
	if !bytes.Equal(rej.RetryConfigList, e.list) {
		t.Fatal("retry configs are not the server's config list")
	}
	// The single retry, with the retry configs.
	e.ccfg.ECHConfigList = rej.RetryConfigList
	c, s, _, cerr, serr = echRun(t, e.ccfg, e.scfg, nil, nil)
	if cerr != nil || serr != nil || c.info.ECH != ECHAccepted || s.info.ServerName != echInnerName {
		t.Fatalf("retry: client %v, server %v, ECH %q", cerr, serr, c.info.ECH)
	}
}

// A rejected client checks the public name's certificate: a server that
// presents only the inner name's fails the certificate check.
func TestECHRejectedChecksPublicName(t *testing.T) {
	e := newECHSetup(t)
	e.scfg.Certificates = []Certificate{e.p.server}
	e.ccfg.ECHConfigList = echList(t, newECHKey(t, 1))
	_, _, _, cerr, _ := echRun(t, e.ccfg, e.scfg, nil, nil)
	var rej *ECHRejectedError
	if cerr == nil || errors.As(cerr, &rej) || alertOf(cerr) != int(AlertBadCertificate) {
		t.Fatalf("client: %v, want a certificate failure for the public name", cerr)
	}
}

func TestECHServerWithoutECH(t *testing.T) {
	e := newECHSetup(t)
	e.scfg.ECHKeys = nil
	c, s, _, cerr, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
	var rej *ECHRejectedError
	if !errors.As(cerr, &rej) || rej.RetryConfigList != nil {
		t.Fatalf("client: %v, want a rejection without retry configs", cerr)
	}
	if c.info.ECH != ECHRejected || s.info.ECH != ECHNone || alertOf(serr) != int(AlertECHRequired) {
		t.Fatalf("ECH client %q server %q; server %v", c.info.ECH, s.info.ECH, serr)
	}
}

func TestECHGrease(t *testing.T) {
	for _, keys := range [][]ECHKey{nil, {newECHKey(t, 1)}} {
		e := newECHSetup(t)
		e.scfg.ECHKeys = keys
		e.ccfg.ECHConfigList, e.ccfg.ECHGrease = nil, true
		c, s, first, cerr, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
		if cerr != nil || serr != nil {
			t.Fatalf("%d keys: client %v, server %v", len(keys), cerr, serr)
		}
		want := ECHNone
		if keys != nil {
			want = ECHRejected // the server sent retry configs, which GREASE ignores
		}
		if c.info.ECH != ECHGrease || s.info.ECH != want {
			t.Fatalf("%d keys: ECH client %q server %q", len(keys), c.info.ECH, s.info.ECH)
		}
		x, ok := findExtension(outerHello(t, first).Extra, ech.ExtEncryptedClientHello)
		if !ok {
			t.Fatal("no GREASE extension")
		}
		if ce, err := ech.ParseClientExtension(x.Data); err != nil || ce.Type != ech.TypeOuter || len(ce.Enc) != 32 {
			t.Fatalf("GREASE extension %+v, %v: not shaped like a real one", ce, err)
		}
	}
}

func TestECHUnusableConfigList(t *testing.T) {
	e := newECHSetup(t)
	c, err := ech.ParseConfig(e.key.Config)
	if err != nil {
		t.Fatal(err)
	}
	c.KEM = 0x0010 // P-256: not supported
	list, err := ech.MarshalConfigList([]*ech.Config{c})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range [][]byte{list, {0, 1, 2}} {
		e.ccfg.ECHConfigList = l
		cl := newEngine(e.ccfg, true)
		if err := cl.startClient(nil, nil, nil); err == nil || len(cl.takeOutput()) != 0 {
			t.Fatalf("unusable list: %v; want an error and nothing sent", err)
		}
	}
}

func TestECHInnerExtensionInPlainHello(t *testing.T) {
	e := newECHSetup(t)
	e.ccfg.ECHConfigList = nil
	e.ccfg.testHookClientHello = func(ch *wire.ClientHello) {
		ch.Extra = append(ch.Extra, wire.Extension{Type: ech.ExtEncryptedClientHello, Data: []byte{ech.TypeInner}})
	}
	_, _, _, _, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
	if alertOf(serr) != int(AlertIllegalParameter) {
		t.Fatalf("server: %v, want illegal_parameter", serr)
	}
}

// A mauled outer ClientHello: the payload no longer opens (rejected,
// not an error), or its framing breaks (decode_error).
func TestECHServerMalformed(t *testing.T) {
	e := newECHSetup(t)
	for name, tc := range map[string]struct {
		data  []byte
		alert int
	}{
		"unknown type": {[]byte{7}, int(AlertIllegalParameter)},
		"truncated":    {[]byte{0, 0, 1}, int(AlertDecodeError)},
	} {
		ccfg := e.ccfg.Clone()
		ccfg.ECHConfigList = nil
		ccfg.testHookClientHello = func(ch *wire.ClientHello) {
			ch.Extra = append(ch.Extra, wire.Extension{Type: ech.ExtEncryptedClientHello, Data: tc.data})
		}
		_, _, _, _, serr := echRun(t, ccfg, e.scfg, nil, nil)
		if alertOf(serr) != tc.alert {
			t.Errorf("%s: server %v, want alert %d", name, serr, tc.alert)
		}
	}
}

func publicLeafOpts() testpki.LeafOpts {
	return testpki.LeafOpts{DNSNames: []string{echPublicName}}
}

// HelloRetryRequest with ECH (RFC 9849, Sections 6.1.5 and 7.2.1): the
// server takes only P-256, for which the client sent no share.
func TestECHHelloRetryRequest(t *testing.T) {
	for _, stale := range []bool{false, true} {
		e := newECHSetup(t)
		e.scfg.Groups = []CurveID{P256}
		if stale {
			e.ccfg.ECHConfigList = echList(t, newECHKey(t, 1))
		}
		c, s, _, cerr, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
		if !hasEventOrder(c.events, EventClientHelloSent, EventHelloRetryRequest, EventServerHelloReceived) {
			t.Fatalf("stale %v: no HelloRetryRequest (%v)", stale, c.events)
		}
		if stale {
			var rej *ECHRejectedError
			if !errors.As(cerr, &rej) || !bytes.Equal(rej.RetryConfigList, e.list) || alertOf(serr) != int(AlertECHRequired) {
				t.Fatalf("client %v, server %v: want a rejection with retry configs", cerr, serr)
			}
			if !c.info.PeerCertificates[0].Equal(e.public.Leaf) || s.info.ServerName != echPublicName {
				t.Fatal("the rejected retry did not authenticate the public name")
			}
			continue
		}
		if cerr != nil || serr != nil {
			t.Fatalf("client %v, server %v", cerr, serr)
		}
		if c.info.ECH != ECHAccepted || s.info.ECH != ECHAccepted || s.info.ServerName != echInnerName || c.info.Group != P256 {
			t.Fatalf("ECH client %q server %q, SNI %q, group %v", c.info.ECH, s.info.ECH, s.info.ServerName, c.info.Group)
		}
	}
}

// A HelloRetryRequest whose signal was tampered with is a rejection: the
// client goes on with the outer transcript, which the server (having
// accepted) does not share, so the handshake fails rather than continue.
func TestECHHelloRetryRequestSignalChecked(t *testing.T) {
	e := newECHSetup(t)
	e.scfg.Groups = []CurveID{P256}
	c, s := newEngine(e.ccfg, true), newEngine(e.scfg, false)
	if err := c.startClient(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	s.startServer()
	if err := s.feed(c.takeOutput()); err != nil {
		t.Fatal(err)
	}
	hrr := s.takeOutput()
	hrr[len(hrr)-1] ^= 1 // the last byte of the signal (Extra is written last)
	err := c.feed(hrr)
	if err == nil {
		err = s.feed(c.takeOutput())
	}
	if err == nil || c.info.ECH == ECHAccepted {
		t.Fatalf("a tampered HelloRetryRequest signal passed (ECH %q)", c.info.ECH)
	}
}

// Rotation with an ECHKeySet: the new key is published and sent as
// retry, the old one kept for clients that still hold it, then dropped.
func TestECHKeySetRotation(t *testing.T) {
	e := newECHSetup(t)
	old, next := e.key, newECHKey(t, 2)
	set, err := NewECHKeySet([]ECHKey{old})
	if err != nil {
		t.Fatal(err)
	}
	e.scfg.ECHKeys, e.scfg.ECHKeySet = nil, set
	try := func(list []byte) (ECHStatus, error) {
		ccfg := e.ccfg.Clone()
		ccfg.ECHConfigList = list
		c, _, _, cerr, _ := echRun(t, ccfg, e.scfg, nil, nil)
		return c.info.ECH, cerr
	}
	if st, err := try(e.list); err != nil || st != ECHAccepted {
		t.Fatalf("before the rotation: %q, %v", st, err)
	}
	oldKept := old
	oldKept.SendAsRetry = false
	if err := set.Set([]ECHKey{next, oldKept}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(set.RetryConfigList(), echList(t, next)) {
		t.Fatal("the retry list is not the new key's config")
	}
	if st, err := try(e.list); err != nil || st != ECHAccepted {
		t.Fatalf("old config during the overlap: %q, %v", st, err)
	}
	if err := set.Set([]ECHKey{next}); err != nil {
		t.Fatal(err)
	}
	_, err = try(e.list)
	var rej *ECHRejectedError
	if !errors.As(err, &rej) || !bytes.Equal(rej.RetryConfigList, echList(t, next)) {
		t.Fatalf("old config after the overlap: %v, want a rejection with the new config", err)
	}
	if st, err := try(rej.RetryConfigList); err != nil || st != ECHAccepted {
		t.Fatalf("retry with the new config: %q, %v", st, err)
	}
	bad := next
	bad.PrivateKey = old.PrivateKey
	if err := set.Set([]ECHKey{bad}); err == nil || !bytes.Equal(set.RetryConfigList(), echList(t, next)) {
		t.Fatalf("a key with another config's private key: %v; the set must keep its keys", err)
	}
}

func TestECHConfigCheck(t *testing.T) {
	e := newECHSetup(t)
	if err := e.scfg.Check(); err != nil {
		t.Fatal(err)
	}
	if err := e.ccfg.Check(); err != nil {
		t.Fatal(err)
	}
	bad := e.key
	bad.PrivateKey = newECHKey(t, 1).PrivateKey
	if err := (&Config{ECHKeys: []ECHKey{bad}}).Check(); err == nil || !strings.Contains(err.Error(), "ECHKeys") {
		t.Fatalf("a key with another's private key: %v", err)
	}
	if err := (&Config{ECHConfigList: []byte{0, 0}}).Check(); err == nil || !strings.Contains(err.Error(), "ECHConfigList") {
		t.Fatalf("an empty config list: %v", err)
	}
}

// ECH with the middlebox compatibility mode: the inner takes the outer's
// legacy_session_id back, with and without a HelloRetryRequest.
func TestECHMiddleboxCompat(t *testing.T) {
	for _, hrr := range []bool{false, true} {
		e := newECHSetup(t)
		e.ccfg.MiddleboxCompat = true
		if hrr {
			e.scfg.Groups = []CurveID{P256}
		}
		c, s, _, cerr, serr := echRun(t, e.ccfg, e.scfg, nil, nil)
		if cerr != nil || serr != nil || c.info.ECH != ECHAccepted || s.info.ServerName != echInnerName {
			t.Fatalf("retry %v: client %v, server %v, ECH %q", hrr, cerr, serr, c.info.ECH)
		}
	}
}
