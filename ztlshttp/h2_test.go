package ztlshttp

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
)

// setupH2 is a lab world whose Proxy speaks HTTP/2 and HTTP/1.1 and
// whose Z-data's early protocol is h2, with a Transport for it.
func setupH2(t *testing.T) (*lab.World, *backend, *http.Client, dial.Options) {
	w, be, opts := setupWorldALPN(t, "h2", "h2", "http/1.1")
	tr := NewTransport(opts)
	t.Cleanup(tr.CloseIdleConnections)
	return w, be, &http.Client{Transport: tr, Timeout: 10 * time.Second}, opts
}

func get(t *testing.T, client *http.Client, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if body == "" {
		req.Body = http.NoBody
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(got)
}

// The first GET goes in the first flight as HTTP/2 frames (preface,
// SETTINGS, HEADERS) and is answered before the handshake completes: the
// proxy forwards it at once with Early-Data: 1. A second request on the same
// connection goes after the handshake, not early.
func TestH2EarlyGETThroughProxy(t *testing.T) {
	w, be, client, _ := setupH2(t)
	resp, body := get(t, client, "GET", "https://"+w.HostPort()+"/h2", "")
	if resp.StatusCode != 200 || body != "page /h2" || resp.ProtoMajor != 2 {
		t.Fatalf("%s %d: %q", resp.Proto, resp.StatusCode, body)
	}
	r := ReportOf(resp)
	// Not AnswerInFirstFlight: over HTTP/2 the server's SETTINGS is
	// application data too, so it says little about the response.
	if r == nil || r.Mode != "ztls" || !r.EarlyData.Accepted || r.TLS.ALPN != "h2" {
		t.Fatalf("report %+v", r)
	}
	if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" {
		t.Fatalf("resp.TLS %+v", resp.TLS)
	}
	resp2, body := get(t, client, "GET", "https://"+w.HostPort()+"/again", "")
	if body != "page /again" || resp2.ProtoMajor != 2 {
		t.Fatalf("%s: %q", resp2.Proto, body)
	}
	if got := be.seen(); strings.Join(got, ",") != "1," {
		t.Fatalf("backend saw Early-Data %q, want [1 \"\"]", got)
	}
	if r2 := ReportOf(resp2); r2.Timing != r.Timing || &r2.Trace[0] != &r.Trace[0] {
		t.Fatal("the second request did not share the first's connection")
	}
}

// A POST over HTTP/2 never goes early: the connection opens with TLS 1.3
// and the request goes after the handshake, body and all.
func TestH2PostNotEarly(t *testing.T) {
	w, be, client, _ := setupH2(t)
	resp, body := get(t, client, "POST", "https://"+w.HostPort()+"/buy", "pay=1")
	if resp.StatusCode != 200 || body != "page /buy" || resp.ProtoMajor != 2 {
		t.Fatalf("%s %d: %q", resp.Proto, resp.StatusCode, body)
	}
	if got := be.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("backend saw Early-Data %q for a POST", got)
	}
	if b := be.seenBodies(); b[0] != "pay=1" {
		t.Fatalf("backend saw body %q", b[0])
	}
	r := ReportOf(resp)
	if r.EarlyData.Offered || r.Mode != "tls" || r.FallbackReason != dial.ReasonNoEarly {
		t.Fatalf("report: mode %s, fallback %q, early %+v", r.Mode, r.FallbackReason, r.EarlyData)
	}
}

func TestH2ProxyHonours425(t *testing.T) {
	w, be, client, _ := setupH2(t)
	resp, body := get(t, client, "GET", "https://"+w.HostPort()+"/too-early", "")
	if resp.StatusCode != 200 || body != "page /too-early" || resp.ProtoMajor != 2 {
		t.Fatalf("%s %d: %q", resp.Proto, resp.StatusCode, body)
	}
	if got := be.seen(); strings.Join(got, ",") != "1," {
		t.Fatalf("backend saw Early-Data %q, want [1 \"\"]", got)
	}
}

