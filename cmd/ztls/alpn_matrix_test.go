package main

// The ALPN matrix (issue 27): every client (the ztlshttp transport, get
// and connect, each offering h2, http/1.1 or both) against every Z-data
// early ALPN (h2, http/1.1, none) and every server ALPN list (h2,
// http/1.1, both, none), for GET and POST. In each cell the backend
// receives the request exactly once when the client and the server have
// a way to speak HTTP, else not at all; the server accepts exactly one
// connection (first contact); and the connection is ZTLS whenever the
// Z-data, the server and the client allow it.

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/prevalidate"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
	"github.com/ztls-project/ztls/ztlshttp"
)

// alpnWorld is one Z-data early ALPN: a lab world (CA, authority,
// Z-data) whose server, a ztlshttp.Proxy of our own, takes its ALPN list
// from cfg and counts the connections it accepts.
type alpnWorld struct {
	w     *lab.World
	res   *resolver.Resolver
	cfg   atomic.Pointer[tls13.Config]
	conns atomic.Int64
}

// countingBackend counts the requests it receives per path, and those
// marked Early-Data: 1.
type countingBackend struct {
	mu    sync.Mutex
	n     map[string]int
	early map[string]int
}

func (b *countingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.n[r.URL.Path]++
	if r.Header.Get("Early-Data") == "1" {
		b.early[r.URL.Path]++
	}
	b.mu.Unlock()
	io.WriteString(w, "page "+r.URL.Path+" "+string(body))
}

func (b *countingBackend) count(path string) (n, early int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[path], b.early[path]
}

// newALPNWorlds starts one world per Z-data early ALPN, all proxying to
// be.
func newALPNWorlds(t *testing.T, be *countingBackend) map[string]*alpnWorld {
	origin := httptest.NewServer(be)
	t.Cleanup(origin.Close)
	u, _ := url.Parse(origin.URL)
	proxy := &ztlshttp.Proxy{Backend: u, Timeout: 10 * time.Second}
	worlds := map[string]*alpnWorld{}
	for _, early := range []string{"h2", "http/1.1", ""} {
		w, err := lab.Start(lab.Options{External: true, ZDataOptions: zdata.Options{ALPN: early}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Close)
		aw := &alpnWorld{w: w}
		if aw.res, err = w.Resolver(resolver.UDP); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { aw.res.Close() })
		aw.cfg.Store(w.ServerTLS)
		ln, err := net.Listen("tcp", w.ServerAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				raw, err := ln.Accept()
				if err != nil {
					return
				}
				aw.conns.Add(1)
				go proxy.ServeConn(tls13.Server(raw, aw.cfg.Load()))
			}
		}()
		worlds[early] = aw
	}
	return worlds
}

// alpnClient is one client of the matrix.
type alpnClient struct {
	name   string
	protos []string // its ALPN list (nil: the transport's default, both)
	// canSwitch: it writes the request in whichever protocol is
	// negotiated (the transport, get --http2); else the request is
	// HTTP/1.1 (get, connect).
	canSwitch bool
	methods   []string
}

// alpnExpect says whether a client reaches the backend (ok) and whether
// with ZTLS, from the rules: early data goes in the protocol the Z-data
// names (Z-data without alpn=: HTTP/1.1 in a ClientHello without ALPN)
// when the client can write the request in it; the ClientHello offers
// the client's protocols (the Z-data's first), or only the request's
// when the client cannot rewrite it; the server selects the Z-data's
// early ALPN for a ztls ClientHello when it speaks it, else its first
// protocol the client offers, and refuses a ClientHello whose list
// shares none with its own; a connection without ALPN carries HTTP/1.1.
func alpnExpect(c alpnClient, early string, server []string, method string) (ok, ztls bool) {
	protos := c.protos
	if protos == nil {
		protos = []string{"h2", "http/1.1"}
	}
	speaks := func(p string) bool {
		if c.canSwitch {
			return slices.Contains(protos, p)
		}
		return p == "http/1.1"
	}
	want := early // the protocol the early request must be in
	if want == "" {
		want = "http/1.1"
	}
	usable := method == "GET" && slices.Contains(protos, want) && speaks(want)
	var offered []string
	switch {
	case usable && early == "":
		offered = nil
	case c.canSwitch || !slices.Contains(protos, "http/1.1"):
		offered = protos
	default:
		offered = []string{"http/1.1"}
	}
	negotiated := ""
	if len(offered) > 0 && len(server) > 0 {
		for _, p := range server {
			if slices.Contains(offered, p) {
				negotiated = p
				break
			}
		}
		if usable && slices.Contains(server, early) {
			negotiated = early
		}
		if negotiated == "" {
			return false, false // no_application_protocol
		}
	}
	got := negotiated
	if got == "" {
		got = "http/1.1"
	}
	ok = speaks(got)
	return ok, ok && usable && negotiated == early
}

