package dial

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
)

// TestReadHTTPStopsAtEnd: an HTTP response ends at its Content-Length or
// last chunk though the server keeps the connection open; one cut short,
// not finished in time or longer than the limit is an error that says so.
func TestReadHTTPStopsAtEnd(t *testing.T) {
	for _, tc := range []struct {
		name, sent string
		method     string // "": GET
		keepOpen   bool   // the server holds the connection after sending
		unclean    bool   // it closes TCP without close_notify
		max        int    // 0: 1 MiB
		want       string // Out, when the response is whole
		err        error  // else the error
		says       string
	}{
		{name: "content-length", sent: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", keepOpen: true,
			want: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "chunked", sent: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n", keepOpen: true,
			want: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nhello"},
		{name: "interim then final", sent: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", keepOpen: true,
			want: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n"},
		{name: "HEAD", method: "HEAD", sent: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", keepOpen: true,
			want: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"},
		{name: "switching protocols", sent: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n\r\nanything goes",
			want: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n\r\nanything goes"},
		{name: "not HTTP", sent: "pong", want: "pong"},
		{name: "not HTTP, held open", sent: "pong", keepOpen: true, err: ErrResponseTimeout, says: "4 bytes received"},
		{name: "until close", sent: "HTTP/1.0 200 OK\r\n\r\nall of it",
			want: "HTTP/1.0 200 OK\r\n\r\nall of it"},
		{name: "until close without close_notify", sent: "HTTP/1.0 200 OK\r\n\r\nall of it", unclean: true,
			err: ErrResponseTruncated, says: "closed the connection without it"},
		{name: "content-length, close without close_notify", sent: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", unclean: true,
			want: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
		{name: "content-length cut", sent: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello", unclean: true,
			err: ErrResponseTruncated, says: "after 5 of its 100 body bytes"},
		{name: "chunked cut", sent: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n", unclean: true,
			err: ErrResponseTruncated, says: "before the last chunk"},
		{name: "header cut", sent: "HTTP/1.1 200 OK\r\nContent-Le",
			err: ErrResponseTruncated, says: "before the end of the response's header"},
		{name: "nothing", sent: "", err: ErrResponseTruncated, says: "without answering"},
		{name: "held open short", sent: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello", keepOpen: true,
			err: ErrResponseTimeout, says: "after 5 of its 100 body bytes"},
		{name: "longer than max", sent: "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nhello", max: 30,
			err: ErrResponseTooLong, says: "(30 bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, server := net.Pipe()
			defer client.Close()
			go func() {
				io.WriteString(server, tc.sent)
				if !tc.keepOpen {
					server.Close()
				}
			}()
			defer server.Close()
			client.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			var out bytes.Buffer
			var r Report
			max := tc.max
			if max == 0 {
				max = 1 << 20
			}
			if tc.method == "" {
				tc.method = "GET"
			}
			var c io.Reader = client
			if tc.unclean {
				c = &eofReader{client}
			}
			rr := &responseReader{c: c, max: max, out: &out, r: &r, start: clock.Now(), step: func(string) {}}
			err := rr.readHTTP(tc.method)
			if tc.err == nil {
				if err != nil || out.String() != tc.want {
					t.Fatalf("got %q, %v; want %q", out.String(), err, tc.want)
				}
				if r.ResponseBytes != len(tc.sent) || r.Timing.FirstByte == 0 {
					t.Fatalf("report: %d bytes (sent %d), first byte %v", r.ResponseBytes, len(tc.sent), r.Timing.FirstByte)
				}
				return
			}
			if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %v, want %v saying %q", err, tc.err, tc.says)
			}
		})
	}
}

// eofReader turns net.Pipe's io.EOF at the peer's close into what a
// tls13.Conn returns for a TCP close without close_notify (its io.EOF is
// close_notify).
type eofReader struct{ net.Conn }

func (e *eofReader) Read(p []byte) (int, error) {
	n, err := e.Conn.Read(p)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return n, err
}

// TestReadAllEnds: without HTTP the response ends at close_notify (EOF);
// a close without it, or no end in time, is an error; the limit is not.
func TestReadAllEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		r       io.Reader
		max     int
		err     error
		limited bool
	}{
		{name: "close_notify", r: strings.NewReader("pong"), max: 10},
		{name: "limit", r: strings.NewReader("pong"), max: 2, limited: true},
		{name: "no close_notify", r: io.MultiReader(strings.NewReader("po"), errReader{io.ErrUnexpectedEOF}), max: 10, err: ErrResponseTruncated},
		{name: "timeout", r: io.MultiReader(strings.NewReader("po"), errReader{timeoutErr{}}), max: 10, err: ErrResponseTimeout},
	} {
		var r Report
		rr := &responseReader{c: tc.r, max: tc.max, r: &r, start: clock.Now(), step: func(string) {}}
		err := rr.readAll()
		if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) || r.ResponseLimited != tc.limited {
			t.Errorf("%s: %v, limited %v", tc.name, err, r.ResponseLimited)
		}
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestConnectHTTPResponseOnOpenConnection: with HTTP, Connect returns at
// the response's end over ZTLS though the server holds the connection.
func TestConnectHTTPResponseOnOpenConnection(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	held := make(chan struct{})
	w := startWorld(t, lab.Options{Handler: func(c *tls13.Conn) {
		if err := c.HandshakeEarly(context.Background()); err != nil {
			return
		}
		buf := make([]byte, 4096)
		if n, _ := c.ReadEarlyData(buf); n == 0 {
			c.Read(buf)
		}
		c.Write([]byte(resp))
		c.Handshake()
		<-held // keeps the connection open, as a keep-alive server does
	}})
	t.Cleanup(func() { close(held) }) // before the world's Close, which waits for the handler
	var out bytes.Buffer
	begin := clock.Now()
	r, err := connect(t, w, func(o *Options) {
		o.Request, o.HTTP, o.Out = []byte("GET / HTTP/1.1\r\nHost: www.ztls.test\r\n\r\n"), true, &out
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.Err != nil || r.Report.Error != "" || out.String() != resp {
		t.Fatalf("err %v (%q), response %q", r.Err, r.Report.Error, out.String())
	}
	if r.Report.Mode != "ztls" {
		t.Fatalf("mode %s (%s)", r.Report.Mode, r.Report.FallbackReason)
	}
	if d := clock.Since(begin); d > 5*time.Second {
		t.Fatalf("took %v: waited for the connection to close", d)
	}
}

// TestConnectFailureReport: a failed Connect returns the report so far,
// its Error set, and errors that name what the server is: not TLS at all
// (plain HTTP), or TLS 1.2 only.
func TestConnectFailureReport(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer plain.Close()
	old := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	old.TLS = &tls.Config{MaxVersion: tls.VersionTLS12}
	old.StartTLS()
	defer old.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := Options{Mode: "tls", TLS: &tls13.Config{InsecureSkipVerify: true}, Request: []byte("GET / HTTP/1.0\r\n\r\n"), ReadResponse: 100}
	res, err := Connect(ctx, plain.Listener.Addr().String(), o)
	var notTLS *NotTLSError
	if !errors.As(err, &notTLS) || !notTLS.HTTP() || !strings.Contains(err.Error(), "plain HTTP") {
		t.Fatalf("plain HTTP server: %v", err)
	}
	if res == nil || res.Conn != nil || res.Report.Error != err.Error() || res.Report.Address != plain.Listener.Addr().String() {
		t.Fatalf("report of the failure: %+v", res)
	}

	_, err = Connect(ctx, old.Listener.Addr().String(), o)
	var alert *tls13.AlertError
	if !errors.As(err, &alert) || alert.Alert != tls13.AlertProtocolVersion {
		t.Fatalf("TLS 1.2 server: %v", err)
	}
}
