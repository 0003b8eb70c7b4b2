package server

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// splitLab is a split-mode deployment on loopback: a client-facing
// server with the ECH keys and the public name's certificate, and two
// backends (ECHBackend, the inner names' certificate, no ECH key), the
// second taking only P-256 so that clients get a HelloRetryRequest.
type splitLab struct {
	ca       *testpki.CA
	inner    *testpki.Leaf
	set      *tls13.ECHKeySet
	list     []byte
	front    string
	requests atomic.Int64
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

func startSplitLab(t *testing.T) *splitLab {
	ca := testpki.NewCA(t, "ecdsa-p256")
	l := &splitLab{ca: ca, inner: ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"inner.test", "hrr.test"}})}
	public := ca.Issue(t, testpki.LeafOpts{DNSNames: []string{"public.test"}})
	cert := func(x *testpki.Leaf) []tls13.Certificate {
		return []tls13.Certificate{{Chain: x.Chain, PrivateKey: x.Key, Leaf: x.Cert}}
	}
	backends := map[string]string{}
	for name, groups := range map[string][]tls13.CurveID{"inner.test": nil, "hrr.test": {tls13.P256}} {
		cfg := &tls13.Config{Certificates: cert(l.inner), ECHBackend: true, Groups: groups}
		srv, err := New(Config{TLS: func() *tls13.Config { return cfg }, Handler: l.answer})
		if err != nil {
			t.Fatal(err)
		}
		ln := listen(t)
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		backends[name] = ln.Addr().String()
	}
	key, err := tls13.GenerateECHKey(9, "public.test", 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.set, err = tls13.NewECHKeySet([]tls13.ECHKey{key}); err != nil {
		t.Fatal(err)
	}
	l.list = l.set.RetryConfigList()
	pub := &tls13.Config{Certificates: cert(public), ECHKeySet: l.set}
	front := &Split{ECH: l.set, Backends: backends, Public: func(c net.Conn) {
		tls13.Server(c, pub).Handshake()
		c.Close()
	}}
	ln := listen(t)
	go front.Serve(ln)
	l.front = ln.Addr().String()
	return l
}

// answer is the backends' handler: one request, answered in upper case.
func (l *splitLab) answer(c *Conn) {
	if c.FinishHandshake() != nil {
		return
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	if n > 0 {
		l.requests.Add(1)
		c.Write([]byte(strings.ToUpper(string(buf[:n]))))
	}
	c.CloseWrite()
}

// get sends one request through the front with the ECHConfigList list.
func (l *splitLab) get(t *testing.T, name string, list []byte) (tls13.ConnectionState, error) {
	t.Helper()
	c, err := tls13.Dial("tcp", l.front, &tls13.Config{RootCAs: l.ca.Pool(), ServerName: name, ECHConfigList: list})
	if err != nil {
		return tls13.ConnectionState{}, err
	}
	defer c.Close()
	c.Write([]byte("hello"))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("%s: answer %q, %v", name, got, err)
	}
	return c.ConnectionState(), nil
}

// TestSplitModeECH: ECH through the client-facing server to the backend of
// the inner name, with this package's client (also after the backend's
// HelloRetryRequest) and with Go's crypto/tls client; a stale config is
// rejected by the front as the public name, with retry configs that then
// reach the backend.
func TestSplitModeECH(t *testing.T) {
	l := startSplitLab(t)
	for _, name := range []string{"inner.test", "hrr.test"} {
		st, err := l.get(t, name, l.list)
		if err != nil || st.ECH != tls13.ECHAccepted || !st.PeerCertificates[0].Equal(l.inner.Cert) {
			t.Fatalf("%s: %v, ECH %q", name, err, st.ECH)
		}
		if name == "hrr.test" && st.Group != tls13.P256 {
			t.Fatalf("hrr.test: group %v, want the P-256 the HelloRetryRequest asked for", st.Group)
		}
	}

	gc, err := tls.Dial("tcp", l.front, &tls.Config{RootCAs: l.ca.Pool(), ServerName: "inner.test", MinVersion: tls.VersionTLS13,
		EncryptedClientHelloConfigList: l.list})
	if err != nil {
		t.Fatalf("crypto/tls through the split front: %v", err)
	}
	gc.Write([]byte("go"))
	got, _ := io.ReadAll(gc)
	gc.Close()
	if !gc.ConnectionState().ECHAccepted || string(got) != "GO" {
		t.Fatalf("crypto/tls: ECH accepted %v, answer %q", gc.ConnectionState().ECHAccepted, got)
	}

	stale, err := tls13.GenerateECHKey(9, "public.test", 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	staleList, _ := tls13.MarshalECHConfigList([]tls13.ECHKey{stale})
	_, err = l.get(t, "inner.test", staleList)
	var rej *tls13.ECHRejectedError
	if !errors.As(err, &rej) || string(rej.RetryConfigList) != string(l.list) {
		t.Fatalf("stale config: %v, want a rejection with the front's configs", err)
	}
	if st, err := l.get(t, "inner.test", rej.RetryConfigList); err != nil || st.ECH != tls13.ECHAccepted {
		t.Fatalf("retry: %v, ECH %q", err, st.ECH)
	}
	if n := l.requests.Load(); n != 4 {
		t.Fatalf("the backends answered %d requests, want 4 (the rejected connection delivered none)", n)
	}
}

// FuzzSplitReadHello: the front's record reader never panics, and a
// ClientHello it returns is whole: its length is its header's.
func FuzzSplitReadHello(f *testing.F) {
	f.Add([]byte{22, 3, 1, 0, 8, 1, 0, 0, 4, 3, 3, 0, 0})
	f.Add(append([]byte{22, 3, 1, 0, 3, 1, 0, 0}, 22, 3, 1, 0, 3, 2, 3, 3))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, raw, err := readHello(bytes.NewReader(b))
		if err != nil {
			return
		}
		if len(msg) < 4 || len(msg) != 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) || msg[0] != 1 || !bytes.HasPrefix(b, raw) {
			t.Fatalf("readHello returned % x (raw % x)", msg, raw)
		}
	})
}
