package tls13

// Interop with Go's crypto/tls, in process, both roles.

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
)

var goGroups = map[CurveID]tls.CurveID{
	X25519: tls.X25519, P256: tls.CurveP256, P384: tls.CurveP384, X25519MLKEM768: tls.X25519MLKEM768,
}

func goServer(t *testing.T, cfg *tls.Config, handler func(*tls.Conn)) string {
	t.Helper()
	return serve(t, loopback(t), func(c net.Conn) {
		tc := tls.Server(c, cfg)
		if err := tc.Handshake(); err != nil {
			return
		}
		handler(tc)
	})
}

func goEcho(c *tls.Conn) { echo(c) }

func TestGoServerSuitesAndGroups(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, s := range []CipherSuite{TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256} {
		for _, g := range []CurveID{X25519, P256, P384, X25519MLKEM768} {
			t.Run(fmt.Sprintf("%s/%s", s.String(), g.String()), func(t *testing.T) {
				addr := goServer(t, &tls.Config{
					Certificates: []tls.Certificate{p.goSrv}, MinVersion: tls.VersionTLS13,
					CurvePreferences: []tls.CurveID{goGroups[g]},
				}, goEcho)
				cfg := clientConfig(p)
				cfg.CipherSuites = []CipherSuite{s}
				cfg.Groups = []CurveID{g}
				c, err := Dial("tcp", addr, cfg)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				roundTrip(t, c, "hello over "+s.String())
				st := c.ConnectionState()
				if st.CipherSuite != s || st.Group != g {
					t.Fatalf("negotiated %s/%s", st.CipherSuite.String(), st.Group.String())
				}
				if len(st.VerifiedChains) == 0 {
					t.Fatal("no verified chain")
				}
			})
		}
	}
}

func TestGoClientSuitesAndGroups(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	for _, s := range []CipherSuite{TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256} {
		for _, g := range []CurveID{X25519, P256, P384, X25519MLKEM768} {
			t.Run(fmt.Sprintf("%s/%s", s.String(), g.String()), func(t *testing.T) {
				scfg := serverConfig(p)
				scfg.CipherSuites = []CipherSuite{s}
				ln := NewListener(loopback(t), scfg)
				addr := serve(t, ln, echo)
				c, err := tls.Dial("tcp", addr, &tls.Config{
					RootCAs: p.pool(), ServerName: "localhost", MinVersion: tls.VersionTLS13,
					CurvePreferences: []tls.CurveID{goGroups[g]},
				})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				roundTrip(t, c, "hello from crypto/tls")
				st := c.ConnectionState()
				if CipherSuite(st.CipherSuite) != s || CurveID(st.CurveID) != g {
					t.Fatalf("negotiated %x/%v", st.CipherSuite, st.CurveID)
				}
			})
		}
	}
}

func TestGoSignatureSchemes(t *testing.T) {
	for _, kt := range []string{"ecdsa-p256", "ecdsa-p384", "ed25519", "rsa2048"} {
		t.Run(kt, func(t *testing.T) {
			p := getPKI(t, kt)
			// ztls client, Go server.
			addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}, MinVersion: tls.VersionTLS13}, goEcho)
			c, err := Dial("tcp", addr, clientConfig(p))
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, "x")
			c.Close()
			// Go client, ztls server.
			addr = serve(t, NewListener(loopback(t), serverConfig(p)), echo)
			gc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost"})
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, gc, "y")
			gc.Close()
		})
	}
}

func TestGoHelloRetryRequest(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	t.Run("ztls client", func(t *testing.T) {
		addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}, CurvePreferences: []tls.CurveID{tls.CurveP256}}, goEcho)
		cfg := clientConfig(p)
		cfg.Groups = []CurveID{X25519, P256}
		c, err := Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		roundTrip(t, c, "after HRR")
		if !hasEvent(c.Trace(), EventHelloRetryRequest) || c.ConnectionState().Group != P256 {
			t.Fatalf("no HRR to P-256: %+v", c.Trace())
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		scfg := serverConfig(p)
		scfg.Groups = []CurveID{P256}
		var srv *Conn
		done := make(chan struct{})
		addr := serve(t, loopback(t), func(raw net.Conn) {
			srv = Server(raw, scfg)
			srv.Handshake()
			close(done)
			echo(srv)
		})
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost",
			CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		roundTrip(t, c, "after HRR")
		<-done
		if !hasEvent(srv.Trace(), EventHelloRetryRequest) || c.ConnectionState().CurveID != tls.CurveP256 {
			t.Fatalf("server did not retry for P-256")
		}
	})
}

func TestGoClientCertificates(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	t.Run("ztls client", func(t *testing.T) {
		addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv},
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool()}, goEcho)
		cfg := clientConfig(p)
		cfg.Certificates = []Certificate{p.client}
		c, err := Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, "with client cert")
		c.Close()
		// Without a certificate the Go server refuses.
		c, err = Dial("tcp", addr, clientConfig(p))
		if err == nil {
			_, err = c.Read(make([]byte, 1))
			c.Close()
		}
		if err == nil {
			t.Fatal("Go server accepted a client without certificate")
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		scfg := serverConfig(p)
		scfg.ClientAuth = RequireAndVerifyClientCert
		scfg.ClientCAs = p.pool()
		addr := serve(t, NewListener(loopback(t), scfg), echo)
		gc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost", Certificates: []tls.Certificate{p.goCli}})
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, gc, "client cert to ztls")
		gc.Close()
		gc, err = tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost"})
		if err == nil {
			_, err = gc.Read(make([]byte, 1))
			gc.Close()
		}
		if err == nil {
			t.Fatal("ztls server accepted a client without certificate")
		}
	})
}

