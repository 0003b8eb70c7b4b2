package ech

// Interop with Go's crypto/tls ECH (both roles are Go's here; this package
// supplies the configs, the keys, and the checks of what Go put on the
// wire): a config this package makes is one Go's client and server use; a
// retry config list Go's server sends parses here; and a ClientHelloOuter
// Go's client sends decrypts and decodes here, with the acceptance signal
// Go's server sends recomputed here from the transcript.

import (
	"bytes"
	"crypto"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/crypto/cryptobyte"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

const (
	innerName  = "secret.ztls.test"
	publicName = "public.ztls.test"
)

type goPeers struct {
	ca     *testpki.CA
	server *tls.Config
}

func newGoPeers(t *testing.T, keys ...*Key) *goPeers {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{innerName, publicName}})
	cfg := &tls.Config{MinVersion: tls.VersionTLS13,
		Certificates: []tls.Certificate{{Certificate: leaf.Chain, PrivateKey: leaf.Key}}}
	for _, k := range keys {
		priv, err := k.PrivateKeyBytes()
		if err != nil {
			t.Fatal(err)
		}
		cfg.EncryptedClientHelloKeys = append(cfg.EncryptedClientHelloKeys,
			tls.EncryptedClientHelloKey{Config: k.Config.Raw, PrivateKey: priv, SendAsRetry: true})
	}
	return &goPeers{ca: ca, server: cfg}
}

func (p *goPeers) client(list []byte) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS13, ServerName: innerName, RootCAs: p.ca.Pool(),
		EncryptedClientHelloConfigList: list}
}

// serve accepts one connection on ln and completes the handshake.
func (p *goPeers) serve(t *testing.T, ln net.Listener) <-chan tls.ConnectionState {
	out := make(chan tls.ConnectionState, 1)
	go func() {
		defer close(out)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second)) // real time: a socket Deadline(
		s := tls.Server(c, p.server)
		if s.Handshake() == nil {
			out <- s.ConnectionState()
		}
	}()
	return out
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func TestGoAcceptsOurConfig(t *testing.T) {
	k := mustKey(t, 5, publicName)
	p := newGoPeers(t, k)
	ln := listen(t)
	states := p.serve(t, ln)
	list, err := MarshalConfigList([]*Config{k.Config})
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", ln.Addr().String(), p.client(list))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.ConnectionState().ECHAccepted {
		t.Fatal("Go's client: ECH not accepted")
	}
	if st, ok := <-states; !ok || !st.ECHAccepted || st.ServerName != innerName {
		t.Fatalf("Go's server: accepted %v, server name %q", st.ECHAccepted, st.ServerName)
	}
}

func TestGoRetryConfigsParse(t *testing.T) {
	served := mustKey(t, 5, publicName)
	stale := mustKey(t, 5, publicName) // same id, another key: rotated away
	p := newGoPeers(t, served)
	ln := listen(t)
	p.serve(t, ln)
	list, _ := MarshalConfigList([]*Config{stale.Config})
	_, err := tls.Dial("tcp", ln.Addr().String(), p.client(list))
	var rej *tls.ECHRejectionError
	if !errors.As(err, &rej) {
		t.Fatalf("dial with a stale config: %v, want an ECH rejection", err)
	}
	cs, err := ParseConfigList(rej.RetryConfigList)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || !bytes.Equal(cs[0].Raw, served.Config.Raw) {
		t.Fatalf("retry configs: %d, want the served config byte for byte", len(cs))
	}
}

// TestDecryptGoClientHello puts a recording proxy between Go's client and
// server: it opens the ClientHelloOuter with this package, rebuilds the
// ClientHelloInner, and recomputes the server's acceptance signal.
func TestDecryptGoClientHello(t *testing.T) {
	k := mustKey(t, 9, publicName)
	p := newGoPeers(t, k)
	backend := listen(t)
	p.serve(t, backend)
	front := listen(t)
	seen := make(chan [2][]byte, 1) // the ClientHello, the ServerHello
	go proxyFirstFlights(front, backend.Addr().String(), seen)

	list, _ := MarshalConfigList([]*Config{k.Config})
	c, err := tls.Dial("tcp", front.Addr().String(), p.client(list))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !c.ConnectionState().ECHAccepted {
		t.Fatal("ECH not accepted through the proxy")
	}
	msgs := <-seen
	outerBody := msgs[0][4:]
	ext, aad := outerECH(t, outerBody)
	if ext.ConfigID != 9 {
		t.Fatalf("config id %d", ext.ConfigID)
	}
	sc, err := NewServerContext(k, ext.Suite, ext.Enc)
	if err != nil {
		t.Fatal(err)
	}
	encoded, err := sc.Open(aad, ext.Payload)
	if err != nil {
		t.Fatalf("opening Go's payload: %v", err)
	}
	// Go pads less than RFC 9849, Section 6.1.3 recommends (a SHOULD):
	// its encoded inner need not be a multiple of 32 bytes.
	t.Logf("Go's EncodedClientHelloInner: %d bytes", len(encoded))
	inner, err := DecodeInner(encoded, outerBody)
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHelloBody(inner)
	if err != nil {
		t.Fatal(err)
	}
	if sni := serverName(t, h); sni != innerName {
		t.Fatalf("inner server name %q, want %q", sni, innerName)
	}
	if sni := serverName(t, mustParse(t, outerBody)); sni != publicName {
		t.Fatalf("outer server name %q, want the public name", sni)
	}
	checkConfirmation(t, inner, msgs[1])
}

