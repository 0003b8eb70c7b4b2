package dial

// docs/ztls-spec.md, Section 6 in TurboTLS mode: a server that does not know ztls, behind
// the TurboTLS server proxy, aborts on the ztls ClientHello. The client
// retries once without ztls, remembers the server, and the next
// connection sends no ztls at all.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/turbo"
)

// Extension codepoints the Go server's ClientHelloInfo lists.
const (
	extEarlyData = 42     // RFC 8446, Section 4.2.10
	extZTLS      = 0xff5a // docs/ztls-spec.md (private use)
)

// goBackend is a crypto/tls server that answers each request in upper
// case and records the extensions of every ClientHello it sees.
type goBackend struct {
	addr string
	mu   sync.Mutex
	exts [][]uint16
}

func (b *goBackend) hellos() [][]uint16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.exts)
}

func startGoBackend(t *testing.T, w *lab.World, maxVersion uint16) *goBackend {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(w.CertFile, w.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	b := &goBackend{}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: maxVersion,
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			b.mu.Lock()
			b.exts = append(b.exts, slices.Clone(h.Extensions))
			b.mu.Unlock()
			return nil, nil
		}}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	b.addr = ln.Addr().String()
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
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 100)
				if n, err := c.Read(buf); err == nil {
					c.Write(bytes.ToUpper(buf[:n]))
				}
			}()
		}
	}()
	return b
}

// startServerProxy puts the TurboTLS server proxy on the world's port
// (TCP) and a UDP port of its own, and publishes that UDP port in the
// HTTPS record (key65280) next to the world's Z-data.
func startServerProxy(t *testing.T, w *lab.World, backend string) *turbo.ServerProxy {
	t.Helper()
	p := turbo.NewServerProxy(backend, turbo.Config{})
	p.Quiet = 20 * time.Millisecond // the backend's flight is one burst; a loaded machine may pause inside it
	var ln net.Listener
	var err error
	for range 50 { // the world freed its port for the external server; it may be briefly taken
		if ln, err = net.Listen("tcp", w.ServerAddr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); p.Close(); pc.Close() })
	go p.ServeUDP(pc)
	go p.Serve(ln)
	udpPort := pc.LocalAddr().(*net.UDPAddr).Port
	rr := turbo.HTTPSRecord(w.Host, w.Port, uint16(udpPort), 300)
	if err := w.Zones.ReplaceRRset(rr.Hdr.Name, dns.TypeHTTPS, []dns.RR{rr}); err != nil {
		t.Fatal(err)
	}
	return p
}

// turboAgainst connects to the world with TurboTLS and mem, sending ping.
func turboAgainst(t *testing.T, ctx context.Context, w *lab.World, mem *Memory, mutate func(*Options)) (*Result, string, error) {
	t.Helper()
	var out bytes.Buffer
	r, err := connectCtx(t, ctx, w, func(o *Options) {
		o.Turbo, o.TurboWait, o.Memory = true, 5*time.Second, mem
		o.Request, o.ReadResponse, o.Out = []byte("ping\n"), 5, &out
		if mutate != nil {
			mutate(o)
		}
	})
	return r, out.String(), err
}

func offersZTLS(exts []uint16) bool {
	return slices.Contains(exts, extZTLS) || slices.Contains(exts, extEarlyData)
}

