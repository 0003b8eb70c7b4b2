//go:build linux

package main

// Interop with headless Chromium against an in-process tls13 server, for
// what `ztls serve` does not show from outside (see chromium_test.go for
// the suites, groups, HRR and resumption): the server's Conns are at hand,
// so the test reads their ConnectionState and Trace and drives them.
//
//   - certificate compression (RFC 8879): Chromium's BoringSSL offers
//     brotli; a server configured for it sends a CompressedCertificate.
//   - KeyUpdate (RFC 8446, Section 4.6.3): the server updates its keys in
//     the middle of the page, asking Chromium to update too; the page's
//     script then fetches a second resource on the same (keep-alive)
//     connection, which must arrive after Chromium's own KeyUpdate.
//   - 0-RTT (RFC 8446, Section 4.2.10): Chromium sends early data over TCP
//     only behind the EnableTLS13EarlyData feature, and then only on a
//     resumed connection. Every response closes its connection, so the
//     page's fetches need new ones that resume.
//
// net/http serves HTTP/1.1 over the server Conns (ALPN http/1.1); a Conn
// whose 0-RTT data was accepted hands that data to net/http first.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/tls13"
)

// chromeServer is an in-process ztls HTTPS server for Chromium.
type chromeServer struct {
	url string
	cfg *tls13.Config
	// keyUpdate: the page's response is cut in two by a KeyUpdate that
	// asks Chromium to update as well.
	keyUpdate bool
	// closeEach: every response closes its connection.
	closeEach bool
	// fetches are the paths the page's script fetches one after another
	// once the page has loaded; their answers go into the DOM.
	fetches []string

	mu    sync.Mutex
	conns []*chromeConn // in the order accepted
}

// chromeConn is one accepted connection and what the test saw on it.
type chromeConn struct {
	*tls13.Conn
	start sync.Once
	rest  io.Reader // accepted 0-RTT data, then the connection
	err   error

	mu        sync.Mutex
	early     []byte          // 0-RTT data received
	requests  []chromeRequest // in the order read
	updated   bool            // the server sent KeyUpdate(update_requested)
	updateErr error
}

// chromeRequest is a request as the server read it.
type chromeRequest struct {
	path string
	// afterUpdate: the server had sent its KeyUpdate on this connection
	// before the request was read; peerUpdated: Chromium's KeyUpdate had
	// arrived by then (records are processed in order, so the request
	// came under Chromium's new keys).
	afterUpdate, peerUpdated bool
}

// Read runs the handshake, taking accepted 0-RTT data, on first use.
func (c *chromeConn) Read(p []byte) (int, error) {
	c.start.Do(c.handshake)
	if c.err != nil {
		return 0, c.err
	}
	return c.rest.Read(p)
}

func (c *chromeConn) handshake() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if c.err = c.Conn.HandshakeEarly(ctx); c.err != nil {
		return
	}
	c.rest = c.Conn
	if c.Conn.ConnectionState().EarlyDataAccepted {
		// ReadEarlyData ends (io.EOF) with Chromium's EndOfEarlyData.
		var early []byte
		early, c.err = io.ReadAll(earlyData{c.Conn})
		if c.err != nil {
			return
		}
		c.mu.Lock()
		c.early = early
		c.mu.Unlock()
		c.rest = io.MultiReader(bytes.NewReader(early), c.Conn)
	}
	c.err = c.Conn.HandshakeContext(ctx)
}

// earlyData reads a server Conn's 0-RTT data.
type earlyData struct{ c *tls13.Conn }

func (r earlyData) Read(p []byte) (int, error) { return r.c.ReadEarlyData(p) }

// chromeListener hands out chromeConns and keeps them for the test.
type chromeListener struct {
	net.Listener // of *tls13.Conn
	s            *chromeServer
}

func (l chromeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &chromeConn{Conn: c.(*tls13.Conn)}
	l.s.mu.Lock()
	l.s.conns = append(l.s.conns, cc)
	l.s.mu.Unlock()
	return cc, nil
}

type chromeConnKey struct{}

// start serves on a loopback port until the test ends.
func (s *chromeServer) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.url = fmt.Sprintf("https://localhost:%d/", ln.Addr().(*net.TCPAddr).Port)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", s.servePage)
	mux.HandleFunc("GET /next/{n}", func(w http.ResponseWriter, r *http.Request) {
		s.note(w, r)
		fmt.Fprintf(w, "next-%s-from-ztls", r.PathValue("n"))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.note(w, r)
		http.NotFound(w, r)
	})
	srv := &http.Server{
		Handler: mux,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, chromeConnKey{}, c.(*chromeConn))
		},
	}
	go srv.Serve(chromeListener{tls13.NewListener(ln, s.cfg), s})
	t.Cleanup(func() { srv.Close() })
}

// note records the request on its connection.
func (s *chromeServer) note(w http.ResponseWriter, r *http.Request) *chromeConn {
	c := r.Context().Value(chromeConnKey{}).(*chromeConn)
	peer := false
	for _, ev := range c.Trace() {
		peer = peer || ev.Event == tls13.EventPeerKeyUpdate
	}
	c.mu.Lock()
	c.requests = append(c.requests, chromeRequest{path: r.URL.Path, afterUpdate: c.updated, peerUpdated: peer})
	c.mu.Unlock()
	if s.closeEach {
		w.Header().Set("Connection", "close")
	}
	return c
}

