package dial

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// Errors after the handshake (Result.Err); errors.Is tells them apart.
var (
	// ErrEarlyRequestLost is no longer returned: only a replay-safe
	// request goes early, and a rejected one is sent again after the
	// handshake (or, in another protocol than the one negotiated, not at
	// all: ErrRequestNotSent).
	ErrEarlyRequestLost = errors.New("dial: early request rejected and not resent (not marked replay-safe)")
	// ErrRequestNotSent: the Request is written in another application
	// protocol (Options.RequestALPN) than the one the connection
	// negotiated, so it was not sent; the connection is open, for the
	// caller to send it in the protocol negotiated.
	ErrRequestNotSent = errors.New("dial: request not sent")
	// ErrResponseTimeout: the response did not end (the server neither
	// finished it nor closed the connection) before the deadline.
	ErrResponseTimeout = errors.New("dial: timed out waiting for the response")
	// ErrResponseTruncated: the connection ended before the HTTP
	// response did (its Content-Length or last chunk).
	ErrResponseTruncated = errors.New("dial: the response was cut short")
	// ErrResponseTooLong: an HTTP response is longer than ReadResponse.
	ErrResponseTooLong = errors.New("dial: the response is longer than the most allowed")
)

// responseReader reads the response from the connection: it times the
// first byte, counts the bytes into the report and stops at max.
type responseReader struct {
	c     io.Reader
	max   int
	out   io.Writer // raw bytes as they arrive (readAll) or nil
	r     *Report
	start time.Time
	step  func(string)
	err   error // what ended the reading from c, if it ended
}

func (rr *responseReader) Read(p []byte) (int, error) {
	left := rr.max - rr.r.ResponseBytes
	if left <= 0 {
		rr.err = errLimit
		return 0, errLimit
	}
	if len(p) > left {
		p = p[:left]
	}
	n, err := rr.c.Read(p)
	if err != nil {
		rr.err = err
	}
	if n > 0 {
		if rr.r.ResponseBytes == 0 {
			rr.r.Timing.FirstByte = ms(time.Since(rr.start))
			rr.step("first_byte")
		}
		rr.r.ResponseBytes += n
		if rr.out != nil {
			rr.out.Write(p[:n])
		}
	}
	return n, err
}

// errLimit: ReadResponse bytes were read.
var errLimit = errors.New("dial: response limit reached")

// readAll reads until the server closes the connection, or max bytes.
func (rr *responseReader) readAll() error {
	buf := make([]byte, 32*1024)
	for {
		_, err := rr.Read(buf)
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, errLimit):
			rr.r.ResponseLimited = true
			return nil
		default:
			return rr.failed(err, "")
		}
	}
}

// readHTTP reads one HTTP/1.1 response to a request with this method and
// stops at its end (RFC 9112, Section 6.3), sending its header as
// received and its body decoded to out. An answer that does not start as
// an HTTP response does is read as readAll does.
func (rr *responseReader) readHTTP(method string) error {
	out := rr.out
	if out == nil {
		out = io.Discard
	}
	rr.out = nil
	// The bytes read while the header is parsed, to print it as sent.
	rec := &recorder{buf: new(bytes.Buffer)}
	br := bufio.NewReader(io.TeeReader(rr, rec))
	req := &http.Request{Method: method}
	if start, err := br.Peek(len("HTTP/")); string(start) != "HTTP/" {
		if len(start) == 0 {
			return rr.failed(err, "before the end of the response's header")
		}
		// Not an HTTP response (a server that does not speak HTTP
		// answered): as it comes, until the server closes.
		return rr.readRest(br, out)
	}
	for {
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			return rr.failed(err, "before the end of the response's header")
		}
		// What the header parse read and did not use is the body's start.
		head := rec.buf.Len() - br.Buffered()
		out.Write(rec.buf.Next(head))
		if resp.StatusCode == http.StatusSwitchingProtocols {
			// Another protocol from here on: whatever it sends, until
			// the server closes.
			return rr.readRest(br, out)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			continue // an interim response: the final one follows
		}
		rec.buf = nil
		n, err := io.Copy(out, resp.Body)
		if err != nil {
			where := fmt.Sprintf("after %d bytes of its body", n)
			if resp.ContentLength >= 0 {
				where = fmt.Sprintf("after %d of its %d body bytes (Content-Length)", n, resp.ContentLength)
			} else if len(resp.TransferEncoding) > 0 {
				where = fmt.Sprintf("after %d bytes of its chunked body, before the last chunk", n)
			} else if errors.Is(err, io.ErrUnexpectedEOF) {
				// RFC 9112, Section 9.8: a body that ends when the
				// connection does is whole only at close_notify.
				where = fmt.Sprintf("after %d bytes of its body, which ends at close_notify, but the server closed the connection without it", n)
			}
			return rr.failed(err, where)
		}
		return nil
	}
}

