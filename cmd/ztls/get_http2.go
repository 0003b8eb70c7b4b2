package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/ztlshttp"
)

// runGetHTTP2 is get over ztlshttp's transport: HTTP/2 when the server
// selects h2 (the preface, SETTINGS and the GET's HEADERS as early data),
// else HTTP/1.1. It prints the response (status line, header, body) and
// the connection report like get does, with the first byte and the
// response size measured here (the transport reads the response, not
// package dial). r is the request get's flags make (f.addrs the addresses
// --resolve gives); the body goes to file (nil: with the header);
// with fail, a status of 400 or more prints no response and is exit 22.
func runGetHTTP2(f *connectFlags, u *url.URL, r *getRequest, file *os.File, fail bool) error {
	if err := f.check(); err != nil {
		return err
	}
	cfg, err := f.tls.config(false)
	if err != nil {
		return err
	}
	opts, closeRes, err := f.dialOptions(cfg)
	if err != nil {
		return err
	}
	defer closeRes()
	tr := ztlshttp.NewTransport(opts)
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	target := *u // dialled at f.addrs, if get --resolve gave them
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target.String(), body)
	if err != nil {
		return err
	}
	req.Host = u.Host
	if !r.removed("User-Agent") {
		req.Header.Set("User-Agent", "ztls")
	}
	for name, values := range r.header {
		if name == "Host" {
			req.Host = values[0]
			continue
		}
		req.Header[name] = values
	}
	start := time.Now() // real time: elapsed
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		err = f.cure(err, u.Host)
		if f.json { // a report on failure too, as get prints one
			writeJSON(dial.Report{Error: err.Error()})
		}
		return err
	}
	defer resp.Body.Close()
	firstByte := time.Since(start)
	out := io.Writer(os.Stdout)
	if f.json {
		out = os.Stderr
	}
	head, bodyOut := out, out
	if file != nil {
		head, bodyOut = os.Stderr, file
	}
	failed := fail && resp.StatusCode >= 400
	if failed {
		head, bodyOut = io.Discard, io.Discard
	}
	ends := endLines(bodyOut) // nil unless the body goes to a terminal
	if ends != nil {
		bodyOut = ends
		defer ends.end() // before an error is printed
	}
	fmt.Fprintf(head, "%s %s\r\n", resp.Proto, resp.Status)
	resp.Header.Write(head) // sorted by name, as on the wire
	fmt.Fprint(head, "\r\n")
	n, rerr := io.Copy(bodyOut, io.LimitReader(resp.Body, int64(f.maxBytes)+1))
	var rep dial.Report
	if r := ztlshttp.ReportOf(resp); r != nil {
		rep = *r
	}
	rep.Timing.FirstByte = math.Round(float64(firstByte.Microseconds())) / 1000
	rep.Timing.Total = math.Round(float64(time.Since(start).Microseconds())) / 1000
	rep.ResponseBytes = int(min(n, int64(f.maxBytes)))
	flagHints(&rep)
	switch {
	case rerr != nil:
		err = fmt.Errorf("reading the response (%d bytes received): %w", n, f.cure(rerr, u.Host))
	case n > int64(f.maxBytes):
		err = fmt.Errorf("the response is longer than --max-bytes %d", f.maxBytes)
	}
	if err != nil {
		rep.Error = err.Error()
	}
	if err == nil && failed {
		err = errHTTPStatus(resp.StatusCode)
	}
	ends.end()
	if f.json {
		writeJSON(rep)
		return err
	}
	rep.WriteText(os.Stderr)
	return err
}
