//go:build linux

package tls13

// Interop with GnuTLS 3.7 (gnutls-serv and gnutls-cli run as processes),
// both roles. gnutls-serv runs as an echo server in a network namespace of
// its own, since it always binds the wildcard address; gnutls-cli sends its
// stdin lines and prints what it receives.

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

var gnutlsSuites = map[CipherSuite]string{
	TLS_AES_128_GCM_SHA256:       "AES-128-GCM",
	TLS_AES_256_GCM_SHA384:       "AES-256-GCM",
	TLS_CHACHA20_POLY1305_SHA256: "CHACHA20-POLY1305",
}

var gnutlsGroups = map[CurveID]string{X25519: "GROUP-X25519", P256: "GROUP-SECP256R1", P384: "GROUP-SECP384R1"}

// gnutlsPriority allows only TLS 1.3 with one suite and one group.
func gnutlsPriority(s CipherSuite, g CurveID) string {
	return fmt.Sprintf("NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+%s:-GROUP-ALL:+%s", gnutlsSuites[s], gnutlsGroups[g])
}

// gnutlsServer starts gnutls-serv as an echo server in its own network namespace.
func gnutlsServer(t *testing.T, f *interopFiles, extra ...string) *peerProc {
	t.Helper()
	return startServerProc(t, "gnutls-serv", func(port int) []string {
		return append([]string{"--port", strconv.Itoa(port), "--echo",
			"--x509certfile", f.srvCert, "--x509keyfile", f.srvKey}, extra...)
	}, true)
}

// gnutlsClient starts gnutls-cli against the ztls server at addr. It
// verifies the chain against the test CA and the name 127.0.0.1 against
// the leaf's IP address.
func gnutlsClient(t *testing.T, f *interopFiles, addr string, extra ...string) *peerProc {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return startProc(t, "gnutls-cli", append([]string{"--port", port, "--x509cafile", f.ca}, append(extra, host)...), false)
}

// echoRoundTrip writes a line to the gnutls-serv echo server and reads it back.
func echoRoundTrip(t *testing.T, c net.Conn, p *peerProc, tag string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(procTimeout))
	line := "echo-via-" + p.name + "-" + tag + "\n"
	if _, err := io.WriteString(c, line); err != nil {
		p.fatalf("ztls write: %v", err)
	}
	readLine(t, c, p, line)
}

// mustHandshake fails the test if the ztls server's handshake failed.
func (r serverResult) mustHandshake(p *peerProc) serverResult {
	p.t.Helper()
	if r.err != nil {
		p.fatalf("ztls server handshake: %v", r.err)
	}
	return r
}

func TestGnuTLSSuitesAndGroups(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	for _, s := range interopSuites {
		for _, g := range interopGroups {
			name := fmt.Sprintf("%s/%s", s.String(), g.String())
			prio := "--priority=" + gnutlsPriority(s, g)
			t.Run("ztls client/"+name, func(t *testing.T) {
				t.Parallel()
				srv := gnutlsServer(t, f, "--disable-client-cert", prio)
				cfg := clientConfig(f.p)
				cfg.CipherSuites = []CipherSuite{s}
				cfg.Groups = []CurveID{g}
				c := srv.mustDialZTLS(t, cfg)
				echoRoundTrip(t, c, srv, "suite")
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
				cli := gnutlsClient(t, f, addr, prio)
				r := nextResult(t, results, cli).mustHandshake(cli)
				echoThrough(cli, "suite")
				cli.waitOutput("-(" + gnutlsSuites[s] + ")")
				st := r.conn.ConnectionState()
				if st.CipherSuite != s || st.Group != g {
					cli.fatalf("negotiated %s/%s", st.CipherSuite.String(), st.Group.String())
				}
			})
		}
	}
}