func (s *chromeServer) servePage(w http.ResponseWriter, r *http.Request) {
	c := s.note(w, r)
	w.Header().Set("Content-Type", "text/html")
	fmt.Fprint(w, `<!doctype html><html><head><title>ztls</title></head><body><p id="p">page-from-ztls</p>`)
	if s.keyUpdate {
		// The first half leaves under the old keys, the rest under the
		// new: Chromium must take the KeyUpdate to read the page. Sent
		// after the page instead, it would wait unread on the idle
		// connection, and Chromium's pool does not reuse a connection
		// with bytes waiting.
		w.(http.Flusher).Flush()
		err := c.KeyUpdate(true)
		c.mu.Lock()
		c.updated, c.updateErr = err == nil, err
		c.mu.Unlock()
	}
	var quoted []string
	for _, f := range s.fetches {
		quoted = append(quoted, "'"+f+"'")
	}
	fmt.Fprintf(w, `<p id="q">fetched:</p><script>
addEventListener('load', async () => {
  const q = document.getElementById('q');
  for (const path of [%s]) {
    try { q.textContent += ' ' + await (await fetch(path)).text(); }
    catch (e) { q.textContent += ' failed:' + path; }
  }
});
</script></body></html>`, strings.Join(quoted, ", "))
}

// snapshot returns the connections with copies of what was seen on them.
func (s *chromeServer) snapshot() []chromeConnView {
	s.mu.Lock()
	conns := append([]*chromeConn(nil), s.conns...)
	s.mu.Unlock()
	var out []chromeConnView
	for _, c := range conns {
		c.mu.Lock()
		v := chromeConnView{state: c.ConnectionState(), early: string(c.early),
			requests: append([]chromeRequest(nil), c.requests...), updated: c.updated, updateErr: c.updateErr}
		c.mu.Unlock()
		for _, ev := range c.Trace() {
			v.trace = append(v.trace, ev.Event.String())
		}
		out = append(out, v)
	}
	return out
}

type chromeConnView struct {
	state     tls13.ConnectionState
	trace     []string
	early     string
	requests  []chromeRequest
	updated   bool
	updateErr error
}

func (v chromeConnView) String() string {
	st := v.state
	var paths []string
	for _, r := range v.requests {
		paths = append(paths, fmt.Sprintf("%s(after update %v, peer updated %v)", r.path, r.afterUpdate, r.peerUpdated))
	}
	return fmt.Sprintf("complete=%v resumed=%v suite=%s group=%s certcomp=%v early offered=%v accepted=%v (%d bytes) requests=%v trace=%v",
		st.HandshakeComplete, st.DidResume, st.CipherSuite.String(), st.Group.String(),
		st.CertificateCompression, st.EarlyDataOffered, st.EarlyDataAccepted, len(v.early), paths, v.trace)
}

// load serves s.cfg to Chromium, loads the page, checks that it and its
// fetches showed, and returns the server's connections.
func (s *chromeServer) load(t *testing.T, chromium string, pki chromiumPKI, flags ...string) []chromeConnView {
	t.Helper()
	cert, err := tls13.LoadX509KeyPair(pki.certFile, pki.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	s.cfg.Certificates = []tls13.Certificate{cert}
	s.cfg.NextProtos = []string{"http/1.1"}
	s.start(t)
	dom := chromiumFetch(t, chromium, pki.spki, s.url, flags...)
	if !strings.Contains(dom, "page-from-ztls") {
		t.Fatalf("chromium did not show the page:\n%s", dom)
	}
	for _, f := range s.fetches {
		if want := strings.ReplaceAll(strings.TrimPrefix(f, "/"), "/", "-") + "-from-ztls"; !strings.Contains(dom, want) {
			t.Errorf("the page's fetch of %s did not show %q:\n%s", f, want, dom)
		}
	}
	conns := s.snapshot()
	for i, c := range conns {
		t.Logf("conn %d: %v", i, c)
	}
	return conns
}

// TestChromiumCertificateCompression: Chromium offers brotli (RFC 8879);
// a server listing it compresses its Certificate, one listing nothing
// Chromium offers does not.
func TestChromiumCertificateCompression(t *testing.T) {
	chromium := lookChromium(t)
	pki := newChromiumPKI(t)
	for _, tc := range []struct {
		name string
		algs []tls13.CertCompressionAlgorithm
		want tls13.CertCompressionAlgorithm
	}{
		{"brotli", []tls13.CertCompressionAlgorithm{tls13.CertCompressionBrotli}, tls13.CertCompressionBrotli},
		{"zstd-zlib-brotli", []tls13.CertCompressionAlgorithm{tls13.CertCompressionZstd, tls13.CertCompressionZlib, tls13.CertCompressionBrotli}, tls13.CertCompressionBrotli},
		{"none", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &chromeServer{cfg: &tls13.Config{CertificateCompression: tc.algs}}
			conns := s.load(t, chromium, pki)
			full := 0
			for i, c := range conns {
				if !c.state.HandshakeComplete || c.state.DidResume {
					continue // no Certificate sent
				}
				full++
				if c.state.CertificateCompression != tc.want {
					t.Errorf("conn %d: certificate compression %v, want %v", i, c.state.CertificateCompression, tc.want)
				}
			}
			if full == 0 {
				t.Fatal("no full handshake completed")
			}
		})
	}
}

