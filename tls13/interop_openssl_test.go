//go:build linux

package tls13

// Interop with OpenSSL 3.0 (openssl s_server and s_client run as
// processes), both roles. s_server and s_client run in their interactive
// mode: what they receive goes to stdout, what they read on stdin goes to
// the peer, and single-letter stdin lines are commands (k/K: KeyUpdate).

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
)

var opensslSuites = map[CipherSuite]string{
	TLS_AES_128_GCM_SHA256:       "TLS_AES_128_GCM_SHA256",
	TLS_AES_256_GCM_SHA384:       "TLS_AES_256_GCM_SHA384",
	TLS_CHACHA20_POLY1305_SHA256: "TLS_CHACHA20_POLY1305_SHA256",
}

var opensslGroups = map[CurveID]string{X25519: "X25519", P256: "P-256", P384: "P-384"}

var interopSuites = []CipherSuite{TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256}

var interopGroups = []CurveID{X25519, P256, P384}

// opensslServer starts openssl s_server on a free loopback port.
func opensslServer(t *testing.T, f *interopFiles, extra ...string) *peerProc {
	t.Helper()
	return startServerProc(t, "openssl", func(port int) []string {
		return append([]string{"s_server", "-accept", fmt.Sprintf("127.0.0.1:%d", port),
			"-cert", f.srvCert, "-key", f.srvKey}, extra...)
	}, false)
}

// opensslClient starts openssl s_client against addr. It verifies the
// ztls server's chain and name. Lines sent to it must not start with
// Q, R, k or K (s_client commands).
func opensslClient(t *testing.T, f *interopFiles, addr string, extra ...string) *peerProc {
	t.Helper()
	return startProc(t, "openssl", append([]string{"s_client", "-connect", addr,
		"-CAfile", f.ca, "-servername", "localhost", "-verify_hostname", "localhost",
		"-verify_return_error"}, extra...), false)
}

// echoThrough sends a line through a client tool to the ztls echo server
// and waits for it to come back on the tool's stdout.
func echoThrough(p *peerProc, tag string) {
	p.t.Helper()
	line := "ping-through-" + p.name + "-" + tag
	p.send(line + "\n")
	p.waitOutput(line)
}

func TestOpenSSLSuitesAndGroups(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	for _, s := range interopSuites {
		for _, g := range interopGroups {
			name := fmt.Sprintf("%s/%s", s.String(), g.String())
			peerArgs := []string{"-ciphersuites", opensslSuites[s], "-groups", opensslGroups[g]}
			t.Run("ztls client/"+name, func(t *testing.T) {
				t.Parallel()
				srv := opensslServer(t, f, peerArgs...)
				cfg := clientConfig(f.p)
				cfg.CipherSuites = []CipherSuite{s}
				cfg.Groups = []CurveID{g}
				c := srv.mustDialZTLS(t, cfg)
				exchangeInteractive(t, c, srv, "suite")
				st := c.ConnectionState()
				if st.CipherSuite != s || st.Group != g || len(st.VerifiedChains) == 0 {
					srv.fatalf("negotiated %s/%s (verified chains: %d)", st.CipherSuite.String(), st.Group.String(), len(st.VerifiedChains))
				}
			})
			t.Run("ztls server/"+name, func(t *testing.T) {
				t.Parallel()
				scfg := serverConfig(f.p)
				scfg.CipherSuites = []CipherSuite{s}
				scfg.Groups = []CurveID{g}
				addr, results := startZTLSServer(t, scfg)
				cli := opensslClient(t, f, addr, peerArgs...)
				r := nextResult(t, results, cli)
				if r.err != nil {
					cli.fatalf("ztls server handshake: %v", r.err)
				}
				echoThrough(cli, "suite")
				cli.waitOutput("TLSv1.3, Cipher is " + opensslSuites[s])
				st := r.conn.ConnectionState()
				if st.CipherSuite != s || st.Group != g {
					cli.fatalf("negotiated %s/%s", st.CipherSuite.String(), st.Group.String())
				}
			})
		}
	}
}

