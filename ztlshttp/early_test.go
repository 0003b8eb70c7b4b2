package ztlshttp

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
)

func TestEarlySafe(t *testing.T) {
	for _, tc := range []struct {
		req  string
		ok   bool
		want string // in why
	}{
		{"GET /", true, ""},
		{"GET /index.html\n", true, ""},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\n", true, ""},
		{"HEAD /x HTTP/1.0\r\n\r\n", true, ""},
		{"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", true, ""},
		{"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nab", true, ""},
		{"POST /buy HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", false, "POST is not an idempotent method"},
		{"PUT /", false, "PUT is not an idempotent method"},
		{"get / HTTP/1.1\r\n\r\n", false, "get is not an idempotent method"},
		{"ping", false, "not an HTTP request"},
		{"", false, "not an HTTP request"},
		{"GET / HTTP/1.1\r\nHost: x\r\n\r\nPOST /buy HTTP/1.1\r\nHost: x\r\n\r\n", false, "more than one request"},
		{"GET /\nPOST /buy", false, "not one whole HTTP/1.x request"},
		{"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab", false, "incomplete"},
		{"GET / HTTP/1.1\r\nHost: x\r\n", false, "incomplete"},
	} {
		ok, why := EarlySafe([]byte(tc.req))
		if ok != tc.ok || !strings.Contains(why, tc.want) {
			t.Errorf("EarlySafe(%q) = %v, %q; want %v, %q", tc.req, ok, why, tc.ok, tc.want)
		}
	}
}

// No truncated prefix of a request goes early from the transport: only
// the whole request does.
func TestSendEarlyNoTruncatedPrefix(t *testing.T) {
	for _, req := range []string{
		"GET /a/b?c=d HTTP/1.1\r\nHost: www.ztls.test\r\nUser-Agent: Go-http-client/1.1\r\n\r\n",
		"GET /a HTTP/1.1\r\nHost: www.ztls.test\r\nContent-Length: 4\r\n\r\nbody",
		"GET /a HTTP/1.1\r\nHost: www.ztls.test\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n",
	} {
		if !sendEarly([]byte(req)) {
			t.Errorf("whole request %q not sent early", req)
		}
		for i := range len(req) {
			if sendEarly([]byte(req[:i])) {
				t.Errorf("prefix %q of a request would go early", req[:i])
			}
		}
	}
}

// A GET larger than net/http's 4 KiB write buffer reaches the connection
// in several writes: none of it goes early, all of it after the handshake.
func TestTransportSplitRequestNotEarly(t *testing.T) {
	w, be, client := setup(t)
	req, _ := http.NewRequest("GET", "https://"+w.HostPort()+"/big", nil)
	pad := strings.Repeat("p", 6000)
	req.Header.Set("X-Pad", pad)
	var lc *lazyConn
	req = req.WithContext(withConn(req.Context(), &lc))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "page /big" {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := be.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("backend saw Early-Data %q, want one request not early", got)
	}
	be.mu.Lock()
	gotPad := be.pads[0]
	be.mu.Unlock()
	if gotPad != len(pad) {
		t.Fatalf("backend saw an X-Pad of %d bytes, want %d", gotPad, len(pad))
	}
	if r := lc.Report(); r.EarlyData.Offered || r.FallbackReason != dial.ReasonNoEarly {
		t.Fatalf("split request: early %+v, fallback %q", r.EarlyData, r.FallbackReason)
	}
}

// withConn makes a request's context note the connection it got.
func withConn(ctx context.Context, lc **lazyConn) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		*lc, _ = info.Conn.(*lazyConn)
	}})
}

// dialEarly connects to w over ZTLS, offering ALPN proto only, and sends
// early as 0-RTT data (the caller opted in: ReplaySafe). The connection
// is closed when the test ends.
func dialEarly(t *testing.T, w interface{ HostPort() string }, opts dial.Options, proto string, early []byte) *dial.Result {
	t.Helper()
	o := opts
	o.Mode, o.Request, o.ReplaySafe = "ztls", early, true
	o.TLS = o.TLS.Clone()
	o.TLS.NextProtos = []string{proto}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	res, err := dial.Connect(ctx, w.HostPort(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Conn.Close() })
	return res
}

