//lint:file-ignore SA1019 net/http speaks HTTP/2 only over its own *tls.Conn; over a tls13.Conn x/net/http2 is the way (its Server.ServeConn and Transport.DialTLSContext)

package ztlshttp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"github.com/ztls-project/ztls/tls13"
)

// HTTP/2 in the proxy. golang.org/x/net/http2's server reads the
// connection through an h2Conn, which sees every frame before the server
// does and knows which bytes came as early data. A request counts as
// early when all its frames, up to the one that ends its stream, came as
// early data; the proxy then forwards it at once with Early-Data: 1 (and
// after a 425 again once the handshake is done, RFC 8470, Section 5.2).
// Any other request, one whose frames straddle the end of the early data
// included, is forwarded once the handshake is done, not marked.
//
// The server tells the handler nothing about frames or stream IDs, so
// h2Conn adds a header field to the header block of each request whose
// headers came whole as early data, naming the stream and carrying a
// secret of the connection (so a client can't forge it); the handler
// removes it.

// earlyMarker names the header field h2Conn adds.
const earlyMarker = "ztls-early-stream"

// maxH2Frame bounds the frames h2Conn holds; the server's limit
// (http2.Server.MaxReadFrameSize) is below it, so a larger one is an
// error for the server to report.
const maxH2Frame = 1<<20 + h2FrameHeaderLen

// serveH2 serves a connection that negotiated h2; hs bounds the rest of
// its handshake.
func (p *Proxy) serveH2(hs context.Context, c *tls13.Conn) error {
	timeout := p.timeout()
	hc := newH2Conn(hs, c, timeout)
	hc.counted = p.OnEarlyData
	if !c.ConnectionState().EarlyDataAccepted {
		hc.finishHandshake()
		if hc.hsErr != nil {
			return hc.hsErr
		}
	}
	srv := &http2.Server{IdleTimeout: timeout, MaxReadFrameSize: 1 << 20}
	srv.ServeConn(hc, &http2.ServeConnOpts{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { p.serveH2Request(hc, w, r) }),
	})
	// ServeConn does not wait for its reader, which may still be
	// completing the handshake: hsErr is read only once it is set.
	select {
	case <-hc.handshook:
		return hc.hsErr
	default:
		return nil
	}
}

// serveH2Request forwards one request of an HTTP/2 connection.
func (p *Proxy) serveH2Request(hc *h2Conn, w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	id, marked := hc.marked(r.Header.Values(earlyMarker))
	r.Header.Del(earlyMarker)
	if marked {
		body, whole, err := hc.readEarlyBody(r.Body, id)
		if err != nil {
			return // the stream or the connection is gone
		}
		if whole {
			p.forwardH2Early(hc, w, r, body)
			return
		}
		p.logf("%s %s: the request's frames straddle the end of the early data: waiting for the handshake, then forwarding it as not early", r.Method, r.URL.Path)
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
	}
	if !hc.waitHandshake(ctx) {
		return
	}
	if resp, ok := p.sendH2(w, r, hc.RemoteAddr(), false); ok {
		p.replyH2(w, r, resp, false)
	}
}

// forwardH2Early forwards a request that came whole as early data, with
// its body in hand, as forwardEarly does for HTTP/1.1.
func (p *Proxy) forwardH2Early(hc *h2Conn, w http.ResponseWriter, r *http.Request, body []byte) {
	setBody(r, body)
	resp, ok := p.sendH2(w, r, hc.RemoteAddr(), true)
	if !ok {
		return
	}
	if resp.StatusCode != http.StatusTooEarly {
		p.replyH2(w, r, resp, true)
		return
	}
	resp.Body.Close()
	if !hc.waitHandshake(r.Context()) {
		return
	}
	p.logf("%s %s: backend said 425 Too Early; retrying after the handshake", r.Method, r.URL.Path)
	r.Body, _ = r.GetBody()
	if resp, ok = p.sendH2(w, r, hc.RemoteAddr(), false); ok {
		p.replyH2(w, r, resp, false)
	}
}

// sendH2 forwards r to the backend; when it can't, it answers 502.
func (p *Proxy) sendH2(w http.ResponseWriter, r *http.Request, remote net.Addr, early bool) (*http.Response, bool) {
	resp, err := p.client().Do(p.outbound(r.Context(), r, remote, early))
	if err != nil {
		http.Error(w, "backend unreachable", http.StatusBadGateway)
		p.logf("%s %s: backend: %v", r.Method, r.URL.Path, err)
		return nil, false
	}
	return resp, true
}

// hopHeaders are connection-specific: not forwarded, and not allowed in
// HTTP/2 (RFC 9113, Section 8.2.2).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Transfer-Encoding", "Upgrade", "Te", "Trailer"}

