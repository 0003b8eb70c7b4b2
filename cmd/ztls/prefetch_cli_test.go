package main

// ztls prefetch and get --prefetch-links through the built binary,
// against a lab world whose server is the ztlshttp proxy in front of a
// page that links to another host.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/prevalidate"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/ztlshttp"
)

func TestPrefetchCLI(t *testing.T) {
	ztlsBinary(t)
	cacheDir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cacheDir)
	var page string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, page)
	}))
	t.Cleanup(origin.Close)
	u, _ := url.Parse(origin.URL)
	proxy := &ztlshttp.Proxy{Backend: u}
	w, err := lab.Start(lab.Options{Handler: func(c *tls13.Conn) { proxy.ServeConn(c) }, AltNames: []string{"other.ztls.test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	w.ServerTLS.StrikeRegister = tls13.NewMemoryStrikeRegister(1000, time.Time{})
	if err := w.AddAddress("other.ztls.test", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	other := fmt.Sprintf("other.ztls.test:%d", w.Port)
	page = fmt.Sprintf(`<!doctype html><html><body><a href="https://%s/a">a</a> <img src="//%s/i.png">
<a href="/relative">same host</a> <a href="http://plain.test/">plain</a> <a href="https://%s/self">self</a></body></html>`, other, other, w.HostPort())
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, w.RootsPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--resolver", w.DNSAddr, "--ca", caFile}

	r := uxRun(t, nil, append([]string{"prefetch", w.HostPort(), "--json"}, common...)...)
	var got []prevalidate.Prefetched
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got) != 1 {
		t.Fatalf("prefetch --json: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if p := got[0]; p.ZData == nil || !p.Precomputed || p.ChainFrom != "zdata" || !p.Expires.After(clock.Now()) || p.ExpiresBy == "" {
		t.Fatalf("prefetched %+v", p)
	}

	r = uxRun(t, nil, append([]string{"prefetch", w.HostPort(), other, "nothing.ztls.test"}, common...)...)
	for _, want := range []string{w.HostPort() + ": fetched and validated", "Z-data id", "signature, validity, chain, name and revocation verified",
		other + ": fetched and validated", "no Z-data", "from a truncated handshake with the server", "nothing.ztls.test:443: not prefetched", "expires"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("prefetch output lacks %q:\n%s", want, r.stdout)
		}
	}
	if r.code != 1 || !strings.Contains(r.stderr, "1 of 3 targets not prefetched") {
		t.Errorf("a failed target: exit %d, %s", r.code, r.stderr)
	}

	// Another process: get takes the DNS answers kept, verifies itself,
	// and prefetches the one other https host the page links to.
	r = uxRun(t, nil, append([]string{"get", "https://" + w.HostPort() + "/", "--json", "--prefetch-links"}, common...)...)
	rep := uxReport(t, r)
	if r.code != 0 || rep.Mode != "ztls" || rep.Prefetch != dial.PrefetchDNS {
		t.Fatalf("get: exit %d, mode %s (%s), prefetch %q\n%s", r.code, rep.Mode, rep.FallbackReason, rep.Prefetch, r.stderr)
	}
	for _, want := range []string{other + " prefetched", "1 of 1 linked hosts prefetched"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("get --prefetch-links: stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	r = uxRun(t, nil, "prefetch", "--clear")
	if r.code != 0 {
		t.Fatalf("prefetch --clear: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, "ztls", "prefetch.json")); !os.IsNotExist(err) {
		t.Fatalf("the cache file is still there after --clear: %v", err)
	}
	if r := uxRun(t, nil, "get", "https://x.test/", "--prefetch-links", "--http2"); r.code == 0 || !strings.Contains(r.stderr, "leave out --http2") {
		t.Fatalf("--prefetch-links with --http2: exit %d %s", r.code, r.stderr)
	}
}

func TestLinkedHosts(t *testing.T) {
	page := `<a href="https://a.test/x">  <link href="https://B.test:8443/s.css"> <script src="//c.test/j.js"></script>
<a href="https://a.test/y"> <a href="http://d.test/"> <a href="/rel"> <form action="https://self.test/f"> <a href="mailto:x@y">`
	got := linkedHosts(strings.NewReader(page), "self.test:443")
	want := []string{"a.test:443", "B.test:8443", "c.test:443"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("linked hosts %q, want %q", got, want)
	}
}

// TestPrefetchCLIZDataFromHTTPS: a service whose Z-data is in the HTTPS
// record only is prefetched with Z-data from it (JSON zdata.from
// "https", the text says so); with --zdata-from txt there is none, and
// the text says why; an unknown --zdata-from is refused, saying what
// works.
func TestPrefetchCLIZDataFromHTTPS(t *testing.T) {
	ztlsBinary(t)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	w, err := lab.Start(lab.Options{HTTPSZData: true, NoTXT: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, w.RootsPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--resolver", w.DNSAddr, "--ca", caFile}

	r := uxRun(t, nil, append([]string{"prefetch", w.HostPort(), "--json"}, common...)...)
	var got []prevalidate.Prefetched
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &got) != nil || len(got) != 1 {
		t.Fatalf("prefetch --json: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if p := got[0]; p.ZData == nil || p.ZData.From != "https" || !strings.Contains(r.stdout, `"from": "https"`) {
		t.Fatalf("prefetched %+v\n%s", p, r.stdout)
	}
	r = uxRun(t, nil, append([]string{"prefetch", w.HostPort()}, common...)...)
	if r.code != 0 || !strings.Contains(r.stdout, "from the HTTPS record") {
		t.Fatalf("prefetch: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = uxRun(t, nil, append([]string{"prefetch", w.HostPort(), "--zdata-from", "txt"}, common...)...)
	if r.code != 0 || strings.Contains(r.stdout, "Z-data id") || !strings.Contains(r.stdout, "no ZTLS: no Z-data") {
		t.Fatalf("prefetch --zdata-from txt: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	r = uxRun(t, nil, append([]string{"prefetch", w.HostPort(), "--zdata-from", "dns"}, common...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "want https, both or txt") {
		t.Fatalf("prefetch --zdata-from dns: exit %d\n%s", r.code, r.stderr)
	}
}
