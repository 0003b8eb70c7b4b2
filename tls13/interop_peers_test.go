//go:build linux

package tls13

// The interop matrix shared by the peers that run a small program of ours
// (tls13/testdata/peers/<peer>/): rustls, Java's JSSE, Erlang/OTP's ssl and
// tlslite-ng. Each program speaks the same line protocol (described in
// tls13/testdata/peers/README.md): as a server it prints "LISTEN <port>",
// a HANDSHAKE line per connection and "EARLY <text>" for accepted 0-RTT
// data, and echoes lines ("keyupdate" makes it update its own keys); as a
// client it makes conns connections, resuming from the second on, and
// prints HANDSHAKE, ECHO and finally DONE.
//
// Both roles get the same rows: every suite and group the peer shares with
// ztls, a HelloRetryRequest, resumption, KeyUpdate and, where the peer
// has it, 0-RTT. What ztls negotiated is checked on the ztls side.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// linePeer describes one peer program.
type linePeer struct {
	name string
	// command returns the program and its leading arguments, or skips
	// the test naming what to install.
	command func(t *testing.T) (string, []string)
	// suites and groups map ztls codepoints to the program's names for
	// them; only what the peer shares with ztls is listed.
	suites map[CipherSuite]string
	groups map[CurveID]string
	// earlyServer/earlyClient: the peer accepts or sends 0-RTT data.
	earlyServer, earlyClient bool
	// hrrClient and hrrServer are the groups for the HRR rows: the
	// client offers hrrClient, and key shares for some of them only (not
	// for hrrServer, which it lists last); the server takes only hrrServer.
	hrrClient []CurveID
	hrrServer CurveID
	// compress maps the RFC 8879 algorithms the peer shares with ztls to
	// the program's names for them.
	compress map[CertCompressionAlgorithm]string
	// skip holds known failures by row name (the bug they show).
	skip map[string]string
}

