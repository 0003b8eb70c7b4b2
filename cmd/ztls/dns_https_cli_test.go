package main

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/turbo"
	"github.com/ztls-project/ztls/zdata"
)

// httpsService is a Z-data directory for www.ztls.test with BFE keys,
// its leaf and a zone file to serve it from.
type httpsService struct {
	zd, zone, ca string
	port         int
	leaf         *x509.Certificate
}

func newHTTPSService(t *testing.T, keyType string) *httpsService {
	t.Helper()
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	l := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, DNSNames: []string{"www.ztls.test"}})
	cert, key := l.WritePEM(t, dir)
	s := &httpsService{zd: filepath.Join(dir, "zd"), zone: filepath.Join(dir, "ztls.test.zone"), ca: ca.WritePEM(t, dir), port: freePort(t), leaf: l.Cert}
	run(t, "zdata", "new", "--host", "www.ztls.test", "--port", strconv.Itoa(s.port), "--cert", cert, "--key", key,
		"--out", s.zd, "--bfe-connections", "16")
	writeFile(t, s.zone, testZone)
	return s
}

// exchangeWithCookie asks q over UDP as a resolver with a DNS cookie does
// (RFC 7873): a first query learns the server cookie, the second presents
// it, so the server's amplification cap does not apply.
func exchangeWithCookie(t *testing.T, q *dns.Msg, addr string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second, UDPSize: 1232}
	cookie := "0123456789abcdef"
	var r *dns.Msg
	for range 2 {
		m := q.Copy()
		m.SetEdns0(1232, false)
		m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_COOKIE{Code: dns.EDNS0COOKIE, Cookie: cookie})
		var err error
		if r, _, err = c.Exchange(m, addr); err != nil && r == nil {
			t.Fatal(err)
		}
		if opt := r.IsEdns0(); opt != nil {
			for _, o := range opt.Option {
				if c, ok := o.(*dns.EDNS0_COOKIE); ok {
					cookie = c.Cookie
				}
			}
		}
	}
	return r
}

// httpsAnswer is the single HTTPS RR of an answer.
func httpsAnswer(t *testing.T, r *dns.Msg) *dns.HTTPS {
	t.Helper()
	var out []*dns.HTTPS
	for _, rr := range r.Answer {
		if h, ok := rr.(*dns.HTTPS); ok {
			out = append(out, h)
		}
	}
	if len(out) != 1 {
		t.Fatalf("%d HTTPS RRs in %v, want one (Z-data and TurboTLS in one RR)", len(out), r)
	}
	return out[0]
}

// TestCLIDNSServeHTTPSRecord: dns serve --zdata serves the service's
// HTTPS record carrying the Z-data of both periods with their v2 twins,
// in the same RR as TurboTLS's key (--turbo), alpn and the zone's address
// as hint. The default profile's answer comes whole over UDP within 1232
// bytes; an RSA leaf's (over 1232) is truncated (TC=1) over UDP and comes
// whole over TCP. Every record verifies for the host and port with the
// leaf, the TTL is TTLFor's on the server's clock, and TXT is still
// served beside it.
func TestCLIDNSServeHTTPSRecord(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	for _, tc := range []struct {
		keyType string
		fitsUDP bool
	}{{"ecdsa-p256", true}, {"rsa2048", false}} {
		t.Run(tc.keyType, func(t *testing.T) {
			s := newHTTPSService(t, tc.keyType)
			addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--turbo",
				"--https-alpn", "h2,http/1.1", "--listen", "127.0.0.1:0"), "addr")
			q := new(dns.Msg)
			q.SetQuestion("_"+strconv.Itoa(s.port)+"._https.www.ztls.test.", dns.TypeHTTPS)
			udp := exchangeWithCookie(t, q, addr)
			tcpq := q.Copy()
			tcpq.SetEdns0(1232, false)
			tcp, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(tcpq, addr)
			if err != nil {
				t.Fatal(err)
			}
			size := tcp.Len()
			t.Logf("%s: the HTTPS answer is %d bytes (UDP: %d bytes, TC=%v)", tc.keyType, size, udp.Len(), udp.Truncated)
			if tc.fitsUDP && (udp.Truncated || size > 1232 || udp.Len() > 1232) {
				t.Fatalf("default profile: %d bytes, UDP TC=%v: want the whole answer over UDP within 1232", size, udp.Truncated)
			}
			if !tc.fitsUDP && (!udp.Truncated || len(udp.Answer) != 0 || size <= 1232) {
				t.Fatalf("%d bytes: UDP TC=%v with %d answers, want TC=1 and the answer over TCP", size, udp.Truncated, len(udp.Answer))
			}
			rr := httpsAnswer(t, tcp)
			if tc.fitsUDP && httpsAnswer(t, udp).String() != rr.String() {
				t.Fatal("UDP and TCP answers differ")
			}
			checkServedHTTPS(t, s, rr, procNow(t))
			if len(zdataTXT(t, addr, s.port)) == 0 {
				t.Fatal("no TXT records beside the HTTPS record")
			}
		})
	}
}

