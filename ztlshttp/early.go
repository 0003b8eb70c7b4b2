package ztlshttp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
)

// Early data can be recorded and replayed by an attacker (RFC 8446,
// Section 8), so a request goes early only when a replay of it is
// harmless and nothing else rides along with it: one whole request
// (headers and body complete) whose method is idempotent.

// idempotentMethods are the methods sent as early data without the user
// asking (RFC 8470, Section 4.1, with RFC 9110, Section 9.2.2).
var idempotentMethods = []string{"GET", "HEAD", "OPTIONS"}

// EarlySafe says whether req, everything a client sends first and in one
// piece, may go as 0-RTT early data without the user opting in: a single
// GET, HEAD or OPTIONS request, whole (an HTTP/1.x request's headers and
// body complete, nothing after it) or a one-line "GET /path". When it may
// not, why says so in words for a connection report.
func EarlySafe(req []byte) (ok bool, why string) {
	return earlyVerdict(req, true)
}

// earlyVerdict is EarlySafe; without oneLine only a whole HTTP/1.x
// request qualifies (what net/http writes: a request line cut in two
// writes must not pass for a one-line request).
func earlyVerdict(req []byte, oneLine bool) (bool, string) {
	line, after, _ := bytes.Cut(req, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	method, target, found := bytes.Cut(line, []byte(" "))
	if !found || !isToken(method) || len(bytes.TrimSpace(target)) == 0 {
		return false, "the data is not an HTTP request, so a replay of it may not be harmless"
	}
	if !slices.Contains(idempotentMethods, string(method)) {
		return false, fmt.Sprintf("%s is not an idempotent method (GET, HEAD, OPTIONS): a replay would repeat the request (RFC 8470, Section 4.1)", method)
	}
	fields := bytes.Fields(target)
	if !bytes.HasPrefix(fields[len(fields)-1], []byte("HTTP/1.")) {
		if oneLine && len(bytes.TrimSpace(after)) == 0 {
			return true, ""
		}
		return false, "the data is not one whole HTTP/1.x request"
	}
	src := &endReader{r: bytes.NewReader(req)}
	br := bufio.NewReader(src)
	if _, _, err := readWhole(br, src); err != nil {
		return false, fmt.Sprintf("the request is incomplete or malformed (%v)", err)
	}
	if br.Buffered() > 0 {
		return false, "the data holds more than one request"
	}
	return true, ""
}

func isToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		// RFC 9110, Section 5.6.2: tchar
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0) {
			return false
		}
	}
	return true
}

// errCut: the input ended inside a request.
var errCut = errors.New("ztlshttp: the data ended inside a request")

// endReader notes when its source ran dry, and can keep what it read.
type endReader struct {
	r      io.Reader
	ended  bool
	record bool
	rec    []byte
}

func (e *endReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if e.record {
		e.rec = append(e.rec, p[:n]...)
	}
	if err == io.EOF {
		e.ended = true
	}
	return n, err
}

// readWhole reads one request and its whole body from br, which reads
// src. The request counts as whole only if src never ran dry while it was
// read: at the end of its input bufio hands out a partial last line as if
// it were whole, so "GET / HTTP/1.1" cut before its CRLF would otherwise
// parse. A whole request never needs a read past its last byte.
func readWhole(br *bufio.Reader, src *endReader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
	}
	if src.ended {
		return nil, nil, errCut
	}
	if err != nil {
		return nil, nil, err
	}
	return req, body, nil
}
