package resolver

import (
	"context"
	"crypto/tls"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/dns/authority"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
)

// svcZone holds one ztls service, www.svc.test port 443, with every record
// LookupService asks for.
const svcZone = `$TTL 300
@ IN SOA ns.svc.test. hostmaster.svc.test. 1 3600 600 86400 60
@ IN NS ns
ns IN A 127.0.0.1
www IN A 127.0.0.10
www IN AAAA 2001:db8::10
www IN HTTPS 1 . alpn=h2
_ztls._443._tcp.www IN TXT "v=ztls1; test z-data"
_ztls._443._tcp.www IN CERT PKIX 0 0 AAECAwQFBgcICQ==
_443._tcp.www IN TLSA 3 1 1 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20
`

// startAuthority serves svcZone with the project's authoritative server on
// a loopback UDP and TCP port and returns the address.
func startAuthority(t testing.TB) string {
	t.Helper()
	zone, err := authority.LoadZone(strings.NewReader(svcZone), "svc.test.", "svc.test.zone")
	if err != nil {
		t.Fatal(err)
	}
	zones, err := authority.NewZones(zone)
	if err != nil {
		t.Fatal(err)
	}
	srv := &authority.Server{Handler: authority.Chain(zones, authority.CheckQuery)}
	var pc net.PacketConn
	var ln net.Listener
	for i := 0; i < 10; i++ {
		pc, err = net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ln, err = net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			break
		}
		pc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	go srv.ServeUDP(pc)
	go srv.ServeTCP(ln)
	t.Cleanup(func() { srv.Close() })
	return pc.LocalAddr().String()
}

// unboundSetup is Unbound (recursive, DoT on a random port with a test
// certificate) with a stub zone for svc.test at the project's authority
// and, when named is installed, one for bind.test at BIND 9 serving the
// same records.
type unboundSetup struct {
	u     *dnstest.Unbound
	pki   *testPKI
	hosts []string // www.svc.test, and www.bind.test with BIND

	// With delayed set, resolvers go through these proxies instead.
	delayed            bool
	plainAddr, tlsAddr string
}

func startUnboundSetup(t testing.TB, extra ...string) *unboundSetup {
	t.Helper()
	if _, err := exec.LookPath("unbound"); err != nil {
		t.Skip("unbound is not installed")
	}
	pki := newTestPKI(t)
	stubs := map[string]string{"svc.test.": startAuthority(t)}
	hosts := []string{"www.svc.test"}
	if dnstest.BindPath() != "" {
		b := dnstest.StartBind(t, dnstest.BindOptions{Zones: []dnstest.BindZone{{Origin: "bind.test.", Text: svcZone}}})
		stubs["bind.test."] = b.Addr
		hosts = append(hosts, "www.bind.test")
	}
	u := dnstest.StartUnbound(t, dnstest.UnboundOptions{
		StubZones:   stubs,
		TLSCertFile: pki.CertFile,
		TLSKeyFile:  pki.KeyFile,
		Extra:       extra,
	})
	return &unboundSetup{u: u, pki: pki, hosts: hosts}
}

func (s *unboundSetup) resolver(t testing.TB, tr Transport, cacheSize int) *Resolver {
	t.Helper()
	cfg := Config{Servers: []string{s.u.Addr}, Transport: tr, CacheSize: cacheSize, Timeout: 10 * time.Second}
	if s.delayed {
		cfg.Servers = []string{s.plainAddr}
	}
	if tr == TLS {
		cfg.Servers = []string{s.u.TLSAddr}
		if s.delayed {
			cfg.Servers = []string{s.tlsAddr}
		}
		cfg.TLSConfig = &tls.Config{RootCAs: s.pki.Pool, ServerName: "server.test"}
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestUnboundLookupService: Unbound, recursing into stub zones served by
// the project's authority and by BIND 9, answers the parallel service
// lookup over UDP, TCP and DNS over TLS.
func TestUnboundLookupService(t *testing.T) {
	setup := startUnboundSetup(t)
	if len(setup.hosts) < 2 {
		t.Log("named not installed: BIND 9 stub zone skipped")
	}
	for _, tr := range []Transport{UDP, TCP, TLS} {
		for _, host := range setup.hosts {
			t.Run(string(tr)+"/"+host, func(t *testing.T) {
				r := setup.resolver(t, tr, 0)
				checkServiceLookup(t, setup, r, tr, host)
			})
		}
	}
}

func checkServiceLookup(t *testing.T, setup *unboundSetup, r *Resolver, tr Transport, host string) {
	fqdn := dns.Fqdn(host)
	var mu sync.Mutex
	var landed []uint16
	res, err := r.LookupService(context.Background(), host, 443, func(a Answer) {
		mu.Lock()
		defer mu.Unlock()
		landed = append(landed, a.Qtype)
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, setup.u.Logs())
	}
	if len(landed) != 6 {
		t.Fatalf("callback saw %d answers, want 6", len(landed))
	}
	for _, a := range res.Answers() {
		if a.Err != nil || a.Rcode != dns.RcodeSuccess || len(a.RRs) != 1 || a.Transport != string(tr) {
			t.Fatalf("%s %s: rcode %d, %d records, over %q, err %v\n%s",
				a.Name, dns.TypeToString[a.Qtype], a.Rcode, len(a.RRs), a.Transport, a.Err, setup.u.Logs())
		}
		if a.RRs[0].Header().Rrtype != a.Qtype {
			t.Fatalf("%s: wrong record %v", a.Name, a.RRs[0])
		}
	}
	addrs := res.Addrs()
	if len(addrs) != 2 || addrs[0].String() != "2001:db8::10" || addrs[1].String() != "127.0.0.10" {
		t.Fatalf("addresses %v", addrs)
	}
	if txt := res.TXT.RRs[0].(*dns.TXT).Txt; len(txt) != 1 || txt[0] != "v=ztls1; test z-data" {
		t.Fatalf("TXT %q", txt)
	}
	if res.TXT.Name != "_ztls._443._tcp."+fqdn || res.TLSA.Name != "_443._tcp."+fqdn || res.HTTPS.Name != fqdn {
		t.Fatalf("owner names %s %s %s", res.TXT.Name, res.TLSA.Name, res.HTTPS.Name)
	}

	// Another port: the Z-data names do not exist; the HTTPS owner is
	// _8443._https.<host> (RFC 9460, Section 2.3). Negative answers are
	// answers, and are cached.
	res, err = r.LookupService(context.Background(), host, 8443, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.HTTPS.Name != "_8443._https."+fqdn || res.HTTPS.Rcode != dns.RcodeNameError ||
		res.TXT.Rcode != dns.RcodeNameError || len(res.A.RRs) != 1 {
		t.Fatalf("port 8443: HTTPS %s rcode %d, TXT rcode %d", res.HTTPS.Name, res.HTTPS.Rcode, res.TXT.Rcode)
	}
	a, err := r.Lookup(context.Background(), "_ztls._8443._tcp."+host, dns.TypeTXT)
	if err != nil || !a.FromCache || a.Rcode != dns.RcodeNameError {
		t.Fatalf("negative answer not cached: %+v, %v", a, err)
	}
}