// checkServedHTTPS checks the HTTPS record dns serve --turbo --https-alpn
// h2,http/1.1 serves for s.
func checkServedHTTPS(t *testing.T, s *httpsService, rr *dns.HTTPS, now time.Time) {
	t.Helper()
	if p, err := turbo.UDPPortFrom([]dns.RR{rr}); err != nil || int(p) != s.port {
		t.Fatalf("TurboTLS port %d (%v), want %d", p, err, s.port)
	}
	var alpn []string
	var hint string
	for _, kv := range rr.Value {
		switch v := kv.(type) {
		case *dns.SVCBAlpn:
			alpn = v.Alpn
		case *dns.SVCBIPv4Hint:
			hint = v.String()
		case *dns.SVCBMandatory:
			t.Fatalf("mandatory %v", v)
		}
	}
	if !slices.Equal(alpn, []string{"h2", "http/1.1"}) || hint != "127.0.0.1" {
		t.Fatalf("alpn %q, ipv4hint %q", alpn, hint)
	}
	recs, err := zdata.RecordsFromSVCB(&rr.SVCB, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 {
		t.Fatalf("%d Z-data records, want the current and next periods' v1 records and v2 twins", len(recs))
	}
	v2 := 0
	for _, r := range recs {
		if err := r.Verify(s.leaf, "www.ztls.test", s.port); err != nil {
			t.Fatal(err)
		}
		if r.V2 {
			v2++
		}
	}
	if v2 != 2 {
		t.Fatalf("%d v2 records", v2)
	}
	if ttl := time.Duration(rr.Hdr.Ttl) * time.Second; ttl > zdata.TTLFor(recs, now, 5*time.Minute) {
		t.Fatalf("TTL %v outlives the records (%v)", ttl, zdata.TTLFor(recs, now, 5*time.Minute))
	}
}

// --zdata-https=false serves no HTTPS record (TurboTLS's alone with
// --turbo), --zdata-svc-key moves the Z-data to another private-use key,
// and TurboTLS's key or a key outside the private-use range is refused
// with a message that says which keys to use.
func TestCLIDNSServeHTTPSFlags(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	s := newHTTPSService(t, "ecdsa-p256")
	owner := "_" + strconv.Itoa(s.port) + "._https.www.ztls.test."
	ask := func(addr string) []dns.RR {
		q := new(dns.Msg)
		q.SetQuestion(owner, dns.TypeHTTPS)
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(q, addr)
		if err != nil {
			t.Fatal(err)
		}
		return r.Answer
	}
	addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--zdata-https=false", "--listen", "127.0.0.1:0"), "addr")
	if a := ask(addr); len(a) != 0 {
		t.Fatalf("--zdata-https=false served %v", a)
	}
	addr = logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--zdata-https=false", "--turbo", "--listen", "127.0.0.1:0"), "addr")
	a := ask(addr)
	if p, err := turbo.UDPPortFrom(a); err != nil || int(p) != s.port || len(a) != 1 {
		t.Fatalf("--zdata-https=false --turbo served %v", a)
	}
	if _, err := zdata.RecordsFromSVCB(&a[0].(*dns.HTTPS).SVCB, 0); err != zdata.ErrNoSvcParam {
		t.Fatalf("--zdata-https=false --turbo: Z-data in %v (%v)", a[0], err)
	}
	addr = logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--zdata-svc-key", "65400", "--listen", "127.0.0.1:0"), "addr")
	a = ask(addr)
	if len(a) != 1 {
		t.Fatalf("--zdata-svc-key 65400 served %v", a)
	}
	if _, err := zdata.RecordsFromSVCB(&a[0].(*dns.HTTPS).SVCB, 65400); err != nil {
		t.Fatalf("key65400: %v in %v", err, a[0])
	}
	if _, err := zdata.RecordsFromSVCB(&a[0].(*dns.HTTPS).SVCB, 0); err == nil {
		t.Fatal("Z-data under the default key too")
	}
	for _, tc := range []struct{ key, want string }{
		{"65280", "TurboTLS"}, {"65535", "not a private-use key"}, {"5", "not a private-use key"}, {"70000", "65281 to 65534"},
	} {
		cmd := exec.Command(ztlsBinary(t), "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--zdata-svc-key", tc.key, "--listen", "127.0.0.1:0")
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), tc.want) {
			t.Errorf("--zdata-svc-key %s: %v\n%s", tc.key, err, out)
		}
	}
}