// The Go server answers the ztls ClientHello of the UDP flight with an
// alert; the retry runs on the TCP connection TurboTLS opened.
func TestTurboAbortOverUDPRetriedAndRemembered(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	be := startGoBackend(t, w, 0)
	startServerProxy(t, w, be.addr)
	mem := NewMemory()

	r, got, err := turboAgainst(t, context.Background(), w, mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if got != "PING\n" {
		t.Fatalf("response %q", got)
	}
	if rep.Mode != "tls" || rep.FallbackReason != ReasonServerAborted || rep.EarlyData.Offered || rep.EarlyData.Bytes != 0 {
		t.Fatalf("mode %s (%q), early %+v", rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	if rep.Transport != "tcp" || !strings.HasPrefix(rep.TurboFallback, turbo.ReasonFlightAborted+": ") ||
		!strings.Contains(rep.TurboFallback, "unsupported_extension") {
		t.Fatalf("transport %s, turbo fallback %q", rep.Transport, rep.TurboFallback)
	}
	if !mem.Aborted(w.Host, w.Port, clock.Now()) {
		t.Fatal("abort not remembered")
	}
	hellos := be.hellos()
	if len(hellos) != 2 || !slices.Contains(hellos[0], extZTLS) || offersZTLS(hellos[1]) {
		t.Fatalf("backend saw %d ClientHellos %v: want the ztls one, then one without ztls", len(hellos), hellos)
	}

	// The next connection goes straight to TLS 1.3, and TurboTLS works.
	r, got, err = turboAgainst(t, context.Background(), w, mem, nil)
	if err != nil {
		t.Fatal(err)
	}
	rep = r.Report
	if got != "PING\n" || rep.Mode != "tls" || rep.FallbackReason != ReasonRemembered || rep.EarlyData.Offered {
		t.Fatalf("second: response %q, mode %s (%q), early %+v", got, rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	if rep.Transport != "turbo" {
		t.Fatalf("second: transport %s (%q)", rep.Transport, rep.TurboFallback)
	}
	hellos = be.hellos()
	if len(hellos) != 3 || offersZTLS(hellos[2]) {
		t.Fatalf("second: backend saw ClientHellos %v", hellos)
	}
}

// UDP blocked: the ztls ClientHello goes on TCP after the wait, the Go
// server aborts there, and the retry is TLS 1.3 on a new TCP connection.
func TestTurboAbortOverTCPRetriedAndRemembered(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	be := startGoBackend(t, w, 0)
	startServerProxy(t, w, be.addr)
	mem := NewMemory()
	r, got, err := turboAgainst(t, wrapUDP(blackHoled), w, mem, func(o *Options) { o.TurboWait = 30 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	rep := r.Report
	if got != "PING\n" || rep.Mode != "tls" || rep.FallbackReason != ReasonServerAborted {
		t.Fatalf("response %q, mode %s (%q)", got, rep.Mode, rep.FallbackReason)
	}
	if rep.Transport != "tcp" || rep.TurboFallback != turbo.ReasonUDPTimeout || !hasStep(rep, "ztls_aborted_retry") {
		t.Fatalf("transport %s (%q)", rep.Transport, rep.TurboFallback)
	}
	if !mem.Aborted(w.Host, w.Port, clock.Now()) {
		t.Fatal("abort not remembered")
	}
	hellos := be.hellos()
	if len(hellos) != 2 || !slices.Contains(hellos[0], extZTLS) || offersZTLS(hellos[1]) {
		t.Fatalf("backend saw ClientHellos %v: want the ztls one, then one without ztls", hellos)
	}
}

// A server that refuses plain TLS 1.3 (here: TLS 1.2 only) fails the
// connection: without ztls in the ClientHello that is no ztls abort, so
// there is no retry and nothing is remembered.
func TestTurboPlainFailureIsNoZTLSAbort(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	be := startGoBackend(t, w, tls.VersionTLS12)
	startServerProxy(t, w, be.addr)
	mem := NewMemory()
	_, _, err := turboAgainst(t, context.Background(), w, mem, func(o *Options) { o.Mode = "tls" })
	var ae *tls13.AlertError
	if !errors.As(err, &ae) {
		t.Fatalf("err %v, want the server's alert", err)
	}
	if mem.Aborted(w.Host, w.Port, clock.Now()) {
		t.Fatal("a plain TLS failure was remembered as a ztls abort")
	}
	// The UDP flight's ClientHello, then TurboTLS's fallback on its TCP
	// connection: no third attempt.
	if hellos := be.hellos(); len(hellos) != 2 || offersZTLS(hellos[0]) || offersZTLS(hellos[1]) {
		t.Fatalf("backend saw ClientHellos %v", hellos)
	}
}

// The retry happens once: a server that aborts on every ClientHello
// fails the connection after the ztls attempt and one without ztls.
func TestTurboAbortRetriedOnlyOnce(t *testing.T) {
	w := startWorld(t, lab.Options{External: true})
	be := startGoBackend(t, w, tls.VersionTLS12)
	startServerProxy(t, w, be.addr)
	for _, udp := range []bool{true, false} {
		mem := NewMemory()
		before := len(be.hellos())
		ctx := context.Background()
		if !udp {
			ctx = wrapUDP(blackHoled)
		}
		_, _, err := turboAgainst(t, ctx, w, mem, func(o *Options) {
			if !udp {
				o.TurboWait = 30 * time.Millisecond
			}
		})
		var ae *tls13.AlertError
		if !errors.As(err, &ae) {
			t.Fatalf("udp %v: err %v, want the server's alert", udp, err)
		}
		if n := len(be.hellos()) - before; n != 2 {
			t.Fatalf("udp %v: %d ClientHellos, want the ztls one and one retry", udp, n)
		}
		// It did abort on the ztls ClientHello: remembered, as over TCP.
		if !mem.Aborted(w.Host, w.Port, clock.Now()) {
			t.Fatalf("udp %v: abort not remembered", udp)
		}
	}
}