func TestOpenSSLHelloRetryRequest(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		// s_server takes only P-256; ztls sends an x25519 share first.
		srv := opensslServer(t, f, "-groups", "P-256")
		cfg := clientConfig(f.p)
		cfg.Groups = []CurveID{X25519, P256}
		c := srv.mustDialZTLS(t, cfg)
		exchangeInteractive(t, c, srv, "hrr")
		if !hasEvent(c.Trace(), EventHelloRetryRequest) || c.ConnectionState().Group != P256 {
			srv.fatalf("no HelloRetryRequest to P-256: group %s, trace %v", c.ConnectionState().Group.String(), c.Trace())
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		// s_client sends one share, for its first group (x25519).
		scfg := serverConfig(f.p)
		scfg.Groups = []CurveID{P256}
		addr, results := startZTLSServer(t, scfg)
		cli := opensslClient(t, f, addr, "-groups", "X25519:P-256")
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "hrr")
		if !hasEvent(r.conn.Trace(), EventHelloRetryRequest) || r.conn.ConnectionState().Group != P256 {
			cli.fatalf("server did not retry for P-256: group %s", r.conn.ConnectionState().Group.String())
		}
	})
}

func TestOpenSSLClientCertificates(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-Verify", "2", "-CAfile", f.ca, "-verify_return_error")
		cfg := clientConfig(f.p)
		cfg.Certificates = []Certificate{f.p.client}
		c := srv.mustDialZTLS(t, cfg)
		exchangeInteractive(t, c, srv, "with-cert")
		srv.waitOutput("client.test") // s_server prints the client's subject
		c.Close()

		// Without a certificate s_server refuses: the client learns it on
		// its first read, since its handshake ends before the server checks.
		c, err := srv.dialZTLS(t, clientConfig(f.p))
		if err == nil {
			_, err = c.Read(make([]byte, 1))
		}
		if a := alertOf(err); a != int(AlertCertificateRequired) {
			srv.fatalf("without a certificate: err %v (alert %d), want certificate_required", err, a)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		scfg := serverConfig(f.p)
		scfg.ClientAuth = RequireAndVerifyClientCert
		scfg.ClientCAs = f.p.pool()
		addr, results := startZTLSServer(t, scfg)
		cli := opensslClient(t, f, addr, "-cert", f.cliCert, "-key", f.cliKey)
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "with-cert")
		st := r.conn.ConnectionState()
		if len(st.VerifiedChains) == 0 || st.PeerCertificates[0].DNSNames[0] != "client.test" {
			cli.fatalf("client certificate not verified: %+v", st.PeerCertificates)
		}

		cli = opensslClient(t, f, addr)
		r = nextResult(t, results, cli)
		if a := alertOf(r.err); a != int(AlertCertificateRequired) {
			cli.fatalf("without a certificate: err %v (alert %d), want certificate_required", r.err, a)
		}
		if cli.wait() == nil {
			cli.fatalf("s_client succeeded without the certificate the server requires")
		}
	})
}

func TestOpenSSLALPN(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-alpn", "h2,http/1.1")
		cfg := clientConfig(f.p)
		cfg.NextProtos = []string{"http/1.1"}
		c := srv.mustDialZTLS(t, cfg)
		exchangeInteractive(t, c, srv, "alpn")
		if got := c.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
			srv.fatalf("ALPN = %q, want http/1.1", got)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		scfg := serverConfig(f.p)
		scfg.NextProtos = []string{"h2"}
		addr, results := startZTLSServer(t, scfg)
		cli := opensslClient(t, f, addr, "-alpn", "http/1.1,h2")
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "alpn")
		cli.waitOutput("ALPN protocol: h2")
		if got := r.conn.ConnectionState().NegotiatedProtocol; got != "h2" {
			cli.fatalf("ALPN = %q, want h2", got)
		}
	})
}

