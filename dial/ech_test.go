package dial

// Encrypted ClientHello from the HTTPS record, end to end against the
// lab's authority and ZTLS server (with ECH keys) and Go's crypto/tls.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
)

const echPublic = "public.ztls.test"

// echWorld is a lab world whose server counts the requests it received
// (early or not) and whose certificate also names echPublic.
type echWorld struct {
	*lab.World
	requests atomic.Int64
}

func startECHWorld(t *testing.T) *echWorld {
	t.Helper()
	ew := &echWorld{}
	ew.World = startWorld(t, lab.Options{HTTPSZData: true, AltNames: []string{echPublic}, Handler: ewHandler(ew)})
	return ew
}

// ewHandler answers one request (early or not) and counts it.
func ewHandler(ew *echWorld) func(c *tls13.Conn) {
	return func(c *tls13.Conn) {
		if c.HandshakeEarly(context.Background()) != nil {
			return
		}
		buf := make([]byte, 4096)
		n, _ := c.ReadEarlyData(buf)
		if n == 0 {
			if c.Handshake() != nil {
				return
			}
			n, _ = c.Read(buf)
		}
		if n > 0 {
			ew.requests.Add(1)
			c.Write([]byte("hello"))
		}
		c.Handshake()
		c.CloseWrite()
	}
}

func echKey(t *testing.T, id uint8, retry bool) tls13.ECHKey {
	t.Helper()
	k, err := tls13.GenerateECHKey(id, echPublic, 64, nil)
	if err != nil {
		t.Fatal(err)
	}
	k.SendAsRetry = retry
	return k
}

// publishECH publishes the world's HTTPS record with keys' configs as
// ech (none: without ech).
func (ew *echWorld) publishECH(t *testing.T, keys ...tls13.ECHKey) {
	t.Helper()
	h := httpsWith(t, ew.World, ew.Service.HTTPSRecords(clock.Now()), func(h *dns.HTTPS) {
		if len(keys) == 0 {
			return
		}
		list, err := tls13.MarshalECHConfigList(keys)
		if err != nil {
			t.Fatal(err)
		}
		h.Value = append(h.Value, &dns.SVCBECHConfig{ECH: list})
	})
	if err := ew.PublishHTTPS(h); err != nil {
		t.Fatal(err)
	}
}

func (ew *echWorld) serverKeys(t *testing.T, keys ...tls13.ECHKey) {
	t.Helper()
	set, err := tls13.NewECHKeySet(keys)
	if err != nil {
		t.Fatal(err)
	}
	ew.ServerTLS.ECHKeySet = set
}

// recordingProxy forwards 127.0.0.2:port to to, keeping what the client
// sent on its first connection.
type recordingProxy struct {
	mu    sync.Mutex
	first []byte
	conns int
}

func startRecordingProxy(t *testing.T, port int, to string) *recordingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port)))
	if err != nil {
		t.Skipf("no second loopback address 127.0.0.2 with port %d: %v", port, err)
	}
	p := &recordingProxy{}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns++
			first := p.conns == 1
			p.mu.Unlock()
			wg.Add(2)
			go func() {
				defer wg.Done()
				var rec io.Writer = io.Discard
				if first {
					rec = p
				}
				io.Copy(io.MultiWriter(up, rec), c)
				up.(*net.TCPConn).CloseWrite()
			}()
			go func() { defer wg.Done(); io.Copy(c, up); c.Close(); up.Close() }()
		}
	}()
	return p
}

func (p *recordingProxy) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.first = append(p.first, b...)
	return len(b), nil
}

