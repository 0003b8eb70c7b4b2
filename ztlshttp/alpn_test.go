package ztlshttp

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A POST to a server that selects HTTP/1.1 when the Transport wrote it
// as HTTP/2: the connection is handed to the HTTP/1.1 client after its
// handshake, the request not sent, and that client sends it, body and
// all, once, on the same connection.
func TestTransportHandsOverAfterHandshake(t *testing.T) {
	w, be, opts := setupWorldALPN(t, "h2", "http/1.1")
	tr := NewTransport(opts)
	t.Cleanup(tr.CloseIdleConnections)
	resp, body := get(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "POST", "https://"+w.HostPort()+"/buy", "pay=1")
	if resp.ProtoMajor != 1 || body != "page /buy" {
		t.Fatalf("%s: %q", resp.Proto, body)
	}
	if got := be.seenBodies(); len(got) != 1 || got[0] != "pay=1" {
		t.Fatalf("the backend received %q", got)
	}
	if n := w.Accepted(); n != 1 {
		t.Fatalf("%d connections, want 1", n)
	}
	if r := ReportOf(resp); r.TLS.ALPN != "http/1.1" || r.Error != "" {
		t.Fatalf("report: ALPN %q, error %q", r.TLS.ALPN, r.Error)
	}
}

// A body that cannot be read again (no GetBody) cannot follow its
// connection to the other client: the request fails, and nothing of it
// reached the server's backend.
func TestTransportHandOverNeedsGetBody(t *testing.T) {
	w, be, opts := setupWorldALPN(t, "", "http/1.1")
	tr := NewTransport(opts)
	t.Cleanup(tr.CloseIdleConnections)
	req, _ := http.NewRequest("POST", "https://"+w.HostPort()+"/buy", io.MultiReader(strings.NewReader("pay=1")))
	req.ContentLength = 5
	_, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
	if err == nil || !strings.Contains(err.Error(), "GetBody") {
		t.Fatalf("error %v, want one naming GetBody", err)
	}
	if got := be.seen(); len(got) != 0 {
		t.Fatalf("the backend received %d requests", len(got))
	}
}

// ReportOf's report has the first byte's time and the response's size
// (issue 27, item 8), each response on a connection its own size.
func TestReportOfFirstByteAndSize(t *testing.T) {
	for _, early := range []string{"h2", "http/1.1"} {
		t.Run(early, func(t *testing.T) {
			w, _, opts := setupWorldALPN(t, early, early)
			tr := NewTransport(opts)
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			resp, body := get(t, client, "GET", "https://"+w.HostPort()+"/first", "")
			r := ReportOf(resp)
			if r.Mode != "ztls" || r.TLS.ALPN != early || r.Timing.FirstByte <= 0 || r.Timing.FirstByte < r.Timing.Handshake || r.ResponseBytes != len(body) {
				t.Fatalf("report: mode %s, ALPN %q, first byte %v ms (handshake %v), %d bytes of %d", r.Mode, r.TLS.ALPN, r.Timing.FirstByte, r.Timing.Handshake, r.ResponseBytes, len(body))
			}
			resp2, body2 := get(t, client, "GET", "https://"+w.HostPort()+"/second/longer", "")
			r2 := ReportOf(resp2)
			if r2.Timing.FirstByte != r.Timing.FirstByte || r2.ResponseBytes != len(body2) || r.ResponseBytes != len(body) {
				t.Fatalf("second response: first byte %v (connection's %v), %d bytes of %d", r2.Timing.FirstByte, r.Timing.FirstByte, r2.ResponseBytes, len(body2))
			}
		})
	}
}

// Concurrent first requests to a server never met, GETs and POSTs, each
// reach the backend once, whatever the Z-data and the server speak: the
// connections that change hands take their requests along, and the
// requests that shared one are sent again by the client that speaks the
// server's protocol.
func TestTransportConcurrentFirstContact(t *testing.T) {
	for _, tc := range [][]string{
		{"http/1.1", "http/1.1"}, {"h2", "http/1.1"}, {"", "h2"}, {"http/1.1", "h2"},
		{"http/1.1", "h2", "http/1.1"}, {"h2", "h2"}, {""},
	} {
		t.Run(strings.Join(tc, ","), func(t *testing.T) {
			w, be, opts := setupWorldALPN(t, tc[0], tc[1:]...)
			tr := NewTransport(opts)
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			const n = 6
			errs := make(chan error, n)
			for i := range n {
				go func() {
					method, body := "GET", io.Reader(http.NoBody)
					if i%2 == 1 {
						method, body = "POST", io.NopCloser(strings.NewReader("x"))
					}
					req, _ := http.NewRequest(method, "https://"+w.HostPort()+"/c"+strconv.Itoa(i), body)
					if method == "POST" {
						req.ContentLength = 1
						req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("x")), nil }
					}
					resp, err := client.Do(req)
					if err == nil {
						_, err = io.ReadAll(resp.Body)
						resp.Body.Close()
					}
					errs <- err
				}()
			}
			for range n {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			if got := be.seen(); len(got) != n {
				t.Fatalf("the backend received %d requests, want %d", len(got), n)
			}
		})
	}
}