func (p *Proxy) replyH2(w http.ResponseWriter, r *http.Request, resp *http.Response, early bool) {
	defer resp.Body.Close()
	p.logf("%s %s -> %d (h2, early=%v)", r.Method, r.URL.Path, resp.StatusCode, early)
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = v
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

type readCloser struct {
	io.Reader
	io.Closer
}

// h2Conn is a server tls13.Conn as the HTTP/2 server reads it: the early
// data first, then (after completing the handshake) the rest, handed out
// frame by frame once each frame is whole. One goroutine reads (the
// server's); handlers ask about streams concurrently.
type h2Conn struct {
	*tls13.Conn
	hsCtx   context.Context
	timeout time.Duration // the connection's deadline once the handshake is done
	secret  string

	handshook chan struct{} // closed when the handshake is over; hsErr then says how
	hsErr     error

	// The reader's.
	early       bool        // reading early data
	in          []byte      // read, not handed out
	earlyIn     int         // how many of in's first bytes came as early data
	counted     func(n int) // Proxy.OnEarlyData: each read of early data
	out         []byte      // whole frames to hand out
	prefaceLeft int
	block       struct {
		open, early, endStream, trailers bool
		stream                           uint32
	}
	passThrough bool // a frame too large to hold: hand out as is

	mu      sync.Mutex
	streams map[uint32]*earlyStream // streams whose headers came as early data
}

type earlyStream struct {
	ended bool // the stream ended within the early data
	late  bool // a frame of it came after the early data
}

func newH2Conn(ctx context.Context, c *tls13.Conn, timeout time.Duration) *h2Conn {
	var b [16]byte
	rand.Read(b[:])
	return &h2Conn{
		Conn: c, hsCtx: ctx, timeout: timeout, secret: hex.EncodeToString(b[:]),
		handshook: make(chan struct{}), early: c.ConnectionState().EarlyDataAccepted,
		prefaceLeft: len(http2.ClientPreface), streams: map[uint32]*earlyStream{},
	}
}

// finishHandshake reads the client's Finished within the handshake's
// deadline (ServeConn's), then gives the connection its idle bound.
func (h *h2Conn) finishHandshake() {
	h.hsErr = h.Conn.HandshakeContext(h.hsCtx)
	if h.hsErr == nil {
		h.Conn.SetDeadline(time.Now().Add(h.timeout))
	}
	close(h.handshook)
}

// waitHandshake waits until the handshake is done; false when it failed
// or ctx ended first.
func (h *h2Conn) waitHandshake(ctx context.Context) bool {
	select {
	case <-h.handshook:
		return h.hsErr == nil
	case <-ctx.Done():
		return false
	}
}

// ConnectionState is the TLS state for the HTTP/2 server (RFC 9113,
// Section 9.2 checks; the requests' TLS field).
func (h *h2Conn) ConnectionState() tls.ConnectionState {
	st := h.Conn.ConnectionState()
	return stdState(st, st.ServerName)
}

func (h *h2Conn) Read(p []byte) (int, error) {
	for len(h.out) == 0 {
		h.parse()
		if len(h.out) > 0 {
			break
		}
		if err := h.fill(); err != nil {
			if len(h.in) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, err
		}
	}
	n := copy(p, h.out)
	h.out = h.out[n:]
	return n, nil
}

// fill reads more: early data, or after its end the rest of the
// connection (the handshake completed first). It reads into in's spare
// room, not a fresh buffer each time.
func (h *h2Conn) fill() error {
	h.in = slices.Grow(h.in, 32<<10)
	buf := h.in[len(h.in):cap(h.in)]
	if !h.early {
		n, err := h.Conn.Read(buf)
		h.in = h.in[:len(h.in)+n]
		if n > 0 {
			return nil
		}
		return err
	}
	n, err := h.Conn.ReadEarlyData(buf)
	h.in = h.in[:len(h.in)+n]
	h.earlyIn += n
	if n > 0 && h.counted != nil {
		h.counted(n)
	}
	if errors.Is(err, io.EOF) {
		h.early = false
		h.finishHandshake()
		return h.hsErr
	}
	if n > 0 {
		return nil
	}
	return err
}

// consume drops n bytes from in.
func (h *h2Conn) consume(n int) {
	h.in = h.in[n:]
	h.earlyIn = max(0, h.earlyIn-n)
}

// parse moves the preface and whole frames from in to out.
func (h *h2Conn) parse() {
	for {
		if h.passThrough {
			h.out = append(h.out, h.in...)
			h.consume(len(h.in))
			return
		}
		if h.prefaceLeft > 0 {
			n := min(h.prefaceLeft, len(h.in))
			h.out = append(h.out, h.in[:n]...)
			h.consume(n)
			if h.prefaceLeft -= n; h.prefaceLeft > 0 {
				return
			}
			continue
		}
		if len(h.in) < h2FrameHeaderLen {
			return
		}
		fh := parseH2Header(h.in)
		size := h2FrameHeaderLen + int(fh.length)
		if size > maxH2Frame {
			h.passThrough = true
			continue
		}
		if len(h.in) < size {
			return
		}
		h.frame(fh, h.in[:size], size <= h.earlyIn)
		h.consume(size)
	}
}

// frame notes what frame f (whole, early or not) says about the early
// streams and hands it out, with the marker when it ends the header
// block of a request that came as early data.
func (h *h2Conn) frame(fh h2Header, f []byte, early bool) {
	b := &h.block
	switch fh.typ {
	case http2.FrameHeaders:
		h.mu.Lock()
		_, known := h.streams[fh.stream]
		h.mu.Unlock()
		b.open, b.stream, b.early, b.trailers = true, fh.stream, early, known
		b.endStream = fh.flags.Has(http2.FlagHeadersEndStream)
		if fh.flags.Has(http2.FlagHeadersEndHeaders) {
			f = h.endBlock(fh, f)
		}
	case http2.FrameContinuation:
		if b.open && fh.stream == b.stream {
			b.early = b.early && early
			if fh.flags.Has(http2.FlagContinuationEndHeaders) {
				f = h.endBlock(fh, f)
			}
		}
	case http2.FrameData:
		h.noteStream(fh.stream, early, fh.flags.Has(http2.FlagDataEndStream))
	case http2.FrameRSTStream:
		h.noteStream(fh.stream, early, false)
	}
	h.out = append(h.out, f...)
}

// endBlock ends a header block whose last frame is f.
func (h *h2Conn) endBlock(fh h2Header, f []byte) []byte {
	b := &h.block
	b.open = false
	if b.trailers {
		h.noteStream(b.stream, b.early, b.endStream)
		return f
	}
	if !b.early {
		return f
	}
	h.mu.Lock()
	h.streams[b.stream] = &earlyStream{ended: b.endStream}
	h.mu.Unlock()
	return withField(fh, f, earlyMarker, h.secret+" "+strconv.FormatUint(uint64(b.stream), 10))
}

// noteStream: a frame of stream came (early or not), ending it or not.
func (h *h2Conn) noteStream(stream uint32, early, end bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.streams[stream]
	switch {
	case s == nil:
	case !early:
		s.late = true
	case end:
		s.ended = true
	}
}

// withField appends a header field to the header block fragment of f, a
// HEADERS or CONTINUATION frame, as a literal never indexed (RFC 7541,
// Section 6.2.3) so the decoder's dynamic table stays the encoder's.
func withField(fh h2Header, f []byte, name, value string) []byte {
	field := []byte{0x10, byte(len(name))}
	field = append(field, name...)
	field = append(field, byte(len(value)))
	field = append(field, value...)
	payload := f[h2FrameHeaderLen:]
	at := len(payload)
	if fh.typ == http2.FrameHeaders && fh.flags.Has(http2.FlagHeadersPadded) && len(payload) > 0 {
		at -= min(int(payload[0]), len(payload)-1) // before the padding
	}
	out := make([]byte, 0, len(f)+len(field))
	n := len(payload) + len(field)
	out = append(out, byte(n>>16), byte(n>>8), byte(n))
	out = append(out, f[3:h2FrameHeaderLen]...)
	out = append(out, payload[:at]...)
	out = append(out, field...)
	return append(out, payload[at:]...)
}

// marked reads the marker: the stream whose headers came as early data.
// The secret is compared in constant time: a client timing the proxy's
// answers to forged markers must learn nothing of it.
func (h *h2Conn) marked(values []string) (uint32, bool) {
	if len(values) != 1 {
		return 0, false
	}
	secret, id, ok := strings.Cut(values[0], " ")
	if !ok || subtle.ConstantTimeCompare([]byte(secret), []byte(h.secret)) != 1 {
		return 0, false
	}
	n, err := strconv.ParseUint(id, 10, 31)
	if err != nil {
		return 0, false
	}
	return uint32(n), true
}

// readEarlyBody reads the body of a request whose headers came as early
// data, until it ends (whole: within the early data) or a frame of it
// comes after the early data (then what was read so far). Either way
// what it holds came as early data, so it is bounded by the early data
// limit.
func (h *h2Conn) readEarlyBody(body io.Reader, stream uint32) (read []byte, whole bool, err error) {
	buf := make([]byte, 4096)
	for {
		n, err := body.Read(buf)
		read = append(read, buf[:n]...)
		h.mu.Lock()
		s := *h.streams[stream]
		h.mu.Unlock()
		if s.late {
			return read, false, nil
		}
		if errors.Is(err, io.EOF) {
			return read, s.ended, nil
		}
		if err != nil {
			return nil, false, err
		}
	}
}

var _ net.Conn = (*h2Conn)(nil)