func TestGnuTLSHelloRetryRequest(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		// gnutls-serv takes only P-256; ztls sends an x25519 share first.
		srv := gnutlsServer(t, f, "--disable-client-cert", "--priority=NORMAL:-GROUP-ALL:+GROUP-SECP256R1")
		cfg := clientConfig(f.p)
		cfg.Groups = []CurveID{X25519, P256}
		c := srv.mustDialZTLS(t, cfg)
		echoRoundTrip(t, c, srv, "hrr")
		if !hasEvent(c.Trace(), EventHelloRetryRequest) || c.ConnectionState().Group != P256 {
			srv.fatalf("no HelloRetryRequest to P-256: group %s, trace %v", c.ConnectionState().Group.String(), c.Trace())
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		// gnutls-cli sends shares for its first two groups (x25519 first,
		// then P-256); the ztls server wants P-384.
		scfg := serverConfig(f.p)
		scfg.Groups = []CurveID{P384}
		addr, results := startZTLSServer(t, scfg)
		cli := gnutlsClient(t, f, addr, "--priority=NORMAL:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1")
		r := nextResult(t, results, cli).mustHandshake(cli)
		echoThrough(cli, "hrr")
		if !hasEvent(r.conn.Trace(), EventHelloRetryRequest) || r.conn.ConnectionState().Group != P384 {
			cli.fatalf("server did not retry for P-384: group %s", r.conn.ConnectionState().Group.String())
		}
	})
}

func TestGnuTLSClientCertificates(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := gnutlsServer(t, f, "--require-client-cert", "--verify-client-cert", "--x509cafile", f.ca)
		cfg := clientConfig(f.p)
		cfg.Certificates = []Certificate{f.p.client}
		c := srv.mustDialZTLS(t, cfg)
		echoRoundTrip(t, c, srv, "with-cert")
		c.Close()

		// Without a certificate gnutls-serv refuses; the client learns it
		// on its first read, since its handshake ends before the server checks.
		c, err := srv.dialZTLS(t, clientConfig(f.p))
		if err == nil {
			c.Write([]byte("no-cert\n"))
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
		cli := gnutlsClient(t, f, addr, "--x509certfile", f.cliCert, "--x509keyfile", f.cliKey)
		r := nextResult(t, results, cli).mustHandshake(cli)
		echoThrough(cli, "with-cert")
		st := r.conn.ConnectionState()
		if len(st.VerifiedChains) == 0 || st.PeerCertificates[0].DNSNames[0] != "client.test" {
			cli.fatalf("client certificate not verified: %+v", st.PeerCertificates)
		}

		cli = gnutlsClient(t, f, addr)
		r = nextResult(t, results, cli)
		if a := alertOf(r.err); a != int(AlertCertificateRequired) {
			cli.fatalf("without a certificate: err %v (alert %d), want certificate_required", r.err, a)
		}
		// gnutls-cli learns of the refusal when it next reads; it may
		// already have read the alert and exited, so a broken pipe here
		// is no failure: its exit and output below are the check.
		io.WriteString(cli.stdin, "no-cert\n")
		cli.stdin.Close()
		if cli.wait() == nil && !strings.Contains(cli.output(), "Certificate is required") {
			cli.fatalf("gnutls-cli did not notice the refusal")
		}
	})
}

func TestGnuTLSALPN(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := gnutlsServer(t, f, "--disable-client-cert", "--alpn", "h2", "--alpn", "http/1.1")
		cfg := clientConfig(f.p)
		cfg.NextProtos = []string{"http/1.1"}
		c := srv.mustDialZTLS(t, cfg)
		echoRoundTrip(t, c, srv, "alpn")
		if got := c.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
			srv.fatalf("ALPN = %q, want http/1.1", got)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		scfg := serverConfig(f.p)
		scfg.NextProtos = []string{"h2"}
		addr, results := startZTLSServer(t, scfg)
		cli := gnutlsClient(t, f, addr, "--alpn", "http/1.1", "--alpn", "h2")
		r := nextResult(t, results, cli).mustHandshake(cli)
		echoThrough(cli, "alpn")
		cli.waitOutput("Application protocol: h2")
		if got := r.conn.ConnectionState().NegotiatedProtocol; got != "h2" {
			cli.fatalf("ALPN = %q, want h2", got)
		}
	})
}

