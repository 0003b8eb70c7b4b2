package dial

// The rest of docs/ztls-spec.md, Section 6's fallback matrix and the rotation run. Each
// fallback must give its reason and still the right response over TLS 1.3.

import (
	"crypto/x509"
	"errors"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/clock"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/revocation"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

func wantFallback(t *testing.T, r *Result, err error, reasons ...zdata.Reason) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if r.Report.Mode != "tls" {
		t.Fatalf("mode %s, want a fallback to TLS 1.3", r.Report.Mode)
	}
	for _, reason := range reasons {
		if strings.HasPrefix(r.Report.FallbackReason, string(reason)+":") {
			return
		}
	}
	t.Fatalf("reason %q, want one of %q", r.Report.FallbackReason, reasons)
}

// records signs a fresh record for host:port with cert and returns its RRs.
func records(t *testing.T, w *lab.World, host string, port int, cert tls13.Certificate) []dns.RR {
	t.Helper()
	svc, err := zdata.NewService(host, port, cert, zdata.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Rotate(clock.Now()); err != nil {
		t.Fatal(err)
	}
	return zdata.ZoneRRs(svc.Records(clock.Now()), cert.Chain[0], nil, time.Minute)
}

func TestFallbackLeafForAnotherName(t *testing.T) {
	w := startWorld(t, lab.Options{})
	// Trusted by the client, but issued for another name.
	other, err := w.IssueCert("other.ztls.test")
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(w.Host, w.Port, records(t, w, w.Host, w.Port, other)); err != nil {
		t.Fatal(err)
	}
	r, err := connect(t, w, nil)
	wantFallback(t, r, err, zdata.ReasonWrongName)
}

func TestFallbackUntrustedLeaf(t *testing.T) {
	w := startWorld(t, lab.Options{})
	// A leaf for the right name from a CA the client does not trust.
	stranger := startWorld(t, lab.Options{Host: w.Host})
	if err := w.Publish(w.Host, w.Port, records(t, w, w.Host, w.Port, stranger.Cert)); err != nil {
		t.Fatal(err)
	}
	r, err := connect(t, w, nil)
	wantFallback(t, r, err, zdata.ReasonUntrustedChain)
}

func TestFallbackUnknownGroupAndScheme(t *testing.T) {
	for _, tc := range []struct {
		field  int
		value  string
		reason zdata.Reason
	}{{5, "24", zdata.ReasonUnknownGroup}, {8, "1025", zdata.ReasonUnknownScheme}} {
		t.Run(string(tc.reason), func(t *testing.T) {
			w := startWorld(t, lab.Options{})
			rec := w.Service.Records(clock.Now())[0]
			txt := rec.TXT()
			txt[tc.field] = tc.value
			rr := &dns.TXT{Hdr: dns.RR_Header{Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: txt}
			if err := w.Publish(w.Host, w.Port, []dns.RR{rr, zdata.TLSA(w.Host, w.Port, w.Cert.Chain[0], time.Minute)}); err != nil {
				t.Fatal(err)
			}
			r, err := connect(t, w, nil)
			wantFallback(t, r, err, tc.reason)
		})
	}
}

func TestFallbackZDataCopiedToAnotherHost(t *testing.T) {
	w := startWorld(t, lab.Options{AltNames: []string{"copy.ztls.test"}})
	// An attacker serves the genuine record under another name.
	if err := w.AddAddress("copy.ztls.test", "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	genuine := zdata.ZoneRRs(w.Service.Records(clock.Now()), w.Cert.Chain[0], nil, time.Minute)
	if err := w.Publish("copy.ztls.test", w.Port, genuine); err != nil {
		t.Fatal(err)
	}
	res, _ := w.Resolver(resolver.UDP)
	defer res.Close()
	r, err := Connect(ctxT(t), net.JoinHostPort("copy.ztls.test", strconv.Itoa(w.Port)),
		Options{Mode: "auto", TLS: w.ClientTLS(), Resolver: res, Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: NewMemory(), ZDataBudget: time.Second})
	if err == nil {
		defer r.Conn.Close()
	}
	wantFallback(t, r, err, zdata.ReasonWrongService, zdata.ReasonBadSignature)
}

func TestFallbackZDataCopiedToAnotherPort(t *testing.T) {
	w := startWorld(t, lab.Options{})
	// A second port of the same host, serving plain TLS 1.3, gets the first port's Z-data.
	ln, err := tls13.Listen("tcp", "127.0.0.1:0", w.ServerTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 100)
				if _, err := c.Read(buf); err == nil {
					c.Write([]byte("hello"))
				}
			}()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	genuine := zdata.ZoneRRs(w.Service.Records(clock.Now()), w.Cert.Chain[0], nil, time.Minute)
	if err := w.Publish(w.Host, port, genuine); err != nil {
		t.Fatal(err)
	}
	res, _ := w.Resolver(resolver.UDP)
	defer res.Close()
	r, err := Connect(ctxT(t), net.JoinHostPort(w.Host, strconv.Itoa(port)),
		Options{Mode: "auto", TLS: w.ClientTLS(), Resolver: res, Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: NewMemory(), ZDataBudget: time.Second})
	if err == nil {
		defer r.Conn.Close()
	}
	wantFallback(t, r, err, zdata.ReasonWrongService, zdata.ReasonBadSignature)
}

// fakeClock is the simulated time of the rotation run.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Simulated time across five 1-hour epochs, a connection every 4 minutes,
// the publisher rotating every 4 minutes and DNS caching by TTL: no
// connection may fall back because of rotation.
func TestRotationNoFallbacks(t *testing.T) {
	now := clock.Now().Truncate(time.Hour).Add(37 * time.Minute)
	clock := &fakeClock{t: now}
	w := startWorld(t, lab.Options{Now: clock.Now})
	res, err := resolver.New(resolver.Config{Servers: []string{w.DNSAddr}, Now: clock.Now, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	cfg := w.ClientTLS()
	cfg.Time = clock.Now
	ids := map[uint32]bool{}
	for step := 0; step < 5*15; step++ {
		clock.Advance(4 * time.Minute)
		if err := w.Republish(clock.Now()); err != nil {
			t.Fatal(err)
		}
		r, err := Connect(ctxT(t), w.HostPort(), Options{Mode: "auto", TLS: cfg, Resolver: res, Now: clock.Now,
			Request: []byte("GET /"), ReplaySafe: true, ReadResponse: 100, Memory: NewMemory(), ZDataBudget: time.Second})
		if err != nil {
			t.Fatalf("step %d (%s): %v", step, clock.Now().Format(time.TimeOnly), err)
		}
		r.Conn.Close()
		if r.Report.Mode != "ztls" {
			t.Fatalf("step %d (%s): fell back: %s", step, clock.Now().Format(time.TimeOnly), r.Report.FallbackReason)
		}
		for _, k := range w.Service.Keyring.Live(clock.Now()) {
			ids[k.Record.ID] = true
		}
	}
	if len(ids) < 5 {
		t.Fatalf("only %d Z-data keys over five hours: no rotation happened", len(ids))
	}
}

// TestFallbackRevokedLeaf: Z-data signed by a certificate the client's
// CRL revokes is not used (docs/ztls-spec.md, Section 6); the server's own certificate is
// not revoked, so TLS 1.3 serves the request. When the CRL also revokes
// the server's certificate, the connection fails with certificate_revoked.
func TestFallbackRevokedLeaf(t *testing.T) {
	w := startWorld(t, lab.Options{})
	old, err := w.IssueCert(w.Host)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Publish(w.Host, w.Port, records(t, w, w.Host, w.Port, old)); err != nil {
		t.Fatal(err)
	}
	withCRL := func(serials ...*big.Int) func(*Options) {
		der, err := w.CRL(serials...)
		if err != nil {
			t.Fatal(err)
		}
		crl, err := x509.ParseRevocationList(der)
		if err != nil {
			t.Fatal(err)
		}
		return func(o *Options) { o.TLS.Revocation = revocation.New(crl) }
	}
	r, err := connect(t, w, withCRL(old.Leaf.SerialNumber))
	wantFallback(t, r, err, zdata.ReasonRevoked)
	if r.Report.ResponseBytes == 0 {
		t.Fatal("no response over the TLS 1.3 fallback")
	}
	_, err = connect(t, w, withCRL(old.Leaf.SerialNumber, w.Cert.Leaf.SerialNumber))
	if !errors.Is(err, revocation.ErrRevoked) || !strings.Contains(err.Error(), "certificate_revoked") {
		t.Fatalf("server certificate revoked: %v", err)
	}
}
