package main

// Early data is replayable (RFC 8446, Section 8): `ztls connect` sends a
// request early by default only when a replay is harmless (RFC 8470,
// Section 4.1). Driven through the built binary against a lab world whose
// server is the ztlshttp reverse proxy in front of a recording backend.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/ztlshttp"
)

// seenRequest is what the backend got: its Early-Data header and body.
type seenRequest struct{ early, body string }

type recordingBackend struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (b *recordingBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.seen = append(b.seen, seenRequest{r.Header.Get("Early-Data"), string(body)})
	b.mu.Unlock()
	io.WriteString(w, "done "+r.Method)
}

// next returns the requests seen since the last call.
func (b *recordingBackend) next() []seenRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.seen
	b.seen = nil
	return s
}

// earlySite is a lab world (DNS authority with Z-data, ZTLS server) whose
// server proxies to a recording backend.
type earlySite struct {
	w       *lab.World
	backend *recordingBackend
	caFile  string
}

func startEarlySite(t *testing.T) *earlySite {
	be := &recordingBackend{}
	origin := httptest.NewServer(be)
	t.Cleanup(origin.Close)
	u, _ := url.Parse(origin.URL)
	proxy := &ztlshttp.Proxy{Backend: u}
	w, err := lab.Start(lab.Options{Handler: func(c *tls13.Conn) { proxy.ServeConn(c) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	// A register whose memory covers all time: this server has no restart
	// to guard against (the default refuses early data for a while).
	w.ServerTLS.StrikeRegister = tls13.NewMemoryStrikeRegister(1000, time.Time{})
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, w.RootsPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	return &earlySite{w: w, backend: be, caFile: caFile}
}

func (s *earlySite) args(data string, extra ...string) []string {
	return append([]string{"connect", s.w.HostPort(), "--resolver", s.w.DNSAddr, "--ca", s.caFile,
		"--zdata-budget", "2s", "--json", "--data", data}, extra...)
}

// connectJSON runs `ztls connect --json` and returns its report.
func (s *earlySite) connectJSON(t *testing.T, data string, extra ...string) dial.Report {
	t.Helper()
	var rep dial.Report
	if err := json.Unmarshal([]byte(run(t, s.args(data, extra...)...)), &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

func (s *earlySite) request(method, body string) string {
	return method + " /order HTTP/1.1\r\nHost: " + s.w.Host + "\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nConnection: close\r\n\r\n" + body
}

func TestEarlyCLIPostNotEarlyByDefault(t *testing.T) {
	s := startEarlySite(t)
	const body = "item=42&pay=yes"

	// The control: a GET rides as ZTLS early data.
	if rep := s.connectJSON(t, s.request("GET", "")); rep.Mode != "ztls" || !rep.EarlyData.Accepted {
		t.Fatalf("GET: mode %s (%s), early %+v", rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	if seen := s.backend.next(); len(seen) != 1 || seen[0].early != "1" {
		t.Fatalf("GET: backend saw %+v, want one early request", seen)
	}

	// A POST goes after the handshake, and the report says why.
	rep := s.connectJSON(t, s.request("POST", body))
	if rep.EarlyData.Offered || rep.Mode != "tls" {
		t.Fatalf("POST went early: mode %s, early %+v", rep.Mode, rep.EarlyData)
	}
	for _, want := range []string{"not as early data", "POST is not an idempotent method", "--early-unsafe"} {
		if !strings.Contains(rep.FallbackReason, want) {
			t.Errorf("fallback reason %q does not say %q", rep.FallbackReason, want)
		}
	}
	if rep.ResponseBytes == 0 {
		t.Fatal("POST: no response")
	}
	if seen := s.backend.next(); len(seen) != 1 || seen[0] != (seenRequest{"", body}) {
		t.Fatalf("POST: backend saw %+v, want one request not early with the body", seen)
	}

	// Data that is not an HTTP request is not sent early either (and the
	// HTTP server, closing without a response, makes it exit status 1).
	r := uxRun(t, nil, s.args("ping")...)
	if rep := uxReport(t, r); r.code != 1 || rep.EarlyData.Offered || !strings.Contains(rep.FallbackReason, "not an HTTP request") {
		t.Fatalf("non-HTTP data: exit %d, early %+v, fallback %q", r.code, rep.EarlyData, rep.FallbackReason)
	}
	s.backend.next()

	// With the opt-in it goes early, marked Early-Data: 1 for the backend.
	rep = s.connectJSON(t, s.request("POST", body), "--early-unsafe")
	if rep.Mode != "ztls" || !rep.EarlyData.Accepted {
		t.Fatalf("--early-unsafe POST: mode %s (%s), early %+v", rep.Mode, rep.FallbackReason, rep.EarlyData)
	}
	if seen := s.backend.next(); len(seen) != 1 || seen[0] != (seenRequest{"1", body}) {
		t.Fatalf("--early-unsafe POST: backend saw %+v, want one early request with the body", seen)
	}
}

// --mode ztls needs an early request: a POST without the opt-in is refused
// before anything is sent, and the error says what to do.
func TestEarlyCLIModeZTLSRefusesPost(t *testing.T) {
	s := startEarlySite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, ztlsBinary(t), s.args(s.request("POST", "x"), "--mode", "ztls")...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("ztls connect --mode ztls with a POST succeeded:\n%s", out)
	}
	for _, want := range []string{"POST is not an idempotent method", "--early-unsafe", "--mode auto"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("error %q does not say %q", out, want)
		}
	}
	if seen := s.backend.next(); len(seen) != 0 {
		t.Fatalf("backend saw %+v", seen)
	}
}