// helloExtensions is the extension types of the ClientHello opening b
// (one record, as this client sends it).
func helloExtensions(t *testing.T, b []byte) []uint16 {
	t.Helper()
	if len(b) < 5+4+2+32+1 || b[0] != 22 || b[5] != 1 {
		t.Fatalf("the first flight does not open with a ClientHello record: % x", b[:min(len(b), 16)])
	}
	h := b[5+4:]
	h = h[2+32:]
	h = h[1+int(h[0]):]                              // session id
	h = h[2+int(binary.BigEndian.Uint16(h)):]        // cipher suites
	h = h[1+int(h[0]):]                              // compression
	exts := h[2 : 2+int(binary.BigEndian.Uint16(h))] // extensions
	var types []uint16
	for len(exts) >= 4 {
		types = append(types, binary.BigEndian.Uint16(exts))
		exts = exts[4+int(binary.BigEndian.Uint16(exts[2:])):]
	}
	return types
}

const ztlsCodepoint = 0xff5a // docs/ztls-spec.md, Section 2

// TestECHZTLSInsideFromHTTPSRecord: the HTTPS record's ech is used, ZTLS
// runs inside the accepted ECH with the request early and answered once,
// and the first flight on the wire names neither the host nor carries
// the ztls extension.
func TestECHZTLSInsideFromHTTPSRecord(t *testing.T) {
	ew := startECHWorld(t)
	k := echKey(t, 7, true)
	ew.serverKeys(t, k)
	ew.publishECH(t, k)
	proxy := startRecordingProxy(t, ew.Port, ew.ServerAddr)
	r, err := connect(t, ew.World, func(o *Options) {
		o.Addrs = []netip.Addr{netip.MustParseAddr("127.0.0.2")}
		o.ECH = ECHRequire
	})
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.ECH != "accepted" || rep.Mode != "ztls" || !rep.EarlyData.Accepted || rep.ECHRetried {
		t.Fatalf("ECH %q (retried %v), mode %s (%s), early data %+v", rep.ECH, rep.ECHRetried, rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	if n := ew.requests.Load(); n != 1 {
		t.Fatalf("the server received the request %d times", n)
	}
	proxy.mu.Lock()
	first := append([]byte(nil), proxy.first...)
	proxy.mu.Unlock()
	if bytes.Contains(first, []byte(ew.Host)) || !bytes.Contains(first, []byte(echPublic)) {
		t.Fatal("the first flight names the host, or not the public name")
	}
	for _, typ := range helloExtensions(t, first) {
		if typ == ztlsCodepoint {
			t.Fatal("the outer ClientHello carries the ztls extension")
		}
	}
	var text strings.Builder
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "Encrypted ClientHello: accepted") {
		t.Fatalf("text report:\n%s", text.String())
	}
}

// TestECHStaleConfigRetriedOnce: the record still has the config of a
// key the server rotated away: rejected, one retry with the retry
// configs, accepted; the request reached the server once.
func TestECHStaleConfigRetriedOnce(t *testing.T) {
	ew := startECHWorld(t)
	old, cur := echKey(t, 1, false), echKey(t, 2, true)
	ew.serverKeys(t, cur)
	ew.publishECH(t, old)
	r, err := connect(t, ew.World, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if rep.ECH != "accepted" || !rep.ECHRetried || rep.Mode != "ztls" || !hasStep(rep, "ech_retry") {
		t.Fatalf("ECH %q retried %v, mode %s (%s)", rep.ECH, rep.ECHRetried, rep.Mode, rep.FallbackReason)
	}
	if n := ew.requests.Load(); n != 1 {
		t.Fatalf("the server received the request %d times, want once", n)
	}
}

// TestECHRequireWithoutECH: --ech against a record without ech, and
// against a server without ECH keys, fails and says why; in auto mode
// the same server is reached without ECH.
func TestECHRequireWithoutECH(t *testing.T) {
	ew := startECHWorld(t)
	ew.publishECH(t)
	_, err := connect(t, ew.World, func(o *Options) { o.ECH = ECHRequire })
	if !errors.Is(err, ErrECHRequired) || !strings.Contains(err.Error(), "carries no ech") {
		t.Fatalf("no ech published: %v", err)
	}
	if ew.requests.Load() != 0 {
		t.Fatal("the request was sent")
	}
	ew.publishECH(t, echKey(t, 3, true)) // the server has no ECH key at all
	_, err = connect(t, ew.World, func(o *Options) { o.ECH = ECHRequire })
	if !errors.Is(err, ErrECHRequired) || !strings.Contains(err.Error(), "rejected ECH") {
		t.Fatalf("server without ECH: %v", err)
	}
	r, err := connect(t, ew.World, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.ECH != ECHReportNone || !r.Report.ECHRetried || r.Report.Mode != "ztls" {
		t.Fatalf("auto: ECH %q retried %v mode %s", r.Report.ECH, r.Report.ECHRetried, r.Report.Mode)
	}
	if n := ew.requests.Load(); n != 1 {
		t.Fatalf("the server received the request %d times, want once", n)
	}
}

// TestECHGoServer: Go's crypto/tls with EncryptedClientHelloKeys as the
// server, dial as the client with the config from the HTTPS record, in
// TLS mode (Go's server aborts on early_data without a PSK when it
// rejects ECH, and has no ZTLS).
func TestECHGoServer(t *testing.T) {
	w := startWorld(t, lab.Options{HTTPSZData: true, External: true, AltNames: []string{echPublic}})
	cert, err := tls.LoadX509KeyPair(w.CertFile, w.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	k := echKey(t, 9, true)
	ew := &echWorld{World: w}
	ew.publishECH(t, k)
	ln, err := net.Listen("tcp", w.ServerAddr)
	if err != nil {
		t.Fatal(err)
	}
	states := make(chan tls.ConnectionState, 1)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		tc := tls.Server(c, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert},
			EncryptedClientHelloKeys: []tls.EncryptedClientHelloKey{{Config: k.Config, PrivateKey: k.PrivateKey, SendAsRetry: true}}})
		if tc.Handshake() != nil {
			return
		}
		states <- tc.ConnectionState()
		buf := make([]byte, 100)
		if n, _ := tc.Read(buf); n > 0 {
			tc.Write([]byte("hello"))
		}
		tc.CloseWrite()
	}()
	r, err := connect(t, w, func(o *Options) { o.Mode, o.ECH = ModeTLS, ECHRequire })
	if err != nil {
		t.Fatal(err)
	}
	if st := <-states; !st.ECHAccepted || st.ServerName != w.Host {
		t.Fatalf("Go's server: ECH accepted %v, server name %q", st.ECHAccepted, st.ServerName)
	}
	if r.Report.ECH != "accepted" {
		t.Fatalf("report ECH %q", r.Report.ECH)
	}
}

// TestECHConfiguredALPNOrder: with ECH the ALPN list is given to the
// engine in the configured order (the outer's alpn), whatever order the
// Z-data's early protocol put it in.
func TestECHConfiguredALPNOrder(t *testing.T) {
	for _, tc := range []struct{ configured, cur, want []string }{
		{[]string{"h2", "http/1.1"}, []string{"http/1.1", "h2"}, []string{"h2", "http/1.1"}},
		{[]string{"h2", "http/1.1"}, []string{"http/1.1"}, []string{"http/1.1"}},
		{[]string{"h2"}, []string{"x", "h2"}, []string{"h2", "x"}},
		{nil, nil, nil},
	} {
		if got := configuredOrder(tc.configured, tc.cur); !slices.Equal(got, tc.want) {
			t.Errorf("configuredOrder(%q, %q) = %q, want %q", tc.configured, tc.cur, got, tc.want)
		}
	}
	a := &attempt{cfg: &tls13.Config{NextProtos: []string{"http/1.1", "h2"}}, protos: []string{"h2", "http/1.1"}}
	a.ech.list = []byte{1}
	if got := a.echConfig().NextProtos; !slices.Equal(got, a.protos) {
		t.Fatalf("echConfig's ALPN %q, want the configured %q", got, a.protos)
	}
	a.ech.list = nil
	if got := a.echConfig().NextProtos; !slices.Equal(got, []string{"http/1.1", "h2"}) {
		t.Fatalf("without ECH the list changed: %q", got)
	}
}
