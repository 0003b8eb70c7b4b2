package ztlshttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/dial"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
)

// stdClient is Go's own client (crypto/tls, net/http and its HTTP/2)
// reaching w's server: the reference for resp.TLS.
func stdClient(t *testing.T, w *lab.World) *http.Client {
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: w.Roots, ServerName: w.Host},
		ForceAttemptHTTP2: true,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, w.ServerAddr)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// resp.TLS is filled over ZTLS and over TLS 1.3, over HTTP/2 and
// HTTP/1.1, as crypto/tls fills it for the same server, and agrees with
// the connection report.
func TestRespTLS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		early    string   // the Z-data's early ALPN
		protos   []string // the server's
		mode     string
		wantMode string
		reason   string
	}{
		{"ztls h2", "h2", []string{"h2", "http/1.1"}, "auto", "ztls", ""},
		{"ztls http/1.1", "http/1.1", []string{"http/1.1"}, "auto", "ztls", ""},
		{"tls h2", "h2", []string{"h2", "http/1.1"}, "tls", "tls", dial.ReasonModeTLS},
		{"tls http/1.1", "http/1.1", []string{"http/1.1"}, "tls", "tls", dial.ReasonModeTLS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, _, opts := setupWorldALPN(t, tc.early, tc.protos...)
			opts.Mode = dial.Mode(tc.mode)
			tr := NewTransport(opts)
			t.Cleanup(tr.CloseIdleConnections)
			resp, _ := get(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "GET", "https://"+w.HostPort()+"/", "")
			ref, _ := get(t, stdClient(t, w), "GET", "https://"+w.HostPort()+"/", "")
			st, want := resp.TLS, ref.TLS
			if st == nil {
				t.Fatal("resp.TLS is nil")
			}
			r := ReportOf(resp)
			if r == nil || r.Mode != tc.wantMode || r.FallbackReason != tc.reason {
				t.Fatalf("report %+v", r)
			}
			if resp.ProtoMajor != ref.ProtoMajor {
				t.Errorf("%s, crypto/tls's client %s", resp.Proto, ref.Proto)
			}
			if st.Version != tls.VersionTLS13 || st.Version != want.Version {
				t.Errorf("Version %x, want %x", st.Version, want.Version)
			}
			if !st.HandshakeComplete || st.DidResume {
				t.Errorf("HandshakeComplete %v, DidResume %v", st.HandshakeComplete, st.DidResume)
			}
			if st.CipherSuite != want.CipherSuite || tls.CipherSuiteName(st.CipherSuite) != r.TLS.CipherSuite {
				t.Errorf("CipherSuite %s, crypto/tls %s, report %s", tls.CipherSuiteName(st.CipherSuite), tls.CipherSuiteName(want.CipherSuite), r.TLS.CipherSuite)
			}
			if st.NegotiatedProtocol != want.NegotiatedProtocol || st.NegotiatedProtocol != r.TLS.ALPN {
				t.Errorf("NegotiatedProtocol %q, crypto/tls %q, report %q", st.NegotiatedProtocol, want.NegotiatedProtocol, r.TLS.ALPN)
			}
			if st.ServerName != w.Host || st.ServerName != want.ServerName {
				t.Errorf("ServerName %q, crypto/tls %q", st.ServerName, want.ServerName)
			}
			if st.CurveID == 0 {
				t.Error("no CurveID")
			}
			if len(st.PeerCertificates) == 0 || !bytes.Equal(st.PeerCertificates[0].Raw, want.PeerCertificates[0].Raw) {
				t.Errorf("PeerCertificates differ from crypto/tls's (%d certificates)", len(st.PeerCertificates))
			}
			if len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) != len(want.VerifiedChains[0]) ||
				!bytes.Equal(st.VerifiedChains[0][len(st.VerifiedChains[0])-1].Raw, want.VerifiedChains[0][len(want.VerifiedChains[0])-1].Raw) {
				t.Errorf("VerifiedChains differ from crypto/tls's: %d chains", len(st.VerifiedChains))
			}
		})
	}
}

