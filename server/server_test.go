package server

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
)

// start serves handler on a loopback listener; it returns the server, the
// client's configuration and where to dial.
func start(t *testing.T, handler Handler) (*Server, *tls13.Config, string, chan error) {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	leaf := ca.Issue(t, testpki.LeafOpts{})
	cfg := &tls13.Config{Certificates: []tls13.Certificate{{Chain: leaf.Chain, PrivateKey: leaf.Key, Leaf: leaf.Cert}}}
	srv, err := New(Config{TLS: func() *tls13.Config { return cfg }, Handler: handler})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return srv, &tls13.Config{RootCAs: ca.Pool(), ServerName: "localhost"}, ln.Addr().String(), served
}

func dial(t *testing.T, addr string, cfg *tls13.Config) *tls13.Conn {
	t.Helper()
	c, err := tls13.Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestServeAnswers(t *testing.T) {
	_, ccfg, addr, _ := start(t, func(c *Conn) {
		if c.FinishHandshake() != nil {
			return
		}
		buf := make([]byte, 10)
		n, _ := c.Read(buf)
		c.Write([]byte(strings.ToUpper(string(buf[:n]))))
		c.CloseWrite()
	})
	c := dial(t, addr, ccfg)
	c.Write([]byte("hello"))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "HELLO" {
		t.Fatalf("got %q, %v", got, err)
	}
}

// Shutdown lets a connection in flight finish, and Serve returns
// ErrServerClosed.
func TestShutdownDrains(t *testing.T) {
	inHandler, release := make(chan struct{}), make(chan struct{})
	srv, ccfg, addr, served := start(t, func(c *Conn) {
		if c.FinishHandshake() != nil {
			return
		}
		close(inHandler)
		<-release
		c.Write([]byte("done"))
		c.CloseWrite()
	})
	c := dial(t, addr, ccfg)
	c.Write([]byte("x")) // the client's Finished goes with it
	<-inHandler
	if n := srv.Open(); n != 1 {
		t.Errorf("Open() = %d, want 1", n)
	}
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(context.Background()) }()
	if err := <-served; !errors.Is(err, ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
	if _, err := net.Dial("tcp", addr); err == nil {
		t.Error("a new connection was accepted after Shutdown")
	}
	close(release)
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "done" {
		t.Fatalf("the connection in flight got %q, %v", got, err)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// At ctx's end Shutdown closes what is left and says how many.
func TestShutdownCutsAtDeadline(t *testing.T) {
	inHandler := make(chan struct{})
	srv, ccfg, addr, _ := start(t, func(c *Conn) {
		if c.FinishHandshake() != nil {
			return
		}
		close(inHandler)
		io.Copy(io.Discard, c) // until the server cuts it
	})
	c := dial(t, addr, ccfg)
	c.Write([]byte("x"))
	<-inHandler
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := srv.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "1 connections cut") || !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown: %v", err)
	}
	if n := srv.Open(); n != 0 {
		t.Errorf("Open() = %d after Shutdown", n)
	}
}

func TestNewRefuses(t *testing.T) {
	cfg := func() *tls13.Config { return &tls13.Config{} }
	h := func(*Conn) {}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Handler: h}, "Config.TLS"},
		{Config{TLS: cfg}, "Config.Handler is required"},
		{Config{TLS: cfg, Handler: h, Limits: Limits{Max: -1}}, "Limits.Max -1: want 0 (no limit) or more"},
		{Config{TLS: cfg, Handler: h, Limits: Limits{PerNetwork: -2}}, "Limits.PerNetwork -2"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want %q", c.cfg.Limits, err, c.want)
		}
	}
}