// zdata check verifies the Z-data of the HTTPS record (signed for the
// host and port by the TLSA leaf, some valid now) beside the TXT path,
// and sizes its answer for the default profile (within 1232 bytes) and
// an RSA leaf's (over 1232: asked again over TCP, the whole size
// reported); with another key than the server's it finds no Z-data in
// the record.
func TestCLIZDataCheckHTTPS(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	for _, keyType := range []string{"ecdsa-p256", "rsa2048"} {
		t.Run(keyType, func(t *testing.T) {
			s := newHTTPSService(t, keyType)
			addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--turbo", "--listen", "127.0.0.1:0"), "addr")
			check := func(extra ...string) checkReport {
				var rep checkReport
				args := append([]string{"zdata", "check", "www.ztls.test", "--port", strconv.Itoa(s.port), "--resolver", addr, "--ca", s.ca, "--json"}, extra...)
				if err := json.Unmarshal([]byte(run(t, args...)), &rep); err != nil {
					t.Fatal(err)
				}
				return rep
			}
			rep := check()
			if !rep.Valid || rep.HTTPS == nil || rep.HTTPS.Records != 4 || !rep.HTTPS.Verified || rep.HTTPS.ValidNow < 2 {
				t.Fatalf("check: %+v, HTTPS %+v", rep, rep.HTTPS)
			}
			for _, a := range rep.Answers {
				if a.Type != "HTTPS" {
					continue
				}
				t.Logf("%s: zdata check sizes the HTTPS answer at %d bytes", keyType, a.Bytes)
				if keyType == "ecdsa-p256" && (a.Bytes > 1232 || a.OverUDP || a.Truncated) ||
					keyType == "rsa2048" && (a.Bytes <= 1232 || !a.OverUDP || a.Records != 1) {
					t.Fatalf("%s: HTTPS answer %+v", keyType, a)
				}
			}
			if rep := check("--zdata-svc-key", "65400"); !rep.Valid || rep.HTTPS != nil {
				t.Fatalf("another key: %+v, HTTPS %+v", rep, rep.HTTPS)
			}
		})
	}
}

// rdataOf is rr's RDATA on the wire.
func rdataOf(t *testing.T, rr dns.RR) []byte {
	t.Helper()
	c := dns.Copy(rr)
	c.Header().Name, c.Header().Ttl = ".", 0
	b := make([]byte, 4096)
	n, err := dns.PackRR(c, b, 0, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	return b[11:n] // the root name, type, class, TTL and RDLENGTH
}

// Unbound and BIND 9 as resolvers in front of dns serve (the embedded
// authority) return its HTTPS record unchanged, the RSA profile's too
// (over 1232 bytes: they fetch it over TCP, and truncate it to a UDP
// client), and answer the second query from their cache.
func TestCLIDNSServeHTTPSThroughResolvers(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	for _, keyType := range []string{"ecdsa-p256", "rsa2048"} {
		t.Run(keyType, func(t *testing.T) {
			s := newHTTPSService(t, keyType)
			addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--turbo",
				"--https-alpn", "h2,http/1.1", "--listen", "127.0.0.1:0"), "addr")
			q := new(dns.Msg)
			q.SetQuestion("_"+strconv.Itoa(s.port)+"._https.www.ztls.test.", dns.TypeHTTPS)
			q.SetEdns0(1232, false)
			ask := func(server, network string) *dns.Msg {
				t.Helper()
				r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 1232}).Exchange(q, server)
				if err != nil {
					t.Fatalf("%s over %s: %v", server, network, err)
				}
				return r
			}
			want := httpsAnswer(t, ask(addr, "tcp"))
			for _, res := range []struct{ name, addr string }{
				{"Unbound", dnstest.StartUnbound(t, dnstest.UnboundOptions{StubZones: map[string]string{"ztls.test.": addr}}).Addr},
				{"BIND 9", dnstest.StartBind(t, dnstest.BindOptions{Forward: map[string]string{"ztls.test.": addr}}).Addr},
			} {
				for i, network := range []string{"udp", "tcp", "tcp"} {
					r := ask(res.addr, network)
					if network == "udp" && keyType != "ecdsa-p256" {
						if !r.Truncated {
							t.Fatalf("%s: a %d-byte answer over UDP without TC", res.name, r.Len())
						}
						continue
					}
					got := httpsAnswer(t, r)
					if !bytes.Equal(rdataOf(t, got), rdataOf(t, want)) {
						t.Fatalf("%s over %s (query %d): the HTTPS RR changed:\n got %v\nwant %v", res.name, network, i+1, got, want)
					}
					if got.Hdr.Ttl == 0 || got.Hdr.Ttl > want.Hdr.Ttl {
						t.Fatalf("%s: TTL %d, served %d", res.name, got.Hdr.Ttl, want.Hdr.Ttl)
					}
					checkServedHTTPS(t, s, got, procNow(t))
				}
			}
		})
	}
}