// readRest sends to out what br holds and then the rest as readAll
// reads it: the answer is no (longer) HTTP.
func (rr *responseReader) readRest(br *bufio.Reader, out io.Writer) error {
	rest, _ := br.Peek(br.Buffered())
	out.Write(rest)
	rr.out = out
	return rr.readAll()
}

// requestMethod is the method of an HTTP/1.x request, GET when req is
// not one.
func requestMethod(req []byte) string {
	method, _, ok := bytes.Cut(req, []byte(" "))
	if !ok || len(method) == 0 || len(method) > 20 {
		return http.MethodGet
	}
	return string(method)
}

// recorder keeps what is written to it while buf is set.
type recorder struct{ buf *bytes.Buffer }

func (r *recorder) Write(p []byte) (int, error) {
	if r.buf != nil {
		r.buf.Write(p)
	}
	return len(p), nil
}

// failed names why the response stopped short; where says how far it got
// (an HTTP response), "" for a response that ends when the server closes.
func (rr *responseReader) failed(err error, where string) error {
	if rr.err != nil {
		// The connection's end explains a parse error it caused (a
		// header cut in the middle of a line is "malformed").
		err = rr.err
	}
	got := fmt.Sprintf("%d bytes received", rr.r.ResponseBytes)
	if where != "" {
		got += ", " + where
	}
	var ne net.Error
	switch {
	case errors.Is(err, errLimit):
		return fmt.Errorf("%w (%d bytes) and was not read to its end", ErrResponseTooLong, rr.max)
	case errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w (%s)", ErrResponseTimeout, got)
	case where == "" && errors.Is(err, io.ErrUnexpectedEOF):
		// The TCP connection closed without close_notify: an attacker
		// can cut a response so (RFC 8446, Section 6.1).
		return fmt.Errorf("%w: the server closed the connection without close_notify (%s)", ErrResponseTruncated, got)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		if rr.r.ResponseBytes == 0 {
			return fmt.Errorf("%w: the server closed the connection without answering", ErrResponseTruncated)
		}
		return fmt.Errorf("%w: the connection ended (%s)", ErrResponseTruncated, got)
	}
	return fmt.Errorf("dial: reading the response (%s): %w", got, err)
}

// firstBytes records the first bytes the server sends, so that a server
// that does not speak TLS (a plain HTTP server's error page) is told from
// a broken TLS server.
type firstBytes struct {
	net.Conn
	n   int
	buf [64]byte
}

func (f *firstBytes) Read(p []byte) (int, error) {
	n, err := f.Conn.Read(p)
	if f.n < len(f.buf) {
		f.n += copy(f.buf[f.n:], p[:n])
	}
	return n, err
}

// notTLS returns a NotTLSError for err if what the server sent does not
// start with a TLS record (RFC 8446, Section 5.1: ContentType 20 to 23),
// else err.
func (f *firstBytes) notTLS(err error) error {
	if f.n == 0 || (f.buf[0] >= 20 && f.buf[0] <= 23) {
		return err
	}
	return &NotTLSError{Got: append([]byte(nil), f.buf[:f.n]...), Err: err}
}

// NotTLSError is returned by Connect when the server answered the
// ClientHello with something that is not TLS, such as a plain HTTP
// server's "400 Bad Request".
type NotTLSError struct {
	Got []byte // the first bytes the server sent (up to 64)
	Err error  // the handshake's error
}

// HTTP reports whether the server answered in plain HTTP: a status line,
// or an HTML page (what some servers answer a request they cannot parse).
func (e *NotTLSError) HTTP() bool {
	got := strings.ToLower(string(e.Got))
	return strings.HasPrefix(got, "http/") || strings.HasPrefix(got, "<!doctype html") || strings.HasPrefix(got, "<html")
}

func (e *NotTLSError) Error() string {
	line, _, _ := strings.Cut(string(e.Got), "\n")
	line = strings.TrimSuffix(line, "\r")
	if e.HTTP() {
		return fmt.Sprintf("dial: the server answered in plain HTTP, not TLS (%q)", line)
	}
	return fmt.Sprintf("dial: the server does not speak TLS: it answered %q", line)
}

func (e *NotTLSError) Unwrap() error { return e.Err }