func TestOpenSSLKeyUpdate(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f)
		c := srv.mustDialZTLS(t, clientConfig(f.p))
		exchangeInteractive(t, c, srv, "before")
		// Ours, with update_requested: OpenSSL must follow with its own.
		for i := range 2 {
			if err := c.KeyUpdate(true); err != nil {
				t.Fatal(err)
			}
			exchangeInteractive(t, c, srv, fmt.Sprintf("sent-%d", i))
		}
		if n := countEvents(c.Trace(), EventKeyUpdate); n != 2 {
			srv.fatalf("%d KeyUpdates in trace, want 2", n)
		}
		// s_server's "k": a KeyUpdate without request; ztls must switch
		// its read key (the next line decrypts) and send none back.
		srv.sendCommand("k\n")
		exchangeInteractive(t, c, srv, "after-k")
		if n := countEvents(c.Trace(), EventKeyUpdate); n != 2 {
			srv.fatalf("%d KeyUpdates in trace after k, want 2", n)
		}
		// "K" requests an update: ztls answers with its own before its
		// next data (RFC 8446, Section 4.6.3), this exchange's or, when
		// the request arrived after ztls wrote, the next one's.
		srv.sendCommand("K\n")
		exchangeInteractive(t, c, srv, "after-K")
		exchangeInteractive(t, c, srv, "after-K-answer")
		if n := countEvents(c.Trace(), EventKeyUpdate); n != 3 {
			srv.fatalf("%d KeyUpdates in trace after K, want 3", n)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p))
		cli := opensslClient(t, f, addr)
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "before")
		if err := r.conn.KeyUpdate(true); err != nil {
			t.Fatal(err)
		}
		echoThrough(cli, "after-server-update")
		cli.sendCommand("K\n")
		cli.waitOutputN("KEYUPDATE", 1)
		echoThrough(cli, "after-K")
		cli.sendCommand("k\n")
		cli.waitOutputN("KEYUPDATE", 2)
		echoThrough(cli, "after-k")
		// One update of our own plus one answer to s_client's K.
		if n := countEvents(r.conn.Trace(), EventKeyUpdate); n != 2 {
			cli.fatalf("%d KeyUpdates in the server trace, want 2", n)
		}
	})
}

func TestOpenSSLResumption(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f)
		cfg := clientConfig(f.p)
		cfg.ClientSessionCache = NewLRUClientSessionCache(4)
		for i := range 2 {
			c := srv.mustDialZTLS(t, cfg)
			exchangeInteractive(t, c, srv, fmt.Sprintf("conn-%d", i)) // the read takes the ticket in
			if got := c.ConnectionState().DidResume; got != (i == 1) {
				srv.fatalf("connection %d: DidResume = %v", i, got)
			}
			c.Close()
		}
	})
	// psk_ke alone: no key share in the ClientHello. s_server with
	// -allow_no_dhe_kex resumes without a key exchange; a second s_server
	// (other ticket keys) cannot take the ticket and asks for a share.
	t.Run("ztls client psk_ke only", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-allow_no_dhe_kex")
		cfg := clientConfig(f.p)
		cfg.PSKModes = []PSKMode{PSKModeKE}
		cfg.ClientSessionCache = NewLRUClientSessionCache(4)
		for i := range 2 {
			c := srv.mustDialZTLS(t, cfg)
			exchangeInteractive(t, c, srv, fmt.Sprintf("psk-ke-%d", i))
			st := c.ConnectionState()
			if st.DidResume != (i == 1) || (st.Group == 0) != (i == 1) {
				srv.fatalf("connection %d: DidResume = %v, group %v", i, st.DidResume, st.Group)
			}
			c.Close()
		}
		other := opensslServer(t, f, "-allow_no_dhe_kex")
		c := other.mustDialZTLS(t, cfg)
		exchangeInteractive(t, c, other, "psk-ke-other")
		if st := c.ConnectionState(); st.DidResume || st.Group == 0 || !hasEvent(c.Trace(), EventHelloRetryRequest) {
			other.fatalf("ticket of another server: DidResume = %v, group %v", st.DidResume, st.Group)
		}
		c.Close()
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p))
		sess := writeTemp(t, "sess.pem", nil)
		for i, flag := range []string{"-sess_out", "-sess_in"} {
			cli := opensslClient(t, f, addr, flag, sess)
			r := nextResult(t, results, cli)
			if r.err != nil {
				cli.fatalf("ztls server handshake: %v", r.err)
			}
			echoThrough(cli, "resume")
			if i == 1 {
				cli.waitOutput("Reused, TLSv1.3")
			}
			if got := r.conn.ConnectionState().DidResume; got != (i == 1) {
				cli.fatalf("connection %d: DidResume = %v", i, got)
			}
			cli.stdin.Close() // s_client quits at EOF, after saving the session
			if err := cli.wait(); err != nil {
				cli.fatalf("s_client: %v", err)
			}
		}
	})
}

