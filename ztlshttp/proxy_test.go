package ztlshttp

import (
	"io"
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/tls13"
)

// A client that sends its ClientHello and then nothing (slowloris) is
// closed at HandshakeTimeout, not at the idle Timeout: over HTTP/1.1 and
// over HTTP/2 (ALPN h2), and with a whole early request that the proxy
// forwards before waiting for the client's Finished. Each connection is
// watched until the proxy closes it; 10 s without a close counts as held
// (the Timeout is an hour).
func TestProxyHandshakeTimeout(t *testing.T) {
	be := &backend{}
	origin := httptest.NewServer(be)
	defer origin.Close()
	u, _ := url.Parse(origin.URL)
	proxy := &Proxy{Backend: u, Timeout: time.Hour, HandshakeTimeout: 300 * time.Millisecond}
	w, err := lab.Start(lab.Options{Handler: func(c *tls13.Conn) { proxy.ServeConn(c) }, ZDataOptions: zdataALPN()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.ServerTLS.NextProtos = []string{"h2", "http/1.1"}
	w.ServerTLS.StrikeRegister = tls13.NewMemoryStrikeRegister(1000, time.Time{})
	w.ServerTLS.MaxEarlyData = 16 << 10
	for _, tc := range []struct {
		name   string
		protos []string
		early  string
	}{
		{"http/1.1", []string{"http/1.1"}, ""},
		{"h2", []string{"h2"}, ""},
		{"early request", []string{"http/1.1"}, "GET /early HTTP/1.1\r\nHost: " + w.Host + "\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := tls13.NewClientEngine(&tls13.Config{ServerName: w.Host, InsecureSkipVerify: true, NextProtos: tc.protos})
			var early []byte
			var offer *tls13.ZDataOffer
			if tc.early != "" {
				offer, early = w.Service.Records(clock.Now())[0].Offer(w.Cert.Leaf), []byte(tc.early)
			}
			if err := e.Start(nil, offer, early); err != nil {
				t.Fatal(err)
			}
			c, err := net.DialTimeout("tcp", w.ServerAddr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(e.Output()); err != nil {
				t.Fatal(err)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			got, err := io.ReadAll(c) // the proxy's flight (and answer) first
			if err != nil && !strings.Contains(err.Error(), "reset by peer") {
				t.Fatalf("the proxy held a connection whose handshake stalled: %v", err)
			}
			if tc.early != "" && len(be.seen()) == 0 {
				t.Fatalf("the early request was not forwarded (%d bytes back)", len(got))
			}
		})
	}
}