// TestCLIDNSServeHTTPSRollover: the HTTPS record is republished at the
// rollover with the TXT set: a second after it, it carries no expired
// record and holds the new period's v1 record and twin.
func TestCLIDNSServeHTTPSRollover(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "59:55"))
	s := newHTTPSService(t, "ecdsa-p256")
	t.Setenv(clock.EnvOffset, offsetReading(t, "59:55")) // the start at 59:55, whatever zdata new took
	addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", s.zone, "--zdata", s.zd, "--listen", "127.0.0.1:0"), "addr")
	change := procNow(t).Truncate(time.Hour).Add(time.Hour)
	if d := change.Sub(procNow(t)); d < time.Second {
		t.Skipf("started %v before the rollover: too late to tell", d)
	}
	q := new(dns.Msg)
	q.SetQuestion("_"+strconv.Itoa(s.port)+"._https.www.ztls.test.", dns.TypeHTTPS)
	records := func() []*zdata.Record {
		t.Helper()
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(q, addr)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := zdata.RecordsFromSVCB(&httpsAnswer(t, r).SVCB, 0)
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	if recs := records(); !holds(recs, false, change) || !holds(recs, true, change) {
		t.Fatalf("before the rollover: %d records, the next period's v1 %v, twin %v (want both a period ahead)", len(recs), holds(recs, false, change), holds(recs, true, change))
	}
	time.Sleep(change.Sub(procNow(t)) + 1500*time.Millisecond) // real time: the clock of the test's processes runs at rate 1
	recs := records()
	after := procNow(t).Sub(change)
	if after > 5*time.Second {
		t.Skipf("queried %v after the rollover: too late to tell", after)
	}
	if !holds(recs, false, change) || !holds(recs, true, change) {
		t.Fatalf("%v after the rollover: %d records, the new period's v1 %v, twin %v", after, len(recs), holds(recs, false, change), holds(recs, true, change))
	}
	for _, r := range recs {
		if !r.NotAfter.After(change) {
			t.Fatalf("%v after the rollover: an expired record (not-after %v)", after, r.NotAfter)
		}
	}
}