// peerCacheDir is where peer programs are built, outside the repository.
func peerCacheDir(t *testing.T, peer string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "ztls-peers", peer)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// peerDir is the absolute path of tls13/testdata/peers/<peer>.
func peerDir(t *testing.T, peer string) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("testdata", "peers", peer))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// sortedIDs returns a map's keys in the order of list (ztls's order).
func sortedIDs[T comparable](m map[T]string, list []T) []T {
	var ids []T
	for _, id := range list {
		if _, ok := m[id]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// allSuites and allGroups are everything ztls has, in its order.
var (
	allSuites = []CipherSuite{TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256}
	allGroups = []CurveID{X25519, P256, P384, P521, X25519MLKEM768}
)

func names[T comparable](m map[T]string, ids ...T) string {
	var s []string
	for _, id := range ids {
		s = append(s, m[id])
	}
	return strings.Join(s, ",")
}

// start runs the peer program with key=value arguments.
func (lp *linePeer) start(t *testing.T, kv ...string) *peerProc {
	t.Helper()
	prog, lead := lp.command(t)
	p := startProc(t, prog, append(append([]string(nil), lead...), kv...), false)
	p.name = lp.name
	return p
}

var listenRE = regexp.MustCompile(`LISTEN (\d+)`)

// startServer starts the peer as a server and waits for its port.
func (lp *linePeer) startServer(t *testing.T, f *interopFiles, kv ...string) *peerProc {
	t.Helper()
	p := lp.start(t, append([]string{"role=server", "port=0", "cert=" + f.srvCert, "key=" + f.srvKey, "ca=" + f.ca}, kv...)...)
	p.waitOutput("LISTEN ")
	m := listenRE.FindStringSubmatch(p.output())
	if m == nil {
		p.fatalf("no port in the LISTEN line")
	}
	p.addr = net.JoinHostPort("127.0.0.1", m[1])
	return p
}

// startClient runs the peer as a client of the ztls server at addr.
func (lp *linePeer) startClient(t *testing.T, f *interopFiles, addr string, kv ...string) *peerProc {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	return lp.start(t, append([]string{"role=client", "port=" + port, "ca=" + f.ca}, kv...)...)
}

// finish waits for a client program to print DONE and exit cleanly.
func finish(p *peerProc) {
	p.t.Helper()
	p.waitOutput("DONE")
	if err := p.wait(); err != nil {
		p.fatalf("%s exited with %v", p.name, err)
	}
}

// lineExchange writes a line on c and reads the peer's answer.
func lineExchange(t *testing.T, c *Conn, p *peerProc, send, want string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(procTimeout))
	if _, err := io.WriteString(c, send+"\n"); err != nil {
		p.fatalf("ztls write: %v", err)
	}
	readLine(t, c, p, want+"\n")
}

// skipKnown skips a row listed as a known failure.
func (lp *linePeer) skipKnown(t *testing.T, row string) {
	t.Helper()
	if why, ok := lp.skip[row]; ok {
		t.Skipf("known failure: %s", why)
	}
}

// runMatrix runs every row for both roles.
func (lp *linePeer) runMatrix(t *testing.T) {
	f := writeInteropFiles(t)
	lp.command(t) // skip early if the peer is missing; builds it once
	t.Run("server", func(t *testing.T) { lp.peerServerRows(t, f) })
	t.Run("client", func(t *testing.T) { lp.peerClientRows(t, f) })
}

// peerServerRows: the peer serves, a ztls client connects.
func (lp *linePeer) peerServerRows(t *testing.T, f *interopFiles) {
	suites := sortedIDs(lp.suites, allSuites)
	groups := sortedIDs(lp.groups, allGroups)
	var srvArgs []string
	if lp.earlyServer {
		srvArgs = append(srvArgs, "early=1")
	}
	// One server with everything shared; each ztls client offers one
	// suite and one group, so the server can only pick those.
	srv := lp.startServer(t, f, append(srvArgs, "suites="+names(lp.suites, suites...), "groups="+names(lp.groups, groups...))...)
	for _, s := range suites {
		for _, g := range groups {
			row := s.String() + "/" + g.String()
			t.Run(row, func(t *testing.T) {
				lp.skipKnown(t, "server/"+row)
				cfg := clientConfig(f.p)
				cfg.CipherSuites = []CipherSuite{s}
				cfg.Groups = []CurveID{g}
				c := srv.mustDialZTLS(t, cfg)
				lineExchange(t, c, srv, "ping-"+row, "ping-"+row)
				st := c.ConnectionState()
				if st.CipherSuite != s || st.Group != g || len(st.VerifiedChains) == 0 {
					srv.fatalf("negotiated %s/%s (verified chains: %d)", st.CipherSuite.String(), st.Group.String(), len(st.VerifiedChains))
				}
				c.Close()
			})
		}
	}
	t.Run("HRR", func(t *testing.T) {
		lp.skipKnown(t, "server/HRR")
		second := lp.hrrServer
		hs := lp.startServer(t, f, "groups="+names(lp.groups, second))
		cfg := clientConfig(f.p)
		cfg.Groups = append(append([]CurveID(nil), lp.hrrClient...), second)
		cfg.KeyShareGroups = lp.hrrClient[:1]
		c := hs.mustDialZTLS(t, cfg)
		lineExchange(t, c, hs, "ping-hrr", "ping-hrr")
		if !hasEvent(c.Trace(), EventHelloRetryRequest) || c.ConnectionState().Group != second {
			hs.fatalf("no HelloRetryRequest to %s: group %s, trace %v", second.String(), c.ConnectionState().Group.String(), c.Trace())
		}
	})
	t.Run("resumption", func(t *testing.T) {
		lp.skipKnown(t, "server/resumption")
		cfg := clientConfig(f.p)
		cfg.ClientSessionCache = NewLRUClientSessionCache(4)
		for i := range 2 {
			c := srv.mustDialZTLS(t, cfg)
			// The read takes the ticket in.
			lineExchange(t, c, srv, fmt.Sprintf("resume-%d", i), fmt.Sprintf("resume-%d", i))
			if got := c.ConnectionState().DidResume; got != (i == 1) {
				srv.fatalf("connection %d: DidResume = %v", i, got)
			}
			c.Close()
		}
	})
	t.Run("KeyUpdate", func(t *testing.T) {
		lp.skipKnown(t, "server/KeyUpdate")
		c := srv.mustDialZTLS(t, clientConfig(f.p))
		lineExchange(t, c, srv, "before", "before")
		// Ours, requesting the peer's: the peer must answer with its own
		// and keep reading under our new key.
		for i := range 2 {
			if err := c.KeyUpdate(true); err != nil {
				t.Fatal(err)
			}
			lineExchange(t, c, srv, fmt.Sprintf("after-ztls-update-%d", i), fmt.Sprintf("after-ztls-update-%d", i))
		}
		// The peer's own update: its answer comes under its next key.
		for i := range 2 {
			lineExchange(t, c, srv, "keyupdate", "keyupdate-done")
			srv.waitOutputN("KEYUPDATE sent", i+1)
			lineExchange(t, c, srv, fmt.Sprintf("after-peer-update-%d", i), fmt.Sprintf("after-peer-update-%d", i))
		}
		if n := countEvents(c.Trace(), EventKeyUpdate); n < 2 {
			srv.fatalf("%d KeyUpdates sent by ztls, want at least 2", n)
		}
	})
	for _, alg := range []CertCompressionAlgorithm{CertCompressionZlib, CertCompressionBrotli, CertCompressionZstd} {
		name, ok := lp.compress[alg]
		if !ok {
			continue
		}
		t.Run("compress/"+alg.String(), func(t *testing.T) {
			cs := lp.startServer(t, f, "compress="+name)
			cfg := clientConfig(f.p)
			cfg.CertificateCompression = []CertCompressionAlgorithm{alg}
			c := cs.mustDialZTLS(t, cfg)
			lineExchange(t, c, cs, "compressed", "compressed")
			if st := c.ConnectionState(); st.CertificateCompression != alg || len(st.VerifiedChains) == 0 {
				cs.fatalf("certificate compression %v (verified chains %d), want %v", st.CertificateCompression, len(st.VerifiedChains), alg)
			}
		})
	}
	if !lp.earlyServer {
		t.Run("0-RTT", func(t *testing.T) { t.Skipf("%s does not accept 0-RTT data", lp.name) })
		return
	}
	t.Run("0-RTT", func(t *testing.T) {
		lp.skipKnown(t, "server/0-RTT")
		cfg := clientConfig(f.p)
		c := srv.mustDialZTLS(t, cfg)
		lineExchange(t, c, srv, "ticket", "ticket")
		sess := c.Session()
		if sess == nil || sess.MaxEarlyData == 0 {
			srv.fatalf("no ticket allowing early data: %+v", sess)
		}
		c.Close()
		c = dialEarly(t, srv, sess, "early-from-ztls\n")
		st := c.ConnectionState()
		if !st.EarlyDataOffered || !st.EarlyDataAccepted || !st.DidResume {
			srv.fatalf("0-RTT not accepted: %+v", st)
		}
		srv.waitOutput("EARLY early-from-ztls")
		lineExchange(t, c, srv, "after-early", "after-early")
	})
}

// peerClientRows: a ztls server, the peer connects.
func (lp *linePeer) peerClientRows(t *testing.T, f *interopFiles) {
	suites := sortedIDs(lp.suites, allSuites)
	groups := sortedIDs(lp.groups, allGroups)
	for _, s := range suites {
		for _, g := range groups {
			row := s.String() + "/" + g.String()
			t.Run(row, func(t *testing.T) {
				lp.skipKnown(t, "client/"+row)
				scfg := serverConfig(f.p)
				scfg.CipherSuites = []CipherSuite{s}
				scfg.Groups = []CurveID{g}
				addr, results := startZTLSServer(t, scfg)
				cli := lp.startClient(t, f, addr, "suites="+names(lp.suites, s), "groups="+names(lp.groups, g))
				r := nextResult(t, results, cli)
				if r.err != nil {
					cli.fatalf("ztls server handshake: %v", r.err)
				}
				finish(cli)
				st := r.conn.ConnectionState()
				if st.CipherSuite != s || st.Group != g || hasEvent(r.conn.Trace(), EventHelloRetryRequest) {
					cli.fatalf("negotiated %s/%s (trace %v)", st.CipherSuite.String(), st.Group.String(), r.conn.Trace())
				}
			})
		}
	}
	t.Run("HRR", func(t *testing.T) {
		lp.skipKnown(t, "client/HRR")
		second := lp.hrrServer
		scfg := serverConfig(f.p)
		scfg.Groups = []CurveID{second}
		addr, results := startZTLSServer(t, scfg)
		cli := lp.startClient(t, f, addr, "groups="+names(lp.groups, append(append([]CurveID(nil), lp.hrrClient...), second)...))
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server handshake: %v", r.err)
		}
		finish(cli)
		if !hasEvent(r.conn.Trace(), EventHelloRetryRequest) || r.conn.ConnectionState().Group != second {
			cli.fatalf("server did not retry for %s: group %s", second.String(), r.conn.ConnectionState().Group.String())
		}
	})
	t.Run("resumption", func(t *testing.T) {
		lp.skipKnown(t, "client/resumption")
		addr, results := startZTLSServer(t, serverConfig(f.p))
		cli := lp.startClient(t, f, addr, "conns=2")
		for i := range 2 {
			r := nextResult(t, results, cli)
			if r.err != nil {
				cli.fatalf("connection %d: ztls server handshake: %v", i, r.err)
			}
			if got := r.conn.ConnectionState().DidResume; got != (i == 1) {
				cli.fatalf("connection %d: DidResume = %v", i, got)
			}
		}
		finish(cli)
	})
	t.Run("KeyUpdate", func(t *testing.T) {
		lp.skipKnown(t, "client/KeyUpdate")
		addr, results := startKeyUpdateServer(t, serverConfig(f.p))
		cli := lp.startClient(t, f, addr, "keyupdate=1")
		r := nextResult(t, results, cli)
		if r.err != nil {
			cli.fatalf("ztls server: %v", r.err)
		}
		finish(cli)
		cli.waitOutput("KEYUPDATE sent")
		cli.waitOutput("ECHO after-keyupdate-0")
	})
	for _, alg := range []CertCompressionAlgorithm{CertCompressionZlib, CertCompressionBrotli, CertCompressionZstd} {
		name, ok := lp.compress[alg]
		if !ok {
			continue
		}
		t.Run("compress/"+alg.String(), func(t *testing.T) {
			scfg := serverConfig(f.p)
			scfg.CertificateCompression = []CertCompressionAlgorithm{alg}
			addr, results := startZTLSServer(t, scfg)
			cli := lp.startClient(t, f, addr, "compress="+name)
			r := nextResult(t, results, cli)
			if r.err != nil {
				cli.fatalf("ztls server handshake: %v", r.err)
			}
			finish(cli)
			if got := r.conn.ConnectionState().CertificateCompression; got != alg {
				cli.fatalf("certificate compression %v, want %v", got, alg)
			}
		})
	}
	if !lp.earlyClient {
		t.Run("0-RTT", func(t *testing.T) { t.Skipf("%s does not send 0-RTT data", lp.name) })
		return
	}
	t.Run("0-RTT", func(t *testing.T) {
		lp.skipKnown(t, "client/0-RTT")
		scfg := serverConfig(f.p)
		scfg.MaxEarlyData = 16384
		addr, results := startZTLSServer(t, scfg)
		cli := lp.startClient(t, f, addr, "conns=2", "early=1")
		for i := range 2 {
			r := nextResult(t, results, cli)
			if r.err != nil {
				cli.fatalf("connection %d: ztls server handshake: %v", i, r.err)
			}
			st := r.conn.ConnectionState()
			if i == 1 {
				if !st.DidResume || !st.EarlyDataAccepted {
					cli.fatalf("0-RTT not accepted: %+v", st)
				}
				if want := "early-from-" + lp.name + "-1\n"; string(r.early) != want {
					cli.fatalf("server read early data %q, want %q", r.early, want)
				}
			}
		}
		finish(cli)
	})
}