// earlyClient sends early as 0-RTT data over ZTLS (the caller opted in:
// ReplaySafe), then after the handshake writes later, and returns the
// response and the connection report.
func earlyClient(t *testing.T, w interface{ HostPort() string }, opts dial.Options, early, later string) (*http.Response, string, dial.Report) {
	t.Helper()
	res := dialEarly(t, w, opts, "http/1.1", []byte(early))
	defer res.Conn.Close()
	if later != "" {
		if _, err := io.WriteString(res.Conn, later); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(res.Conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body), res.Report
}

func postRequest(host, path, body string) string {
	return "POST " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: " + strconv.Itoa(len(body)) +
		"\r\nConnection: close\r\n\r\n" + body
}

// After a 425 to an early request, the retry carries the whole body again.
func TestProxy425RetryResendsBody(t *testing.T) {
	w, be, opts := setupWorld(t)
	const body = "amount=100&to=mallory"
	resp, got, rep := earlyClient(t, w, opts, postRequest(w.Host, "/too-early", body), "")
	if resp.StatusCode != 200 || got != "page /too-early" {
		t.Fatalf("status %d: %s", resp.StatusCode, got)
	}
	if !rep.EarlyData.Accepted {
		t.Fatalf("early data not accepted: %+v (%s)", rep.EarlyData, rep.FallbackReason)
	}
	if early := be.seen(); strings.Join(early, ",") != "1," {
		t.Fatalf("backend saw Early-Data %q, want [1 \"\"]", early)
	}
	if bodies := be.seenBodies(); len(bodies) != 2 || bodies[0] != body || bodies[1] != body {
		t.Fatalf("backend saw bodies %q, want the whole body twice", bodies)
	}
}

// Early data that ends inside a request is not forwarded as early, neither
// truncated nor stitched to the rest: the whole request goes to the
// backend after the handshake, without Early-Data: 1.
func TestProxySplitEarlyRequestNotEarly(t *testing.T) {
	w, be, opts := setupWorld(t)
	const body = "amount=100&to=mallory"
	req := postRequest(w.Host, "/split", body)
	line := strings.Index(req, "\r\n")
	head := strings.Index(req, "\r\n\r\n") + 4
	for _, tc := range []struct {
		name string
		cut  int
	}{
		{"in the request line", 7},
		{"before the request line's CRLF", line},
		{"after the request line", line + 2},
		{"in a header", line + 8},
		{"before the blank line", head - 2},
		{"after the headers", head},
		{"in the body", head + 6},
		{"before the body's last byte", len(req) - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(be.seen())
			resp, got, rep := earlyClient(t, w, opts, req[:tc.cut], req[tc.cut:])
			if resp.StatusCode != 200 || got != "page /split" {
				t.Fatalf("status %d: %s", resp.StatusCode, got)
			}
			if !rep.EarlyData.Accepted {
				t.Fatalf("early data not accepted: %+v (%s)", rep.EarlyData, rep.FallbackReason)
			}
			if early := be.seen()[n:]; len(early) != 1 || early[0] != "" {
				t.Fatalf("backend saw Early-Data %q, want one request not early", early)
			}
			if bodies := be.seenBodies()[n:]; bodies[0] != body {
				t.Fatalf("backend saw body %q, want %q", bodies[0], body)
			}
		})
	}
}

// Early data holding a whole request and the start of a second: the first
// is answered as early, the second only after the handshake, not early.
func TestProxyPipelinedEarlyRequestAfterHandshake(t *testing.T) {
	w, be, opts := setupWorld(t)
	first := "GET /first HTTP/1.1\r\nHost: " + w.Host + "\r\n\r\n"
	second := postRequest(w.Host, "/second", "pay=1")
	res := dialEarly(t, w, opts, "http/1.1", []byte(first+second[:10]))
	if !res.Report.EarlyData.Accepted {
		t.Fatalf("early data not accepted: %+v (%s)", res.Report.EarlyData, res.Report.FallbackReason)
	}
	if _, err := io.WriteString(res.Conn, second[10:]); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(res.Conn)
	for _, want := range []string{"page /first", "page /second"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("status %d: %q, want %q", resp.StatusCode, body, want)
		}
	}
	if early := be.seen(); strings.Join(early, ",") != "1," {
		t.Fatalf("backend saw Early-Data %q, want [1 \"\"]", early)
	}
	if bodies := be.seenBodies(); bodies[1] != "pay=1" {
		t.Fatalf("backend saw bodies %q", bodies)
	}
}

// An early request that says Connection: close is answered in the first
// flight and then the proxy ends the connection: it does not wait for more
// requests until its idle timeout (the client would wait with it).
func TestProxyEarlyConnectionCloseEnds(t *testing.T) {
	w, be, opts := setupWorld(t)
	req := "GET /bye HTTP/1.1\r\nHost: " + w.Host + "\r\nConnection: close\r\n\r\n"
	res := dialEarly(t, w, opts, "http/1.1", []byte(req))
	if !res.Report.EarlyData.Accepted {
		t.Fatalf("early data not accepted: %+v (%s)", res.Report.EarlyData, res.Report.FallbackReason)
	}
	// The lab server itself cuts a connection after 10 s: a proxy that kept
	// reading would be found here well before that.
	res.Conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(res.Conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "page /bye" {
		t.Fatalf("body %q, %v", body, err)
	}
	if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
		t.Fatalf("after the response: %q, %v; want the proxy to close the connection (EOF)", rest, err)
	}
	if early := be.seen(); len(early) != 1 || early[0] != "1" {
		t.Fatalf("backend saw Early-Data %q, want one early request", early)
	}
}