// zdata publish pushes the HTTPS record with the Z-data and TurboTLS's
// key in one RR, beside the TXT, TLSA and CERT sets, to BIND 9 and to
// Knot DNS; both serve it as 'zdata new' printed it (the same RDATA: one
// builder), and a second publish with --zdata-https=false --turbo-port
// leaves TurboTLS's key alone in it.
func TestCLIZDataPublishHTTPSToBindAndKnot(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	zone := dnstest.BindZone{Origin: "ztls.test.", Text: testZone, AllowUpdate: true}
	key := &dnstest.BindKey{Name: "ztls-key", Secret: secret}
	dir := t.TempDir()
	ca := testpki.NewCA(t, "ecdsa-p256")
	l := ca.Issue(t, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"www.ztls.test"}})
	cert, pkey := l.WritePEM(t, dir)
	s := &httpsService{zd: filepath.Join(dir, "zd"), port: freePort(t), leaf: l.Cert}
	printed := run(t, "zdata", "new", "--host", "www.ztls.test", "--port", strconv.Itoa(s.port), "--cert", cert, "--key", pkey,
		"--out", s.zd, "--bfe-connections", "16", "--turbo-port", strconv.Itoa(s.port), "--https-alpn", "h2,http/1.1")
	var want *dns.HTTPS
	for _, line := range strings.Split(printed, "\n") {
		if strings.Contains(line, "\tHTTPS\t") {
			rr, err := dns.NewRR(line)
			if err != nil {
				t.Fatalf("zdata new's HTTPS line does not parse: %v\n%s", err, line)
			}
			want = rr.(*dns.HTTPS)
		}
	}
	if want == nil {
		t.Fatalf("zdata new printed no HTTPS record:\n%s", printed)
	}
	primaries := []struct{ name, addr string }{
		{"BIND 9", dnstest.StartBind(t, dnstest.BindOptions{Zones: []dnstest.BindZone{zone}, Key: key}).Addr},
		{"Knot DNS", dnstest.StartKnot(t, dnstest.KnotOptions{Zones: []dnstest.BindZone{zone}, Key: key}).Addr},
	}
	q := new(dns.Msg)
	q.SetQuestion(want.Hdr.Name, dns.TypeHTTPS)
	q.SetEdns0(1232, false)
	for _, p := range primaries {
		out := run(t, "zdata", "publish", s.zd, "--server", p.addr, "--zone", "ztls.test", "--tsig-name", "ztls-key", "--tsig-secret", secret,
			"--turbo-port", strconv.Itoa(s.port), "--https-alpn", "h2,http/1.1")
		if !strings.Contains(out, "published") {
			t.Fatalf("%s: %s", p.name, out)
		}
		for _, network := range []string{"udp", "tcp"} {
			r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 1232}).Exchange(q, p.addr)
			if err != nil {
				t.Fatal(err)
			}
			got := httpsAnswer(t, r)
			if !bytes.Equal(rdataOf(t, got), rdataOf(t, want)) {
				t.Fatalf("%s over %s serves\n%v\nnot what zdata new printed\n%v", p.name, network, got, want)
			}
			if p, err := turbo.UDPPortFrom([]dns.RR{got}); err != nil || int(p) != s.port {
				t.Fatalf("TurboTLS port %d (%v)", p, err)
			}
		}
		run(t, "zdata", "publish", s.zd, "--server", p.addr, "--zone", "ztls.test", "--tsig-name", "ztls-key", "--tsig-secret", secret,
			"--turbo-port", strconv.Itoa(s.port), "--zdata-https=false")
		r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, p.addr)
		if err != nil {
			t.Fatal(err)
		}
		got := httpsAnswer(t, r)
		if _, err := zdata.RecordsFromSVCB(&got.SVCB, 0); err != zdata.ErrNoSvcParam {
			t.Fatalf("%s after --zdata-https=false: %v", p.name, got)
		}
		if p, err := turbo.UDPPortFrom([]dns.RR{got}); err != nil || int(p) != s.port {
			t.Fatalf("TurboTLS port %d (%v) after --zdata-https=false", p, err)
		}
	}
}

// A zone file's own HTTPS records at the service's name keep what they
// carry (target, alpn, ech, port) and get the Z-data and TurboTLS keys
// added, at the lower TTL; an AliasMode record is served as written.
func TestCLIDNSServeHTTPSMergesZoneRecords(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	s := newHTTPSService(t, "ecdsa-p256")
	owner := "_" + strconv.Itoa(s.port) + "._https.www.ztls.test."
	for _, tc := range []struct {
		name, rrs string
		merged    bool
	}{
		{"ServiceMode", owner + " 3600 IN HTTPS 1 svc.ztls.test. alpn=h3,h2 port=8443\n" +
			owner + " 3600 IN HTTPS 2 . alpn=h2\n", true},
		{"AliasMode", owner + " 3600 IN HTTPS 0 pool.ztls.test.\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zone := filepath.Join(t.TempDir(), "ztls.test.zone")
			writeFile(t, zone, testZone+tc.rrs)
			addr := logAttr(start(t, "serving udp on", "dns", "serve", "--zone", zone, "--zdata", s.zd, "--turbo", "--listen", "127.0.0.1:0"), "addr")
			q := new(dns.Msg)
			q.SetQuestion(owner, dns.TypeHTTPS)
			r, _, err := (&dns.Client{Net: "tcp", Timeout: 3 * time.Second}).Exchange(q, addr)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Count(tc.rrs, "\n")
			if len(r.Answer) != want {
				t.Fatalf("%d HTTPS RRs, want the zone's %d: %v", len(r.Answer), want, r.Answer)
			}
			for _, rr := range r.Answer {
				h := rr.(*dns.HTTPS)
				recs, err := zdata.RecordsFromSVCB(&h.SVCB, 0)
				_, terr := turbo.UDPPortFrom([]dns.RR{h})
				if !tc.merged {
					if err == nil || terr == nil || h.Hdr.Ttl != 3600 {
						t.Fatalf("the alias got keys or a new TTL: %v", h)
					}
					continue
				}
				if err != nil || len(recs) != 4 || terr != nil || h.Hdr.Ttl > 300 {
					t.Fatalf("%v: Z-data %d (%v), TurboTLS %v", h, len(recs), err, terr)
				}
				if h.Priority == 1 && (h.Target != "svc.ztls.test." || !strings.Contains(h.String(), `alpn="h3,h2" port="8443"`)) {
					t.Fatalf("the zone's RR lost its own parameters: %v", h)
				}
			}
		})
	}
}