// startKeyUpdateServer is a ztls echo server that, after echoing the
// first line, updates its keys and requests the client's update: the
// client must answer, and read the rest under the new key.
func startKeyUpdateServer(t *testing.T, cfg *Config) (string, <-chan serverResult) {
	t.Helper()
	results := make(chan serverResult, 4)
	addr := serve(t, loopback(t), func(raw net.Conn) {
		c := Server(raw, cfg)
		ctx, cancel := context.WithTimeout(context.Background(), procTimeout)
		defer cancel()
		res := serverResult{conn: c, err: c.HandshakeContext(ctx)}
		defer c.Close()
		if res.err != nil {
			results <- res
			return
		}
		r := bufio.NewReader(c)
		for i := 0; ; i++ {
			line, err := r.ReadString('\n')
			if err != nil {
				if err != io.EOF {
					res.err = fmt.Errorf("read: %w", err)
				}
				break
			}
			if i == 0 {
				if err := c.KeyUpdate(true); err != nil {
					res.err = err
					break
				}
			}
			if _, err := io.WriteString(c, line); err != nil {
				res.err = err
				break
			}
		}
		if res.err == nil && countEvents(c.Trace(), EventKeyUpdate) < 1 {
			res.err = fmt.Errorf("the server sent no KeyUpdate")
		}
		results <- res
	})
	return addr, results
}

// buildOnce runs a peer's build at most once per test process.
type buildOnce struct {
	once sync.Once
	path string
	err  error
}

func (b *buildOnce) do(build func() (string, error)) (string, error) {
	b.once.Do(func() { b.path, b.err = build() })
	return b.path, b.err
}