func TestGnuTLSKeyUpdate(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := gnutlsServer(t, f, "--disable-client-cert")
		c := srv.mustDialZTLS(t, clientConfig(f.p))
		echoRoundTrip(t, c, srv, "before")
		for i := range 2 {
			if err := c.KeyUpdate(true); err != nil {
				t.Fatal(err)
			}
			echoRoundTrip(t, c, srv, fmt.Sprintf("sent-%d", i))
		}
		if n := countEvents(c.Trace(), EventKeyUpdate); n != 2 {
			srv.fatalf("%d KeyUpdates in trace, want 2", n)
		}
		// The echo server's command makes it send KeyUpdate with
		// update_requested (gnutls_rehandshake under TLS 1.3); ztls
		// switches its read key and answers with its own.
		c.SetDeadline(time.Now().Add(procTimeout))
		if _, err := io.WriteString(c, "**REHANDSHAKE**\n"); err != nil {
			t.Fatal(err)
		}
		srv.waitOutput("Sending rehandshake request")
		readLine(t, c, srv, "Successfully executed command\n")
		echoRoundTrip(t, c, srv, "after-peer-update")
		if n := countEvents(c.Trace(), EventKeyUpdate); n != 3 {
			srv.fatalf("%d KeyUpdates in trace after the server's, want 3", n)
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p))
		cli := gnutlsClient(t, f, addr, "--inline-commands")
		r := nextResult(t, results, cli).mustHandshake(cli)
		echoThrough(cli, "before")
		if err := r.conn.KeyUpdate(true); err != nil {
			t.Fatal(err)
		}
		echoThrough(cli, "after-server-update")
		// ^rekey^: gnutls-cli sends KeyUpdate with update_requested.
		cli.sendCommand("^rekey^\n")
		echoThrough(cli, "after-rekey")
		// ^rekey1^: a KeyUpdate without request.
		cli.sendCommand("^rekey1^\n")
		echoThrough(cli, "after-rekey1")
		// One update of our own plus one answer to ^rekey^.
		if n := countEvents(r.conn.Trace(), EventKeyUpdate); n != 2 {
			cli.fatalf("%d KeyUpdates in the server trace, want 2", n)
		}
	})
}

func TestGnuTLSResumption(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srv := gnutlsServer(t, f, "--disable-client-cert")
		cfg := clientConfig(f.p)
		cfg.ClientSessionCache = NewLRUClientSessionCache(4)
		for i := range 2 {
			c := srv.mustDialZTLS(t, cfg)
			echoRoundTrip(t, c, srv, fmt.Sprintf("conn-%d", i)) // the read takes the ticket in
			if got := c.ConnectionState().DidResume; got != (i == 1) {
				srv.fatalf("connection %d: DidResume = %v", i, got)
			}
			c.Close()
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p))
		// --resume: connect, wait for the ticket, connect again with it.
		cli := gnutlsClient(t, f, addr, "--resume", "--waitresumption")
		first := nextResult(t, results, cli).mustHandshake(cli)
		second := nextResult(t, results, cli).mustHandshake(cli)
		echoThrough(cli, "resumed")
		cli.waitOutput("This is a resumed session")
		if first.conn.ConnectionState().DidResume || !second.conn.ConnectionState().DidResume {
			cli.fatalf("DidResume: first %v, second %v", first.conn.ConnectionState().DidResume, second.conn.ConnectionState().DidResume)
		}
	})
}