// A Transport reaching an HTTP/1.1-only server (its Z-data's early ALPN
// http/1.1) sends its first request early as HTTP/1.1, the connection
// handed from the HTTP/2 client to the HTTP/1.1 one before its
// ClientHello, and then goes straight to HTTP/1.1.
func TestH2FallbackToHTTP1(t *testing.T) {
	w, be, client := setup(t)
	for i := range 2 {
		resp, body := get(t, client, "GET", "https://"+w.HostPort()+"/p"+strconv.Itoa(i), "")
		if resp.ProtoMajor != 1 || body != "page /p"+strconv.Itoa(i) {
			t.Fatalf("%s: %q", resp.Proto, body)
		}
		if r := ReportOf(resp); i == 0 && (r.Mode != "ztls" || !r.EarlyData.Accepted) {
			t.Fatalf("report %+v", r)
		}
	}
	if got := be.seen(); strings.Join(got, ",") != "1," {
		t.Fatalf("backend saw Early-Data %q, want [1 \"\"]", got)
	}
}

// rawH2 writes what an HTTP/2 client sends, for tests that cut it at
// chosen places.
type rawH2 struct {
	buf  bytes.Buffer
	fr   *http2.Framer
	hbuf bytes.Buffer
	henc *hpack.Encoder
}

func newRawH2() *rawH2 {
	r := &rawH2{}
	r.buf.WriteString(http2.ClientPreface)
	r.fr = http2.NewFramer(&r.buf, nil)
	r.fr.WriteSettings()
	r.henc = hpack.NewEncoder(&r.hbuf)
	return r
}

// block is a request's header block.
func (r *rawH2) block(method, host, path string, contentLength int) []byte {
	r.hbuf.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "https"}, {":authority", host}, {":path", path}} {
		r.henc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if contentLength >= 0 {
		r.henc.WriteField(hpack.HeaderField{Name: "content-length", Value: strconv.Itoa(contentLength)})
	}
	return bytes.Clone(r.hbuf.Bytes())
}

func (r *rawH2) take() []byte {
	b := bytes.Clone(r.buf.Bytes())
	r.buf.Reset()
	return b
}

// readH2Response reads frames until stream 1's response ends.
func readH2Response(t *testing.T, c net.Conn) (status, body string) {
	t.Helper()
	fr := http2.NewFramer(io.Discard, c)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	var b strings.Builder
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the response: %v (status %q, body %q)", err, status, b.String())
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 {
				status = f.PseudoValue("status")
				if f.StreamEnded() {
					return status, b.String()
				}
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				b.Write(f.Data())
				if f.StreamEnded() {
					return status, b.String()
				}
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream reset: %v", f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY: %v", f.ErrCode)
		}
	}
}