// zdata publish puts the Z-data and TurboTLS keys into the HTTPS records
// the primary already holds at the service's name (BIND 9 and Knot DNS):
// the operator's target, alpn and port stay, the TTL is the Z-data's; a
// second publish replaces its own keys without piling up; an AliasMode
// RRset is left alone, and the command says so.
func TestCLIZDataPublishMergesPrimaryHTTPS(t *testing.T) {
	t.Setenv(clock.EnvOffset, offsetReading(t, "10:00")) // one period throughout, TTLs of whole minutes
	const secret = "c2VjcmV0LWtleS1mb3ItenRscy1wdWJsaXNoLXRlc3Rz"
	s := newHTTPSService(t, "ecdsa-p256")
	owner := "_" + strconv.Itoa(s.port) + "._https.www.ztls.test."
	key := &dnstest.BindKey{Name: "ztls-key", Secret: secret}
	for _, tc := range []struct {
		name, rr string
		alias    bool
	}{
		{"ServiceMode", owner + " 3600 IN HTTPS 1 svc.ztls.test. alpn=h3,h2 port=8443\n", false},
		{"AliasMode", owner + " 3600 IN HTTPS 0 pool.ztls.test.\n", true},
	} {
		zone := dnstest.BindZone{Origin: "ztls.test.", Text: testZone + tc.rr, AllowUpdate: true}
		for _, p := range []struct{ name, addr string }{
			{"BIND 9", dnstest.StartBind(t, dnstest.BindOptions{Zones: []dnstest.BindZone{zone}, Key: key}).Addr},
			{"Knot DNS", dnstest.StartKnot(t, dnstest.KnotOptions{Zones: []dnstest.BindZone{zone}, Key: key}).Addr},
		} {
			who := tc.name + " on " + p.name
			for range 2 {
				cmd := exec.Command(ztlsBinary(t), "zdata", "publish", s.zd, "--server", p.addr, "--zone", "ztls.test", "--tsig-name", "ztls-key",
					"--tsig-secret", secret, "--turbo-port", strconv.Itoa(s.port))
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if out, err := cmd.Output(); err != nil || !strings.Contains(string(out), "published") {
					t.Fatalf("%s: %v\n%s%s", who, err, out, stderr.String())
				}
				if tc.alias != strings.Contains(stderr.String(), "AliasMode") {
					t.Fatalf("%s: stderr %q", who, stderr.String())
				}
			}
			q := new(dns.Msg)
			q.SetQuestion(owner, dns.TypeHTTPS)
			r, _, err := (&dns.Client{Net: "tcp", Timeout: 5 * time.Second}).Exchange(q, p.addr)
			if err != nil {
				t.Fatal(err)
			}
			h := httpsAnswer(t, r)
			recs, zerr := zdata.RecordsFromSVCB(&h.SVCB, 0)
			_, terr := turbo.UDPPortFrom([]dns.RR{h})
			if tc.alias {
				if h.Priority != 0 || zerr == nil || terr == nil || h.Hdr.Ttl != 3600 {
					t.Fatalf("%s: the alias changed: %v", who, h)
				}
				continue
			}
			if zerr != nil || len(recs) != 4 || terr != nil || h.Hdr.Ttl > 300 || h.Target != "svc.ztls.test." ||
				!strings.Contains(h.String(), `alpn="h3,h2" port="8443"`) || len(h.Value) != 4 {
				t.Fatalf("%s: %v (Z-data %d, %v; TurboTLS %v)", who, h, len(recs), zerr, terr)
			}
		}
	}
}