func mustParse(t *testing.T, b []byte) *helloBody {
	t.Helper()
	h, err := parseHelloBody(b)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// outerECH returns the outer extension and the ClientHelloOuterAAD: the
// body with the payload's bytes zeroed (RFC 9849, Section 5.2).
func outerECH(t *testing.T, body []byte) (*ClientExtension, []byte) {
	t.Helper()
	h := mustParse(t, body)
	e, ok := h.ext(ExtEncryptedClientHello)
	if !ok {
		t.Fatal("Go's ClientHelloOuter has no encrypted_client_hello")
	}
	ext, err := ParseClientExtension(e.data)
	if err != nil || ext.Type != TypeOuter {
		t.Fatalf("outer extension: %+v, %v", ext, err)
	}
	i := bytes.Index(body, ext.Payload)
	aad := append([]byte(nil), body...)
	clear(aad[i : i+len(ext.Payload)])
	return ext, aad
}

func serverName(t *testing.T, h *helloBody) string {
	t.Helper()
	e, ok := h.ext(extServerName)
	if !ok {
		return ""
	}
	s := cryptobyte.String(e.data)
	var list, name cryptobyte.String
	var typ uint8
	if !s.ReadUint16LengthPrefixed(&list) || !list.ReadUint8(&typ) || !list.ReadUint16LengthPrefixed(&name) {
		t.Fatal("malformed server_name")
	}
	return string(name)
}

// checkConfirmation recomputes ServerHello.random's last 8 bytes from the
// ClientHelloInner and the ServerHello with those bytes zeroed.
func checkConfirmation(t *testing.T, innerBody, serverHello []byte) {
	t.Helper()
	suite := uint16(serverHello[4+2+32+1+int(serverHello[4+2+32])])<<8 | uint16(serverHello[4+2+32+1+int(serverHello[4+2+32])+1])
	h := crypto.SHA256
	if suite == 0x1302 {
		h = crypto.SHA384
	}
	innerMsg := append([]byte{1, byte(len(innerBody) >> 16), byte(len(innerBody) >> 8), byte(len(innerBody))}, innerBody...)
	sh := append([]byte(nil), serverHello...)
	got := append([]byte(nil), sh[4+2+24:4+2+32]...)
	clear(sh[4+2+24 : 4+2+32])
	th := h.New()
	th.Write(innerMsg)
	th.Write(sh)
	want := AcceptConfirmation(h, mustParse(t, innerBody).random, th.Sum(nil))
	if !bytes.Equal(got, want) {
		t.Fatalf("acceptance signal %x, recomputed %x", got, want)
	}
	// A signal over another transcript differs: the check can fail.
	if bytes.Equal(AcceptConfirmationHRR(h, mustParse(t, innerBody).random, th.Sum(nil)), got) {
		t.Fatal("the HelloRetryRequest label gives the same signal")
	}
}

// proxyFirstFlights relays one connection and reports the first
// handshake message each way (the ClientHello, the ServerHello).
func proxyFirstFlights(front net.Listener, backend string, seen chan<- [2][]byte) {
	c, err := front.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	s, err := net.Dial("tcp", backend)
	if err != nil {
		return
	}
	defer s.Close()
	deadline := time.Now().Add(10 * time.Second) // real time: a socket Deadline(
	c.SetDeadline(deadline)
	s.SetDeadline(deadline)
	ch, err := relayFirstRecord(s, c)
	if err != nil {
		return
	}
	sh, err := relayFirstRecord(c, s)
	if err != nil {
		return
	}
	seen <- [2][]byte{ch, sh}
	go io.Copy(s, c)
	io.Copy(c, s)
}

// relayFirstRecord copies one TLS record from src to dst and returns the
// first handshake message in it.
func relayFirstRecord(dst io.Writer, src io.Reader) ([]byte, error) {
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(src, hdr); err != nil {
		return nil, err
	}
	body := make([]byte, int(hdr[3])<<8|int(hdr[4]))
	if _, err := io.ReadFull(src, body); err != nil {
		return nil, err
	}
	if _, err := dst.Write(append(hdr, body...)); err != nil {
		return nil, err
	}
	if len(body) < 4 {
		return nil, errors.New("short handshake record")
	}
	n := int(body[1])<<16 | int(body[2])<<8 | int(body[3])
	if 4+n > len(body) {
		return nil, errors.New("handshake message split across records")
	}
	return body[:4+n], nil
}