// ReportOf says why a connection is not ZTLS.
func TestReportOfFallbackReason(t *testing.T) {
	w, _, opts := setupWorldALPN(t, "h2", "h2", "http/1.1")
	tr := NewTransport(opts)
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	resp, _ := get(t, client, "DELETE", "https://"+w.HostPort()+"/x", "")
	if r := ReportOf(resp); r == nil || r.Mode != "tls" || r.FallbackReason != dial.ReasonNoEarly {
		t.Fatalf("report %+v", r)
	}

	// A server without Z-data.
	be := &backend{}
	w2, err := lab.Start(lab.Options{NoZData: true, Handler: proxyTo(t, be)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w2.Close)
	w2.ServerTLS.NextProtos = []string{"h2", "http/1.1"}
	opts.TLS = w2.ClientTLS()
	tr2 := NewTransport(opts)
	t.Cleanup(tr2.CloseIdleConnections)
	resp, body := get(t, &http.Client{Transport: tr2, Timeout: 10 * time.Second}, "GET", "https://"+w2.HostPort()+"/y", "")
	r := ReportOf(resp)
	if body != "page /y" || r == nil || r.Mode != "tls" || !strings.Contains(r.FallbackReason, "no Z-data") || resp.TLS == nil {
		t.Fatalf("body %q, report %+v", body, r)
	}
	if ReportOf(&http.Response{Request: resp.Request.WithContext(context.Background())}) != nil || ReportOf(nil) != nil {
		t.Fatal("a report for a response that did not come from a Transport")
	}
}

// The README's one line, with nothing but the lab's CA: the default
// resolver (here pointed at the lab's DNS through ZTLS_RESOLVER, as
// /etc/resolv.conf would point it at a real one) fetches the Z-data, so
// the first GET goes early over ZTLS.
func TestOneLinerDoesZTLS(t *testing.T) {
	w, be, _ := setupWorldALPN(t, "h2", "h2", "http/1.1")
	t.Setenv(ResolverEnv, w.DNSAddr)
	tr := NewTransport(dial.Options{TLS: w.ClientTLS()})
	client := &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections) // else the lab waits for the proxy's idle timeout
	resp, body := get(t, client, "GET", "https://"+w.HostPort()+"/one", "")
	r := ReportOf(resp)
	if body != "page /one" || r == nil || r.Mode != "ztls" || !r.EarlyData.Accepted || resp.ProtoMajor != 2 {
		t.Fatalf("%s %q, report %+v", resp.Proto, body, r)
	}
	if got := be.seen(); len(got) != 1 || got[0] != "1" {
		t.Fatalf("backend saw Early-Data %q", got)
	}
}

// With no usable default resolver the Transport still connects, with
// TLS 1.3, and the report says why there was no Z-data.
func TestNoDefaultResolver(t *testing.T) {
	w, _, _ := setupWorldALPN(t, "h2", "h2", "http/1.1")
	t.Setenv(ResolverEnv, "not a server")
	cfg := w.ClientTLS()
	cfg.ServerName = w.Host
	tr := NewTransport(dial.Options{TLS: cfg})
	t.Cleanup(tr.CloseIdleConnections)
	// localhost: the system resolver has no www.ztls.test.
	resp, _ := get(t, &http.Client{Transport: tr, Timeout: 10 * time.Second}, "GET", "https://localhost:"+strconv.Itoa(w.Port)+"/", "")
	r := ReportOf(resp)
	if r == nil || r.Mode != "tls" || resp.TLS == nil ||
		!strings.HasPrefix(r.FallbackReason, dial.ReasonNoResolver) || !strings.Contains(r.FallbackReason, ResolverEnv) {
		t.Fatalf("report %+v", r)
	}
	if _, err := DefaultResolver(); err == nil {
		t.Fatal("DefaultResolver accepted a bad ZTLS_RESOLVER")
	}
}

// A Transport keeps the chains its connections verified: a second
// connection to the same server (the first closed) verifies nothing, over
// ZTLS (the Z-data's leaf) and over TLS 1.3 (the Certificate message); the
// caller's Config is left as it was.
func TestTransportChainCache(t *testing.T) {
	for _, mode := range []string{"auto", "tls"} {
		t.Run(mode, func(t *testing.T) {
			w, _, opts := setupWorldALPN(t, "http/1.1", "http/1.1")
			opts.Mode = dial.Mode(mode)
			tr := NewTransport(opts)
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			var verified [2]uint64
			for i := range verified {
				v0 := tls13.ChainVerifications()
				resp, _ := get(t, client, "GET", "https://"+w.HostPort()+"/", "")
				verified[i] = tls13.ChainVerifications() - v0
				if resp.TLS == nil || len(resp.TLS.VerifiedChains) == 0 {
					t.Fatalf("request %d: no verified chain", i+1)
				}
				if r := ReportOf(resp); r == nil || (mode == "auto") != (r.Mode == "ztls") {
					t.Fatalf("request %d: report %+v", i+1, r)
				}
				tr.CloseIdleConnections() // the next request opens a new connection
			}
			if verified[0] == 0 || verified[1] != 0 {
				t.Fatalf("chain verifications: %d on the first connection, %d on the second; want some, then none", verified[0], verified[1])
			}
			if opts.TLS.ChainCache != nil {
				t.Fatal("NewTransport changed the caller's Config")
			}
		})
	}
}