// TestChromiumKeyUpdate: the server updates its keys in the middle of the
// page and asks Chromium to update as well. Chromium reads the rest of the
// page under the server's new keys, answers with its own KeyUpdate, and
// sends its next request on the connection under its new keys.
func TestChromiumKeyUpdate(t *testing.T) {
	chromium := lookChromium(t)
	s := &chromeServer{cfg: &tls13.Config{}, keyUpdate: true, fetches: []string{"/next/1", "/next/2"}}
	conns := s.load(t, chromium, newChromiumPKI(t))
	updated := 0
	for i, c := range conns {
		if c.updateErr != nil {
			t.Errorf("conn %d: KeyUpdate: %v", i, c.updateErr)
		}
		if !c.updated {
			continue
		}
		updated++
		var after []chromeRequest
		for _, r := range c.requests {
			if r.afterUpdate {
				after = append(after, r)
			}
		}
		if len(after) == 0 {
			t.Errorf("conn %d: Chromium sent no request on the connection after the KeyUpdate", i)
		}
		for _, r := range after {
			if !r.peerUpdated {
				t.Errorf("conn %d: %s was read before Chromium's KeyUpdate arrived", i, r.path)
			}
		}
		// Our request, then Chromium's answer (peer_key_update).
		if got := strings.Join(c.trace, " "); !strings.Contains(got, "key_update peer_key_update") {
			t.Errorf("conn %d: trace %q lacks our key_update followed by Chromium's", i, got)
		}
	}
	if updated == 0 {
		t.Fatal("no connection served the page")
	}
}

// chromiumEarlyDataFeature is the Chromium feature that lets it send TLS
// 1.3 early data over TCP (net/base/features.cc: kEnableTLS13EarlyData,
// off by default; the enterprise policy TLS13EarlyDataEnabled is the
// same switch).
const chromiumEarlyDataFeature = "EnableTLS13EarlyData"

// TestChromiumEarlyData: with EnableTLS13EarlyData, Chromium resumes with
// 0-RTT and its GET request arrives as early data that ztls accepts.
func TestChromiumEarlyData(t *testing.T) {
	chromium := lookChromium(t)
	// Every response closes its connection, so each fetch opens a new one
	// behind the ticket of the one before; the first may still take a
	// connection Chromium opened speculatively, before any ticket.
	s := &chromeServer{cfg: &tls13.Config{MaxEarlyData: 16384}, closeEach: true,
		fetches: []string{"/next/1", "/next/2", "/next/3", "/next/4", "/next/5", "/next/6"}}
	conns := s.load(t, chromium, newChromiumPKI(t), "--enable-features="+chromiumEarlyDataFeature)
	carried, offered, resumed := 0, 0, 0
	for i, c := range conns {
		st := c.state
		if st.DidResume {
			resumed++
		}
		if st.EarlyDataOffered {
			offered++
		}
		// A connection Chromium opens speculatively, before it has a
		// request, takes 0-RTT and ends it empty (EndOfEarlyData at once).
		if !st.EarlyDataAccepted || c.early == "" {
			continue
		}
		carried++
		if !strings.HasPrefix(c.early, "GET /") {
			t.Errorf("conn %d: early data %q is not a GET request", i, c.early)
		}
		if len(c.requests) == 0 || !strings.HasPrefix(c.early, "GET "+c.requests[0].path+" ") {
			t.Errorf("conn %d: the early request was not served first: %v", i, c.requests)
		}
	}
	refused := 0
	for _, c := range conns {
		if c.state.EarlyDataOffered && !c.state.EarlyDataAccepted {
			refused++
		}
	}
	switch {
	case carried > 0:
	case refused > 0:
		for i, c := range conns {
			st := c.state
			t.Logf("conn %d: resumed %v, 0-RTT offered %v accepted %v, early %q, requests %v",
				i, st.DidResume, st.EarlyDataOffered, st.EarlyDataAccepted, c.early, c.requests)
		}
		t.Fatalf("ztls refused Chromium's 0-RTT on %d of %d connections that offered it", refused, offered)
	case offered > 0:
		// ztls accepted every offer, but Chromium sent each 0-RTT flight
		// empty: it preconnects, and a request that finds a socket already
		// open never goes early. Nothing left to check on this run.
		t.Skipf("ztls accepted 0-RTT on all %d connections that offered it, but Chromium put no request in any (preconnected sockets)", offered)
	case resumed == 0:
		t.Fatal("no connection resumed")
	default:
		t.Skipf("Chromium resumed %d connections but offered no 0-RTT with --enable-features=%s", resumed, chromiumEarlyDataFeature)
	}
}