func TestGnuTLSEarlyData(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		srvArgs := []string{"--disable-client-cert", "--earlydata", "--maxearlydata", "16384"}
		srv := gnutlsServer(t, f, srvArgs...)
		c := srv.mustDialZTLS(t, clientConfig(f.p))
		echoRoundTrip(t, c, srv, "ticket")
		sess := c.Session()
		if sess == nil || sess.MaxEarlyData == 0 {
			srv.fatalf("no ticket allowing early data: %+v", sess)
		}
		c.Close()

		// Accepted: gnutls-serv says so in its EncryptedExtensions. Its
		// echo mode reads the early data but never echoes or prints it, so
		// only the acceptance and the connection afterwards can be checked.
		c = dialEarly(t, srv, sess, "early-data-accepted-by-gnutls\n")
		st := c.ConnectionState()
		if !st.EarlyDataOffered || !st.EarlyDataAccepted || !st.DidResume {
			srv.fatalf("0-RTT not accepted: %+v", st)
		}
		echoRoundTrip(t, c, srv, "after-early")
		c.Close()

		// A restarted server has a new ticket key: the ticket is unknown,
		// the early data is rejected, ztls resends it after a full handshake.
		srv.stop()
		srv2 := gnutlsServer(t, f, srvArgs...)
		const resent = "early-data-resent-to-gnutls\n"
		c = dialEarly(t, srv2, sess, resent)
		st = c.ConnectionState()
		if !st.EarlyDataOffered || st.EarlyDataAccepted || st.DidResume || c.EarlyDataLost() {
			srv2.fatalf("0-RTT to a restarted server: %+v, lost %v", st, c.EarlyDataLost())
		}
		readLine(t, c, srv2, resent)
		echoRoundTrip(t, c, srv2, "after-rejected")
	})
	for _, restart := range []bool{false, true} {
		name := "ztls server/accepted"
		if restart {
			name = "ztls server/restarted"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			scfg := serverConfig(f.p)
			scfg.MaxEarlyData = 16384
			second := scfg
			if restart {
				second = serverConfig(f.p) // a new ticket key
				second.MaxEarlyData = 16384
			}
			addr, results := startZTLSServer(t, scfg, second)
			const early = "early-data-from-gnutls-cli\n"
			file := writeTemp(t, "early.txt", []byte(early))
			cli := gnutlsClient(t, f, addr, "--resume", "--waitresumption", "--earlydata", file)
			nextResult(t, results, cli).mustHandshake(cli)
			r := nextResult(t, results, cli).mustHandshake(cli)
			echoThrough(cli, "after-early")
			st := r.conn.ConnectionState()
			if !st.EarlyDataOffered || st.EarlyDataAccepted == restart || st.DidResume == restart {
				cli.fatalf("server state %+v", st)
			}
			if restart {
				if len(r.early) != 0 {
					cli.fatalf("rejected early data reached the application: %q", r.early)
				}
			} else if string(r.early) != early {
				cli.fatalf("server read early data %q, want %q", r.early, early)
			}
			cli.stdin.Close()
			if err := cli.wait(); err != nil {
				cli.fatalf("gnutls-cli: %v", err)
			}
		})
	}
}

func TestGnuTLSTLS12Only(t *testing.T) {
	t.Parallel()
	f := writeInteropFiles(t)
	t.Run("ztls client", func(t *testing.T) {
		t.Parallel()
		// ztls offers only TLS 1.3 suites, so GnuTLS (unlike OpenSSL, which
		// answers protocol_version) finds no common TLS 1.2 suite and
		// refuses first with handshake_failure: ztls must fail cleanly.
		srv := gnutlsServer(t, f, "--disable-client-cert", "--priority=NORMAL:-VERS-TLS1.3")
		_, err := srv.dialZTLS(t, clientConfig(f.p))
		var ae *AlertError
		if !errors.As(err, &ae) || ae.Alert != AlertHandshakeFailure {
			srv.fatalf("against a TLS 1.2 server: err %v (alert %d), want handshake_failure from the peer", err, alertOf(err))
		}
	})
	t.Run("ztls server", func(t *testing.T) {
		t.Parallel()
		addr, results := startZTLSServer(t, serverConfig(f.p))
		cli := gnutlsClient(t, f, addr, "--priority=NORMAL:-VERS-TLS1.3")
		r := nextResult(t, results, cli)
		if a := alertOf(r.err); a != int(AlertProtocolVersion) {
			cli.fatalf("TLS 1.2 client: err %v (alert %d), want protocol_version", r.err, a)
		}
		if cli.wait() == nil {
			cli.fatalf("gnutls-cli with TLS 1.2 only reported success")
		}
	})
}