func alpnName(protos []string) string {
	switch {
	case protos == nil:
		return "none"
	case len(protos) == 2:
		return "both"
	}
	return protos[0]
}

// TestALPNMatrix runs every cell: 72 through the transport, 72 through
// get (a POST with -d), 48 through connect (http/1.1 and both: connect sends
// the bytes it is given, here an HTTP/1.1 request). It logs one line per
// cell: the backend's count, the connections the server accepted, ZTLS.
func TestALPNMatrix(t *testing.T) {
	be := &countingBackend{n: map[string]int{}, early: map[string]int{}}
	worlds := newALPNWorlds(t, be)
	servers := [][]string{{"h2"}, {"http/1.1"}, {"h2", "http/1.1"}, nil}
	kinds := []struct {
		kind    string
		clients []alpnClient
		run     func(t *testing.T, aw *alpnWorld, c alpnClient, method, path string) (dial.Report, error)
	}{
		{"transport", []alpnClient{
			{"h2", []string{"h2"}, true, []string{"GET", "POST"}},
			{"http/1.1", []string{"http/1.1"}, true, []string{"GET", "POST"}},
			{"both", nil, true, []string{"GET", "POST"}},
		}, runTransport},
		{"get", []alpnClient{
			{"h2", []string{"h2"}, true, []string{"GET", "POST"}},              // get --http2 --alpn h2
			{"http/1.1", []string{"http/1.1"}, false, []string{"GET", "POST"}}, // get
			{"both", nil, true, []string{"GET", "POST"}},                       // get --http2
		}, runGet},
		{"connect", []alpnClient{
			{"http/1.1", []string{"http/1.1"}, false, []string{"GET", "POST"}},
			{"both", []string{"h2", "http/1.1"}, false, []string{"GET", "POST"}},
		}, runConnectCell},
	}
	cells := 0
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			for _, server := range servers {
				for _, aw := range worlds {
					cfg := aw.w.ServerTLS.Clone()
					cfg.NextProtos = server
					aw.cfg.Store(cfg)
				}
				for _, early := range []string{"h2", "http/1.1", ""} {
					aw := worlds[early]
					for _, c := range k.clients {
						for _, method := range c.methods {
							cells++
							name := strings.Join([]string{k.kind, c.name, "zdata=" + alpnName(zdataProtos(early)), "server=" + alpnName(server), method}, " ")
							path := "/" + strings.NewReplacer(" ", "/", "=", "-").Replace(name)
							wantOK, wantZTLS := alpnExpect(c, early, server, method)
							conns0 := aw.conns.Load()
							rep, err := k.run(t, aw, c, method, path)
							n, nEarly := be.count(path)
							conns := aw.conns.Load() - conns0
							ztls := rep.Mode == "ztls" && rep.EarlyData.Accepted
							t.Logf("%-58s backend %d, connections %d, ztls %-5v alpn %q", name, n, conns, ztls, rep.TLS.ALPN)
							switch {
							case wantOK && (err != nil || n != 1):
								t.Errorf("%s: the backend received %d requests, want 1 (error %v)", name, n, err)
							case !wantOK && (err == nil || n != 0):
								t.Errorf("%s: no protocol in common, yet the backend received %d requests (error %v)", name, n, err)
							case conns != 1:
								t.Errorf("%s: the server accepted %d connections, want 1", name, conns)
							case ztls != wantZTLS:
								t.Errorf("%s: ZTLS %v, want %v (fallback: %s)", name, ztls, wantZTLS, rep.FallbackReason)
							case nEarly != n && wantZTLS || nEarly != 0 && !wantZTLS:
								t.Errorf("%s: the backend saw %d of %d requests as early data", name, nEarly, n)
							}
						}
					}
				}
			}
		})
	}
	t.Logf("%d cells", cells)
}

