package dnstest

import (
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
)

func TestStartUnboundAnswersOverUDPTCPAndTLS(t *testing.T) {
	ca := testpki.NewCA(t, "ecdsa-p256")
	certFile, keyFile := ca.Issue(t, testpki.LeafOpts{}).WritePEM(t, t.TempDir())
	u := StartUnbound(t, UnboundOptions{TLSCertFile: certFile, TLSKeyFile: keyFile})
	q := new(dns.Msg)
	q.SetQuestion("localhost.", dns.TypeA)
	for _, c := range []*dns.Client{
		{Net: "udp"},
		{Net: "tcp"},
		{Net: "tcp-tls", TLSConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "server.test"}},
	} {
		addr := u.Addr
		if c.Net == "tcp-tls" {
			addr = u.TLSAddr
		}
		c.Timeout = 5 * time.Second
		r, _, err := c.Exchange(q, addr)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.Net, err, u.Logs())
		}
		if len(r.Answer) != 1 || !strings.Contains(r.Answer[0].String(), "127.0.0.1") {
			t.Fatalf("%s: answer %v", c.Net, r.Answer)
		}
	}
}

func TestUnboundConfigStubZones(t *testing.T) {
	conf := unboundConfig("/tmp/x", 5300, 0, UnboundOptions{StubZones: map[string]string{
		"zone.test":  "127.0.0.1:5353",
		"b.example.": "127.0.0.2",
	}})
	for _, want := range []string{
		"interface: 127.0.0.1@5300",
		`local-zone: "test." nodefault`,
		"name: \"zone.test.\"\n  stub-addr: 127.0.0.1@5353",
		"name: \"b.example.\"\n  stub-addr: 127.0.0.2@53",
		"do-not-query-localhost: no",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("config lacks %q:\n%s", want, conf)
		}
	}
	if strings.Contains(conf, "tls-port") {
		t.Error("TLS configured without a certificate")
	}
}
