package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// A genuine ZTLS fallback, scraped: DNS serves Z-data that the server
// does not hold (another directory's keys for the same service, as after
// a key was lost), so the client offers ZTLS, the server refuses it as an
// unknown record, and the client goes on over TLS 1.3; serve --metrics
// counts the rejection by its reason and the handshake as plain TLS.
func TestCLIServeMetricsAfterZTLSFallback(t *testing.T) {
	s := newSite(t)
	// The same service and certificate, other keys.
	leaf := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{s.host}})
	cert, key := leaf.WritePEM(t, s.dir)
	other := filepath.Join(s.dir, "zd-other")
	run(t, "zdata", "new", "--host", s.host, "--port", strconv.Itoa(s.port), "--cert", cert, "--key", key, "--out", other)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	line := start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", other, "--listen", "127.0.0.1:0")
	dnsAddr := logAttr(line, "addr")
	ready, _, cmd := startProc(t, "metrics on", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(s.port), "--zdata", s.zd,
		"--respond", "hello", "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := logAttr(ready, "url")

	rep := s.connect(t, dnsAddr)
	if rep.Mode != "tls" || !rep.EarlyData.Offered || rep.EarlyData.Accepted || rep.ResponseBytes != len("hello") {
		t.Fatalf("want a ZTLS offer refused and TLS 1.3: mode %s (%s), early %+v, %d bytes", rep.Mode, rep.FallbackReason, rep.EarlyData, rep.ResponseBytes)
	}
	if !strings.Contains(rep.FallbackReason, "reject") {
		t.Errorf("fallback reason %q does not say the server rejected", rep.FallbackReason)
	}
	m := scrape(t, url)
	for name, want := range map[string]float64{
		`ztls_ztls_offers_total{reason="unknown_record",result="rejected"}`: 1,
		`ztls_handshakes_total{mode="tls",transport="tcp"}`:                 1,
	} {
		if got, ok := m[name]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
		}
	}
	if got := m[`ztls_ztls_offers_total{reason="",result="accepted"}`]; got != 0 {
		t.Errorf("accepted offers = %v, want 0", got)
	}
}

// dns serve --metrics: when the served Z-data's last live key expires,
// per service, as serve has it.
func TestCLIDNSServeMetricsZDataExpiry(t *testing.T) {
	s := newSite(t)
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	ready, _, cmd := startProc(t, "metrics on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--listen", "127.0.0.1:0",
		"--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	m := scrape(t, logAttr(ready, "url"))
	name := `ztls_zdata_expiry_seconds{service="www.ztls.test:` + strconv.Itoa(s.port) + `"}`
	got, ok := m[name]
	// One-hour records, the next issued ahead: at most two periods away.
	if !ok || got <= 0 || got > (2*time.Hour).Seconds() {
		t.Fatalf("%s = %v (present %v)", name, got, ok)
	}
}
