package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/zdata"
)

// newBFEZData makes a certificate for www.ztls.test and a Z-data
// directory with BFE keys for port at path.
func newBFEZData(t *testing.T, ca *testpki.CA, path string, port int) {
	t.Helper()
	dir := t.TempDir()
	leaf := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, key := leaf.WritePEM(t, dir)
	if out := run(t, "zdata", "new", "--host", "www.ztls.test", "--port", strconv.Itoa(port), "--cert", cert, "--key", key,
		"--out", path, "--bfe-connections", "16"); !strings.Contains(out, `"v=ztls2"`) {
		t.Fatalf("zdata new printed no v2 record:\n%s", out)
	}
}

// zdataTXT is the Z-data records dns serve at addr answers for the service.
func zdataTXT(t *testing.T, addr string, port int) []*zdata.Record {
	t.Helper()
	m := new(dns.Msg)
	m.SetQuestion(zdata.TXTName("www.ztls.test", port), dns.TypeTXT)
	c := &dns.Client{Net: "tcp", Timeout: 2 * time.Second} // the twin window's answer is over 512 bytes
	in, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatal(err)
	}
	var out []*zdata.Record
	for _, rr := range in.Answer {
		if txt, ok := rr.(*dns.TXT); ok {
			r, err := zdata.ParseTXT(txt.Txt)
			if err != nil {
				t.Fatalf("%v: %v", txt, err)
			}
			out = append(out, r)
		}
	}
	return out
}

// holds says whether recs has a record (v2 or v1) of the period from nb.
func holds(recs []*zdata.Record, v2 bool, nb time.Time) bool {
	for _, r := range recs {
		if r.V2 == v2 && r.NotBefore.Equal(nb) {
			return true
		}
	}
	return false
}

// TestCLIDNSServeRollover: dns serve answers the set of the instant,
// also in the seconds after the next twin's start (TwinLead before the
// rollover) and after the rollover, well before its 10-second round. It
// served the previous set until that round (docs/soak.md, bug 1): after
// the rollover only expired v1 records (v1 clients fell back to TLS 1.3
// with "Z-data expired"), before it no next twin.
func TestCLIDNSServeRollover(t *testing.T) {
	for _, tc := range []struct {
		name, at string
		change   time.Duration // from the hour of the start
	}{
		{"twin", "54:56", time.Hour - zdata.TwinLead},
		{"rollover", "59:56", time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(clock.EnvOffset, offsetReading(t, tc.at))
			ca := testpki.NewCA(t, "ecdsa-p256")
			port := freePort(t)
			zd := filepath.Join(t.TempDir(), "zd")
			newBFEZData(t, ca, zd, port)
			zone := filepath.Join(t.TempDir(), "ztls.test.zone")
			writeFile(t, zone, testZone)
			t.Setenv(clock.EnvOffset, offsetReading(t, tc.at)) // the start at tc.at, whatever zdata new took
			addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", zd, "--listen", "127.0.0.1:0"), "addr")
			change := procNow(t).Truncate(time.Hour).Add(tc.change)
			next := procNow(t).Truncate(time.Hour).Add(time.Hour) // the next period's not-before
			if d := change.Sub(procNow(t)); d < time.Second {
				t.Skipf("started %v before the change: too late to tell", d)
			}
			recs := zdataTXT(t, addr, port)
			if tc.name == "twin" && (!holds(recs, false, next) || holds(recs, true, next)) ||
				tc.name == "rollover" && !holds(recs, true, next) {
				t.Fatalf("before the change: %d records, the next period's v1 %v, twin %v", len(recs), holds(recs, false, next), holds(recs, true, next))
			}
			time.Sleep(change.Sub(procNow(t)) + 1500*time.Millisecond) // real time: the clock of the test's processes runs at rate 1
			recs = zdataTXT(t, addr, port)
			after := procNow(t).Sub(change)
			if after > 5*time.Second {
				t.Skipf("queried %v after the change: too late to tell", after)
			}
			switch tc.name {
			case "twin":
				if !holds(recs, true, next) || holds(recs, false, next) {
					t.Fatalf("%v after the next twin's start: %d records, the next period's twin %v, v1 %v (want the twin in its place)",
						after, len(recs), holds(recs, true, next), holds(recs, false, next))
				}
			case "rollover":
				if !holds(recs, false, next) || !holds(recs, true, next) {
					t.Fatalf("%v after the rollover: %d records, the new period's v1 %v, twin %v (want both)",
						after, len(recs), holds(recs, false, next), holds(recs, true, next))
				}
				for _, r := range recs {
					if !r.NotAfter.After(change) {
						t.Fatalf("%v after the rollover: an expired record (not-after %v)", after, r.NotAfter)
					}
				}
			}
		})
	}
}

// TestCLIServePublishRollover: serve --publish pushes the new period's
// set to the primary just after the rollover, well before its 10-second
// tick, which alone pushed it before (docs/soak.md, bug 1).
func TestCLIServePublishRollover(t *testing.T) {
	if dnstest.BindPath() == "" {
		t.Skip("BIND 9 (named) not installed: make deps installs it")
	}
	t.Setenv(clock.EnvOffset, offsetReading(t, "59:55"))
	ca := testpki.NewCA(t, "ecdsa-p256")
	port := freePort(t)
	zd := filepath.Join(t.TempDir(), "zd")
	newBFEZData(t, ca, zd, port)
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	bind := dnstest.StartBind(t, dnstest.BindOptions{
		Zones: []dnstest.BindZone{{Origin: "ztls.test.", Text: testZone, AllowUpdate: true}},
		Key:   &dnstest.BindKey{Name: "ztls-key", Algorithm: "hmac-sha256", Secret: secret},
	})
	t.Setenv(clock.EnvOffset, offsetReading(t, "59:55"))
	_, _, cmd := startProc(t, "published", "serve", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--zdata", zd,
		"--respond", "hello", "--publish", bind.Addr, "--publish-zone", "ztls.test", "--tsig-name", "ztls-key", "--tsig-secret", secret)
	defer stopCmd(cmd)
	next := procNow(t).Truncate(time.Hour).Add(time.Hour)
	if d := next.Sub(procNow(t)); d < time.Second {
		t.Skipf("started %v before the rollover: too late to tell", d)
	}
	time.Sleep(next.Sub(procNow(t)) + 1500*time.Millisecond) // real time: the clock of the test's processes runs at rate 1
	recs := zdataTXT(t, bind.Addr, port)
	if after := procNow(t).Sub(next); after > 5*time.Second {
		t.Skipf("queried %v after the rollover: too late to tell", after)
	}
	if !holds(recs, false, next) || !holds(recs, true, next) {
		t.Fatalf("just after the rollover the primary holds %d records, the new period's v1 %v, twin %v (want both)",
			len(recs), holds(recs, false, next), holds(recs, true, next))
	}
}