// The proxy forwards as early exactly the HTTP/2 requests whose frames
// all came as early data: a request whose frames straddle the end of the
// early data goes after the handshake, not marked, body whole.
func TestH2ProxyStraddlingRequestNotEarly(t *testing.T) {
	w, be, opts := setupWorldALPN(t, "h2", "h2", "http/1.1")
	const payload = "amount=100&to=mallory"
	for _, tc := range []struct {
		name      string
		send      func(r *rawH2) (early, later []byte)
		wantEarly string
	}{
		{"whole POST with body early", func(r *rawH2) ([]byte, []byte) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("POST", w.Host, "/s", len(payload)), EndHeaders: true})
			r.fr.WriteData(1, true, []byte(payload))
			return r.take(), nil
		}, "1"},
		{"body's end after the handshake", func(r *rawH2) ([]byte, []byte) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("POST", w.Host, "/s", len(payload)), EndHeaders: true})
			r.fr.WriteData(1, false, []byte(payload[:5]))
			early := r.take()
			r.fr.WriteData(1, true, []byte(payload[5:]))
			return early, r.take()
		}, ""},
		{"body after the handshake", func(r *rawH2) ([]byte, []byte) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("POST", w.Host, "/s", len(payload)), EndHeaders: true})
			early := r.take()
			r.fr.WriteData(1, true, []byte(payload))
			return early, r.take()
		}, ""},
		{"headers continued after the handshake", func(r *rawH2) ([]byte, []byte) {
			blk := r.block("GET", w.Host, "/s", -1)
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:4], EndStream: true})
			early := r.take()
			r.fr.WriteContinuation(1, true, blk[4:])
			return early, r.take()
		}, ""},
		{"frame cut by the end of the early data", func(r *rawH2) ([]byte, []byte) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("GET", w.Host, "/s", -1), EndStream: true, EndHeaders: true})
			all := r.take()
			return all[:len(all)-3], all[len(all)-3:]
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := len(be.seen())
			early, later := tc.send(newRawH2())
			res := dialEarly(t, w, opts, "h2", early)
			if !res.Report.EarlyData.Accepted {
				t.Fatalf("early data not accepted: %+v (%s)", res.Report.EarlyData, res.Report.FallbackReason)
			}
			if _, err := res.Conn.Write(later); err != nil {
				t.Fatal(err)
			}
			status, body := readH2Response(t, res.Conn)
			if status != "200" || body != "page /s" {
				t.Fatalf("status %s: %q", status, body)
			}
			if got := be.seen()[n:]; len(got) != 1 || got[0] != tc.wantEarly {
				t.Fatalf("backend saw Early-Data %q, want %q", got, tc.wantEarly)
			}
			if bodies := be.seenBodies()[n:]; strings.Contains(tc.name, "POST") || strings.Contains(tc.name, "body") {
				if bodies[0] != payload {
					t.Fatalf("backend saw body %q, want %q", bodies[0], payload)
				}
			}
		})
	}
}

// A client can't make the proxy mark a request early by sending the
// marker itself: it carries a secret of the connection.
func TestH2ProxyMarkerNotForgeable(t *testing.T) {
	w, be, _, _ := setupH2(t)
	req, _ := http.NewRequest("GET", "https://"+w.HostPort()+"/forged", nil)
	req.Header.Set(earlyMarker, "00000000000000000000000000000000 1")
	resp, err := stdClient(t, w).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 {
		t.Fatalf("%s %d", resp.Proto, resp.StatusCode)
	}
	if got := be.seen(); len(got) != 1 || got[0] != "" {
		t.Fatalf("backend saw Early-Data %q", got)
	}
}

func TestH2EarlyVerdict(t *testing.T) {
	r := newRawH2()
	r.fr.WriteWindowUpdate(0, 1<<20)
	r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("GET", "x", "/", -1), EndStream: true, EndHeaders: true})
	get := r.take()
	if v := h2Early(get); v != h2Whole {
		t.Fatalf("whole GET: %v", v)
	}
	for i := range len(get) {
		if v := h2Early(get[:i]); v != h2NeedMore {
			t.Fatalf("prefix of %d bytes: %v, want need more", i, v)
		}
	}
	for _, tc := range []struct {
		name  string
		build func(r *rawH2)
	}{
		{"POST", func(r *rawH2) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("POST", "x", "/", 0), EndStream: true, EndHeaders: true})
		}},
		{"GET with a body", func(r *rawH2) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("GET", "x", "/", 1), EndHeaders: true})
		}},
		{"two requests", func(r *rawH2) {
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block("GET", "x", "/", -1), EndStream: true, EndHeaders: true})
			r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: r.block("GET", "x", "/", -1), EndStream: true, EndHeaders: true})
		}},
		{"a PING", func(r *rawH2) { r.fr.WritePing(false, [8]byte{}) }},
		{"too large", func(r *rawH2) {
			r.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20})
			r.buf.Write(make([]byte, maxEarlyH2))
		}},
	} {
		r := newRawH2()
		tc.build(r)
		if v := h2Early(r.take()); v != h2NotEarly {
			t.Errorf("%s: %v, want not early", tc.name, v)
		}
	}
}