func TestOpenSSLEarlyData(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-early_data", "-max_early_data", "16384")
		c := srv.mustDialZTLS(t, clientConfig(f.p))
		exchangeInteractive(t, c, srv, "ticket")
		sess := c.Session()
		if sess == nil || sess.MaxEarlyData != 16384 {
			srv.fatalf("no ticket allowing 16384 bytes of early data: %+v", sess)
		}
		c.Close()

		// Accepted: the bytes reach s_server before the handshake ends.
		c = dialEarly(t, srv, sess, "early-data-accepted-by-openssl\n")
		st := c.ConnectionState()
		if !st.EarlyDataOffered || !st.EarlyDataAccepted || !st.DidResume {
			srv.fatalf("0-RTT not accepted: %+v", st)
		}
		srv.waitOutput("early-data-accepted-by-openssl")
		exchangeInteractive(t, c, srv, "after-early")
		c.Close()

		// The same ticket again: OpenSSL's anti-replay refuses the early
		// data; ztls resends it after the handshake and the connection works.
		c = dialEarly(t, srv, sess, "early-data-replayed-to-openssl\n")
		st = c.ConnectionState()
		if !st.EarlyDataOffered || st.EarlyDataAccepted || c.EarlyDataLost() {
			srv.fatalf("replayed 0-RTT: %+v, lost %v", st, c.EarlyDataLost())
		}
		if !hasEvent(c.Trace(), EventEarlyDataRejected) {
			srv.fatalf("no early_data_rejected event: %v", c.Trace())
		}
		srv.waitOutput("early-data-replayed-to-openssl")
		exchangeInteractive(t, c, srv, "after-rejected")
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		scfg := serverConfig(f.p)
		scfg.MaxEarlyData = 16384
		scfg.TicketKey = [32]byte{1, 2, 3}
		// stale: the same server a minute later, so the ticket age the
		// client reports is outside the 0-RTT freshness window (RFC 8446,
		// Section 8.3); resumption still works, 0-RTT does not.
		stale := scfg.Clone()
		stale.Time = func() time.Time { return clock.Now().Add(time.Minute) }
		// restarted: a new ticket key, so the ticket is unknown.
		restarted := scfg.Clone()
		restarted.TicketKey = [32]byte{4, 5, 6}
		addr, results := startZTLSServer(t, scfg, scfg, stale, restarted)
		sess := writeTemp(t, "sess.pem", nil)
		early := writeTemp(t, "early.txt", []byte("early-data-from-s_client\n"))

		cli := opensslClient(t, f, addr, "-sess_out", sess)
		if r := nextResult(t, results, cli); r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "ticket") // the ticket came before the echo
		cli.stdin.Close()
		if err := cli.wait(); err != nil {
			cli.fatalf("s_client: %v", err)
		}
		if fi, err := os.Stat(sess); err != nil || fi.Size() == 0 {
			cli.fatalf("s_client saved no session: %v", err)
		}

		for _, tc := range []struct {
			name     string
			accepted bool
		}{{"accepted", true}, {"stale", false}, {"restarted", false}} {
			cli := opensslClient(t, f, addr, "-sess_in", sess, "-early_data", early)
			r := nextResult(t, results, cli)
			if r.err != nil {
				cli.fatalf("%s: ztls server handshake: %v", tc.name, r.err)
			}
			echoThrough(cli, tc.name)
			st := r.conn.ConnectionState()
			if !st.EarlyDataOffered || st.EarlyDataAccepted != tc.accepted {
				cli.fatalf("%s: server state %+v", tc.name, st)
			}
			if tc.accepted {
				cli.waitOutput("Early data was accepted")
				if string(r.early) != "early-data-from-s_client\n" {
					cli.fatalf("server read early data %q", r.early)
				}
			} else {
				cli.waitOutput("Early data was rejected")
				if len(r.early) != 0 {
					cli.fatalf("%s: rejected early data reached the application: %q", tc.name, r.early)
				}
			}
			if got := st.DidResume; got != (tc.name != "restarted") {
				cli.fatalf("%s: DidResume = %v", tc.name, got)
			}
			cli.stdin.Close()
			if err := cli.wait(); err != nil {
				cli.fatalf("%s: s_client: %v", tc.name, err)
			}
		}
	})
}

