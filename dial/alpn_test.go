package dial

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

// receivedWorld is a lab world whose server records, per connection,
// everything the client sent (early data and after the handshake) until
// the client closes.
func receivedWorld(t *testing.T, early string, server []string) (*lab.World, chan []byte) {
	got := make(chan []byte, 8)
	w := startWorld(t, lab.Options{ZDataOptions: zdata.Options{ALPN: early}, Handler: func(c *tls13.Conn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second)) // real time: a deadline
		if c.HandshakeEarly(context.Background()) != nil {
			return
		}
		var all bytes.Buffer
		buf := make([]byte, 4096)
		for {
			n, err := c.ReadEarlyData(buf)
			all.Write(buf[:n])
			if n == 0 || err != nil {
				break
			}
		}
		if c.Handshake() == nil {
			for {
				n, err := c.Read(buf)
				all.Write(buf[:n])
				if err != nil {
					break
				}
			}
		}
		got <- all.Bytes()
	}})
	w.ServerTLS.NextProtos = server
	return w, got
}

// The request reaches the server once whatever becomes of the ZTLS
// offer: made and accepted, made and rejected (the server selected
// another ALPN protocol), or not made (the Z-data's early ALPN is not
// the client's). Before, an offer the engine skipped had the request
// sent by the engine and by dial. A request in another protocol than
// the one negotiated is not sent at all.
func TestRequestSentOnce(t *testing.T) {
	const req = "GET /once HTTP/1.1\r\nHost: www.ztls.test\r\n\r\n"
	for _, tc := range []struct {
		name                 string
		early                string   // the Z-data's early ALPN
		server, client       []string // ALPN lists
		reqALPN              string
		rewrites             bool // RequestIn set (it keeps the request)
		wantMode, wantALPN   string
		wantSent, wantUnsent bool
	}{
		{"data, offer skipped for ALPN", "h2", []string{"h2", "http/1.1"}, []string{"http/1.1"}, "", false, "tls", "http/1.1", true, false},
		{"data, offer rejected for ALPN", "h2", []string{"http/1.1"}, []string{"h2", "http/1.1"}, "", false, "tls", "http/1.1", true, false},
		{"HTTP/1.1, Z-data for h2", "h2", []string{"h2", "http/1.1"}, []string{"h2", "http/1.1"}, "http/1.1", false, "tls", "http/1.1", true, false},
		{"HTTP/1.1, Z-data without alpn=", "", []string{"h2", "http/1.1"}, []string{"h2", "http/1.1"}, "http/1.1", false, "ztls", "", true, false},
		{"h2, early rejected, server selected http/1.1", "h2", []string{"http/1.1"}, []string{"h2", "http/1.1"}, "h2", true, "tls", "http/1.1", false, true},
		{"HTTP/1.1, accepted", "http/1.1", []string{"h2", "http/1.1"}, []string{"h2", "http/1.1"}, "http/1.1", false, "ztls", "http/1.1", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, got := receivedWorld(t, tc.early, tc.server)
			r, err := connect(t, w, func(o *Options) {
				o.TLS.NextProtos = tc.client
				o.Request, o.RequestALPN, o.ReadResponse, o.Out = []byte(req), tc.reqALPN, 0, nil
				if tc.rewrites {
					o.RequestIn = func(string) ([]byte, bool) { return nil, false }
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			r.Conn.Close()
			all := <-got
			if n := bytes.Count(all, []byte(req)); n != map[bool]int{true: 1}[tc.wantSent] {
				t.Errorf("the server received the request %d times (%q)", n, all)
			}
			if unsent := errors.Is(r.Err, ErrRequestNotSent); unsent != tc.wantUnsent {
				t.Errorf("Result.Err %v", r.Err)
			}
			if r.Report.Mode != tc.wantMode || r.Report.TLS.ALPN != tc.wantALPN || w.Accepted() != 1 {
				t.Errorf("mode %s (%s), ALPN %q, %d connections", r.Report.Mode, r.Report.FallbackReason, r.Report.TLS.ALPN, w.Accepted())
			}
		})
	}
}

// No ALPN protocol in common is no abort on ztls: no retry without
// ztls, nothing remembered against the server.
func TestNoApplicationProtocolIsNotAZTLSAbort(t *testing.T) {
	w, _ := receivedWorld(t, "h2", []string{"http/1.1"})
	mem := NewMemory()
	_, err := connect(t, w, func(o *Options) {
		o.TLS.NextProtos, o.RequestALPN, o.Memory = []string{"h2"}, "h2", mem
	})
	var ae *tls13.AlertError
	if !errors.As(err, &ae) || ae.Alert != tls13.AlertNoApplicationProto {
		t.Fatalf("error %v, want no_application_protocol", err)
	}
	if mem.Aborted(w.Host, w.Port, clock.Now()) || w.Accepted() != 1 {
		t.Fatalf("remembered as an abort on ztls: %v; %d connections", mem.Aborted(w.Host, w.Port, clock.Now()), w.Accepted())
	}
}

// The HTTPS record's alpn narrows what a ClientHello without early data
// offers (RFC 9460, Section 7.1.1: http/1.1 too unless no-default-alpn);
// a record naming none of the client's protocols changes nothing.
func TestServiceALPNNarrowsOffer(t *testing.T) {
	both := []string{"h2", "http/1.1"}
	for _, tc := range []struct {
		record string
		want   []string
	}{
		{`www.ztls.test. 300 IN HTTPS 1 . alpn="h2"`, both},
		{`www.ztls.test. 300 IN HTTPS 1 . alpn="h2" no-default-alpn`, []string{"h2"}},
		{`www.ztls.test. 300 IN HTTPS 1 . alpn="h3" no-default-alpn`, both},
		{`www.ztls.test. 300 IN HTTPS 1 . port=8443`, both},
		{`www.ztls.test. 300 IN HTTPS 0 other.test.`, both},
	} {
		rr, err := dns.NewRR(tc.record)
		if err != nil {
			t.Fatal(err)
		}
		a := &attempt{o: Options{RequestIn: func(string) ([]byte, bool) { return nil, false }}, protos: both, reqALPN: "h2",
			https: &resolver.Answer{Qtype: dns.TypeHTTPS, RRs: []dns.RR{rr}}}
		if got := a.plainALPN(); !slices.Equal(got, tc.want) {
			t.Errorf("%s: offers %q, want %q", tc.record, got, tc.want)
		}
	}
}
