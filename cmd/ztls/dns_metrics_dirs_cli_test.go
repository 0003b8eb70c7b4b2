package main

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

// TestCLIDNSServeMetricsDirsOfOneService: dns serve --metrics with two
// Z-data directories of one host and port (and one of another port)
// serves one ztls_zdata_live_keys gauge per service, counting the live
// keys of its directories once each. It panicked at the start
// ("duplicate metrics collector registration attempted", docs/soak.md,
// bug 3).
func TestCLIDNSServeMetricsDirsOfOneService(t *testing.T) {
	s := newSite(t)
	zd1, zd2 := filepath.Join(t.TempDir(), "zd1"), filepath.Join(t.TempDir(), "zd2")
	other := freePort(t)
	for _, d := range []struct {
		path string
		port int
	}{{zd1, s.port}, {zd2, other}} {
		leaf := s.authority.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{s.host}})
		cert, key := leaf.WritePEM(t, t.TempDir())
		run(t, "zdata", "new", "--host", s.host, "--port", strconv.Itoa(d.port), "--cert", cert, "--key", key, "--out", d.path)
	}
	zone := filepath.Join(s.dir, "ztls.test.zone")
	writeFile(t, zone, testZone)
	ready, log, cmd := startProc(t, "metrics on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--zdata", zd1, "--zdata", zd2,
		"--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:0")
	defer stopCmd(cmd)
	url := logAttr(ready, "url")
	log.waitFor(t, "serving udp on")
	m := scrape(t, url)
	for name, want := range map[string]float64{
		`ztls_zdata_live_keys{service="www.ztls.test:` + strconv.Itoa(s.port) + `"}`: 2, // one in each directory
		`ztls_zdata_live_keys{service="www.ztls.test:` + strconv.Itoa(other) + `"}`:  1,
	} {
		if m[name] != want {
			t.Errorf("%s = %v, want %v", name, m[name], want)
		}
	}
	for _, port := range []int{s.port, other} {
		if name := `ztls_zdata_expiry_seconds{service="www.ztls.test:` + strconv.Itoa(port) + `"}`; m[name] <= 0 {
			t.Errorf("%s = %v, want > 0", name, m[name])
		}
	}
}