// dialEarly connects with sess and data as 0-RTT early data (resent if rejected).
func dialEarly(t *testing.T, p *peerProc, sess *ClientSession, data string) *Conn {
	t.Helper()
	ctx := ctxTimeout(t)
	raw, err := p.dial(ctx)
	if err != nil {
		p.fatalf("connect: %v", err)
	}
	raw.SetDeadline(time.Now().Add(procTimeout))
	c := Client(raw, clientConfig(getPKI(t, "ecdsa-p256")))
	t.Cleanup(func() { c.Close() })
	c.SetSession(sess)
	c.SetEarlyData([]byte(data), true)
	if err := c.HandshakeContext(ctx); err != nil {
		p.fatalf("0-RTT handshake: %v", err)
	}
	return c
}

func TestOpenSSLTLS12Only(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-tls1_2")
		_, err := srv.dialZTLS(t, clientConfig(f.p))
		if a := alertOf(err); a != int(AlertProtocolVersion) {
			srv.fatalf("against a TLS 1.2 server: err %v (alert %d), want protocol_version", err, a)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p))
		cli := opensslClient(t, f, addr, "-tls1_2")
		r := nextResult(t, results, cli)
		if a := alertOf(r.err); a != int(AlertProtocolVersion) {
			cli.fatalf("TLS 1.2 client: err %v (alert %d), want protocol_version", r.err, a)
		}
		if cli.wait() == nil {
			cli.fatalf("s_client -tls1_2 reported success")
		}
		if out := cli.output(); !strings.Contains(out, "protocol version") {
			cli.fatalf("s_client did not report the protocol_version alert")
		}
	})
}

// TestOpenSSLP521: a peer that offers only secp521r1 still connects (ztls
// lists it last in its default groups and sends no share for it unless
// configured to).
func TestOpenSSLP521(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-groups", "P-521")
		cfg := clientConfig(f.p)
		cfg.Groups = []CurveID{P521}
		c := srv.mustDialZTLS(t, cfg)
		exchangeInteractive(t, c, srv, "p521")
		if g := c.ConnectionState().Group; g != P521 {
			srv.fatalf("negotiated %s", g.String())
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p)) // default groups
		cli := opensslClient(t, f, addr, "-groups", "P-521")
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "p521")
		if g := r.conn.ConnectionState().Group; g != P521 {
			cli.fatalf("negotiated %s", g.String())
		}
	})
}

// TestOpenSSLIgnoresCertCompression: OpenSSL 3.0 has no RFC 8879, so it
// ignores compress_certificate in the ClientHello and the
// CertificateRequest, and ztls sends and takes Certificates uncompressed.
func TestOpenSSLIgnoresCertCompression(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	all := []CertCompressionAlgorithm{CertCompressionZlib, CertCompressionBrotli, CertCompressionZstd}
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := opensslServer(t, f, "-Verify", "2", "-CAfile", f.ca, "-verify_return_error")
		cfg := clientConfig(f.p)
		cfg.Certificates = []Certificate{f.p.client}
		cfg.CertificateCompression = all
		c := srv.mustDialZTLS(t, cfg)
		exchangeInteractive(t, c, srv, "compress")
		if st := c.ConnectionState(); st.CertificateCompression != 0 || st.ClientCertificateCompression != 0 || len(st.VerifiedChains) == 0 {
			srv.fatalf("compression %v/%v with a peer that has none", st.CertificateCompression, st.ClientCertificateCompression)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		scfg := serverConfig(f.p)
		scfg.ClientAuth = RequireAndVerifyClientCert
		scfg.ClientCAs = f.p.pool()
		scfg.CertificateCompression = all
		addr, results := startZTLSServer(t, scfg)
		cli := opensslClient(t, f, addr, "-cert", f.cliCert, "-key", f.cliKey)
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		echoThrough(cli, "compress")
		if st := r.conn.ConnectionState(); st.CertificateCompression != 0 || len(st.VerifiedChains) == 0 {
			cli.fatalf("compression %v with a peer that has none", st.CertificateCompression)
		}
	})
}