// zdataProtos names a Z-data early ALPN like a protocol list.
func zdataProtos(early string) []string {
	if early == "" {
		return nil
	}
	return []string{early}
}

// runTransport sends one request through a new ztlshttp.Transport
// (first contact).
func runTransport(t *testing.T, aw *alpnWorld, c alpnClient, method, path string) (dial.Report, error) {
	cfg := aw.w.ClientTLS()
	cfg.NextProtos = c.protos
	tr := ztlshttp.NewTransport(dial.Options{Mode: "auto", TLS: cfg, Resolver: aw.res, ZDataBudget: 2 * time.Second,
		Memory: dial.NewMemory(), Cache: prevalidate.NewCache(prevalidate.CacheOptions{})})
	defer tr.CloseIdleConnections()
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("pay=1")
	}
	req, _ := http.NewRequest(method, "https://"+aw.w.HostPort()+path, body)
	resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return dial.Report{}, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	var rep dial.Report
	if r := ztlshttp.ReportOf(resp); r != nil {
		rep = *r
	}
	if err == nil && (resp.StatusCode != 200 || !strings.HasPrefix(string(got), "page "+path)) {
		err = errors.New(resp.Status + ": " + string(got))
	}
	if err == nil && (resp.ProtoMajor == 2) != (rep.TLS.ALPN == "h2") {
		err = errors.New(resp.Proto + " on a connection that negotiated " + strconv.Quote(rep.TLS.ALPN))
	}
	return rep, err
}

// runGet runs ztls get (a POST with -d): --http2 for the clients that
// switch.
func runGet(t *testing.T, aw *alpnWorld, c alpnClient, method, path string) (dial.Report, error) {
	args := []string{"get", "https://" + aw.w.HostPort() + path}
	if method == "POST" {
		args = append(args, "-d", "pay=1")
	}
	if c.canSwitch {
		args = append(args, "--http2")
	}
	if c.protos != nil && c.canSwitch {
		args = append(args, "--alpn", strings.Join(c.protos, ","))
	}
	return runCLICell(t, aw, args)
}

// runConnectCell runs ztls connect with an HTTP/1.1 request.
func runConnectCell(t *testing.T, aw *alpnWorld, c alpnClient, method, path string) (dial.Report, error) {
	req := method + " " + path + " HTTP/1.1\r\nHost: " + aw.w.HostPort() + "\r\nConnection: close\r\n"
	if method == "POST" {
		req += "Content-Length: 5\r\n\r\npay=1"
	} else {
		req += "\r\n"
	}
	return runCLICell(t, aw, []string{"connect", aw.w.HostPort(), "--alpn", strings.Join(c.protos, ","), "--data", req})
}

// runCLICell runs the binary against aw with its own HOME (no memory of
// earlier runs) and returns its JSON report.
func runCLICell(t *testing.T, aw *alpnWorld, args []string) (dial.Report, error) {
	args = append(args, "--resolver", aw.w.DNSAddr, "--ca", aw.w.CAFile, "--json", "--zdata-budget", "2s", "--timeout", "5s")
	cmd := exec.Command(ztlsBinary(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep dial.Report
	if jerr := json.Unmarshal(out, &rep); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil {
		return rep, errors.New(err.Error() + ": " + rep.Error + " " + stderr.String())
	}
	return rep, nil
}
