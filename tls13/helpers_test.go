package tls13

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// testPKI is one CA with a server and a client leaf, shared by the tests.
type testPKI struct {
	ca     *testpki.CA
	server Certificate
	client Certificate
	goSrv  tls.Certificate
	goCli  tls.Certificate
}

var (
	pkiOnce  sync.Map // key type -> *testPKI
	pkiMutex sync.Mutex
)

func getPKI(t testing.TB, keyType string) *testPKI {
	pkiMutex.Lock()
	defer pkiMutex.Unlock()
	if p, ok := pkiOnce.Load(keyType); ok {
		return p.(*testPKI)
	}
	ca := testpki.NewCA(t, "ecdsa-p256")
	srv := ca.Issue(t, testpki.LeafOpts{KeyType: keyType})
	cli := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, Client: true, DNSNames: []string{"client.test"}})
	p := &testPKI{
		ca:     ca,
		server: Certificate{Chain: srv.Chain, PrivateKey: srv.Key, Leaf: srv.Cert},
		client: Certificate{Chain: cli.Chain, PrivateKey: cli.Key, Leaf: cli.Cert},
		goSrv:  tls.Certificate{Certificate: srv.Chain, PrivateKey: srv.Key, Leaf: srv.Cert},
		goCli:  tls.Certificate{Certificate: cli.Chain, PrivateKey: cli.Key, Leaf: cli.Cert},
	}
	pkiOnce.Store(keyType, p)
	return p
}

func (p *testPKI) pool() *x509.CertPool { return p.ca.Pool() }

// serve runs handler on every connection accepted on a loopback listener
// until the test ends.
func serve(t testing.TB, ln net.Listener, handler func(net.Conn)) string {
	t.Helper()
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				handler(c)
			}()
		}
	}()
	return ln.Addr().String()
}

func loopback(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// echo copies everything back until EOF.
func echo(c net.Conn) {
	buf := make([]byte, 32*1024)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// roundTrip writes msg and reads the same number of bytes back.
func roundTrip(t testing.TB, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read: %v", err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

// pair makes a connected client and server over loopback TCP and runs
// both handshakes; it returns the errors of both sides.
func pair(t testing.TB, ccfg, scfg *Config) (*Conn, *Conn, error, error) {
	t.Helper()
	ln := loopback(t)
	defer ln.Close()
	var srv *Conn
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		raw, err := ln.Accept()
		if err != nil {
			serr = err
			return
		}
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		srv = Server(raw, scfg)
		serr = srv.Handshake()
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	cli := Client(raw, ccfg)
	cerr := cli.Handshake()
	if cerr != nil {
		raw.Close()
	}
	<-done
	t.Cleanup(func() {
		cli.Close()
		if srv != nil {
			srv.Close()
		}
	})
	return cli, srv, cerr, serr
}

func clientConfig(p *testPKI) *Config {
	return &Config{RootCAs: p.pool(), ServerName: "localhost"}
}

func serverConfig(p *testPKI) *Config {
	return &Config{Certificates: []Certificate{p.server}}
}

func hasEvent(tr []TraceEvent, ev Event) bool {
	for _, x := range tr {
		if x.Event == ev {
			return true
		}
	}
	return false
}

// alertOf returns the alert an error carries (sent or received), or -1.
func alertOf(err error) int {
	var le *LocalError
	if errors.As(err, &le) {
		return int(le.Alert)
	}
	var ae *AlertError
	if errors.As(err, &ae) {
		return int(ae.Alert)
	}
	return -1
}

func ctxTimeout(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// countEvents counts ev in a trace.
func countEvents(tr []TraceEvent, ev Event) int {
	n := 0
	for _, x := range tr {
		if x.Event == ev {
			n++
		}
	}
	return n
}