func TestGoALPN(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}, NextProtos: []string{"h2", "http/1.1"}}, goEcho)
	cfg := clientConfig(p)
	cfg.NextProtos = []string{"http/1.1"}
	c, err := Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "alpn")
	if got := c.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Fatalf("ALPN = %q", got)
	}
	c.Close()

	scfg := serverConfig(p)
	scfg.NextProtos = []string{"h2"}
	addr = serve(t, NewListener(loopback(t), scfg), echo)
	gc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost", NextProtos: []string{"http/1.1", "h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if got := gc.ConnectionState().NegotiatedProtocol; got != "h2" {
		t.Fatalf("ALPN = %q", got)
	}
}

func TestGoKeyUpdate(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}}, goEcho)
	c, err := Dial("tcp", addr, clientConfig(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	roundTrip(t, c, "before")
	for i := 0; i < 3; i++ {
		if err := c.KeyUpdate(true); err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c, fmt.Sprintf("after update %d", i))
	}
	n := 0
	for _, ev := range c.Trace() {
		if ev.Event == EventKeyUpdate {
			n++
		}
	}
	// Three of ours plus three answers from Go (update_requested).
	if n != 3 {
		t.Fatalf("%d KeyUpdates sent by us, want 3", n)
	}
}

func TestGoResumption(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	t.Run("ztls client", func(t *testing.T) {
		addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}}, goEcho)
		cfg := clientConfig(p)
		cfg.ClientSessionCache = NewLRUClientSessionCache(4)
		for i := 0; i < 2; i++ {
			c, err := Dial("tcp", addr, cfg)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, "resume me") // reading also takes the ticket in
			if got := c.ConnectionState().DidResume; got != (i == 1) {
				t.Fatalf("connection %d: DidResume = %v", i, got)
			}
			c.Close()
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		addr := serve(t, NewListener(loopback(t), serverConfig(p)), echo)
		gcfg := &tls.Config{RootCAs: p.pool(), ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		for i := 0; i < 2; i++ {
			c, err := tls.Dial("tcp", addr, gcfg)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, "resume me")
			if got := c.ConnectionState().DidResume; got != (i == 1) {
				t.Fatalf("connection %d: DidResume = %v", i, got)
			}
			c.Close()
		}
	})
}

func TestGoExporter(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	got := make(chan []byte, 1)
	addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}}, func(c *tls.Conn) {
		st := c.ConnectionState()
		k, _ := st.ExportKeyingMaterial("EXPERIMENTAL test", []byte("ctx"), 32)
		got <- k
		io.Copy(io.Discard, c)
	})
	c, err := Dial("tcp", addr, clientConfig(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mine, err := c.ExportKeyingMaterial("EXPERIMENTAL test", []byte("ctx"), 32)
	if err != nil {
		t.Fatal(err)
	}
	if theirs := <-got; string(theirs) != string(mine) {
		t.Fatalf("exporters differ:\n%x\n%x", mine, theirs)
	}
}

// TestGoP521: crypto/tls with only CurveP521, both roles.
func TestGoP521(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}, CurvePreferences: []tls.CurveID{tls.CurveP521}}, goEcho)
	cfg := clientConfig(p)
	cfg.Groups = []CurveID{P521}
	c, err := Dial("tcp", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c, "p521 client")
	if g := c.ConnectionState().Group; g != P521 {
		t.Fatalf("negotiated %s", g.String())
	}
	c.Close()

	addr = serve(t, NewListener(loopback(t), serverConfig(p)), echo) // default groups
	gc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost",
		CurvePreferences: []tls.CurveID{tls.CurveP521}})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	roundTrip(t, gc, "p521 server")
	if g := gc.ConnectionState().CurveID; g != tls.CurveP521 {
		t.Fatalf("negotiated %v", g)
	}
}

// TestGoIgnoresCertCompression: crypto/tls does not implement RFC 8879
// (no compress_certificate in its source), so it must ignore the
// extension in our ClientHello and CertificateRequest, and we send it
// uncompressed Certificates.
func TestGoIgnoresCertCompression(t *testing.T) {
	p := getPKI(t, "ecdsa-p256")
	all := []CertCompressionAlgorithm{CertCompressionZlib, CertCompressionBrotli, CertCompressionZstd}
	t.Run("ztls client", func(t *testing.T) {
		addr := goServer(t, &tls.Config{Certificates: []tls.Certificate{p.goSrv}, MinVersion: tls.VersionTLS13,
			ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.pool()}, goEcho)
		cfg := clientConfig(p)
		cfg.Certificates = []Certificate{p.client}
		cfg.CertificateCompression = all
		c, err := Dial("tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		roundTrip(t, c, "compress")
		if st := c.ConnectionState(); st.CertificateCompression != 0 || st.ClientCertificateCompression != 0 {
			t.Fatalf("compression %v/%v with crypto/tls", st.CertificateCompression, st.ClientCertificateCompression)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		scfg := serverConfig(p)
		scfg.ClientAuth = RequireAndVerifyClientCert
		scfg.ClientCAs = p.pool()
		scfg.CertificateCompression = all
		addr := serve(t, NewListener(loopback(t), scfg), echo)
		gc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: p.pool(), ServerName: "localhost",
			Certificates: []tls.Certificate{p.goCli}})
		if err != nil {
			t.Fatal(err)
		}
		defer gc.Close()
		roundTrip(t, gc, "compress")
	})
}
