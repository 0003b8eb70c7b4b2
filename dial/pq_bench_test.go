package dial

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/dns/resolver"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/lab"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/zdata"
)

// The client's CPU from the click for post-quantum ZTLS, beside classical
// ZTLS and a full X25519MLKEM768 handshake, cold and prefetched, is
// prevalidate's BenchmarkClientPQFromClick (on the harness that times
// the click for both, prevalidate/bench_prefetch_test.go); the server's
// is tls13's BenchmarkServerZTLSPostQuantum.

// BenchmarkPQZDataLookup measures the DNS lookup a post-quantum
// connection makes (docs/ztls-spec.md, Section 9.7): the host's A record
// and the TXT answer with the current and next v3 and classical records
// (about 4.2 KB), asked together, against Unbound on loopback with a warm
// cache (a stub zone at the lab's authority), the resolver's own cache
// off. udp: the TXT answer truncated, asked again over the kept-open TCP
// connection; udp-stream: the TXT question over TCP at once
// (Question.Stream, what dial does when it wants v3); tls: everything on
// the kept-open DNS-over-TLS connection. The issue's target: tls within
// 1.05× of udp.
func BenchmarkPQZDataLookup(b *testing.B) {
	w, err := lab.Start(lab.Options{PostQuantum: true})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	ca := testpki.NewCA(b, "ecdsa-p256")
	leaf := ca.Issue(b, testpki.LeafOpts{KeyType: "ecdsa-p256", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	certFile, keyFile := leaf.WritePEM(b, b.TempDir())
	u := dnstest.StartUnbound(b, dnstest.UnboundOptions{StubZones: map[string]string{"ztls.test.": w.DNSAddr},
		TLSCertFile: certFile, TLSKeyFile: keyFile})
	ctx := context.Background()
	for _, v := range []struct {
		name   string
		tr     resolver.Transport
		addr   string
		stream bool
	}{{"udp", resolver.UDP, u.Addr, false}, {"udp-stream", resolver.UDP, u.Addr, true}, {"tls", resolver.TLS, u.TLSAddr, false}} {
		cfg := resolver.Config{Servers: []string{v.addr}, Transport: v.tr, CacheSize: -1, Timeout: 10 * time.Second}
		if v.tr == resolver.TLS {
			cfg.TLSConfig = &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"}
		}
		r, err := resolver.New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		qs := []resolver.Question{{Name: w.Host, Qtype: dns.TypeA},
			{Name: zdata.TXTName(w.Host, w.Port), Qtype: dns.TypeTXT, Stream: v.stream}}
		lookup := func(b *testing.B) {
			answers, err := r.LookupBatch(ctx, qs, nil)
			if err != nil || answers[0].Err != nil || answers[1].Err != nil || len(answers[1].RRs) < 2 {
				b.Fatalf("%s: %v, %+v", v.name, err, answers)
			}
		}
		for range 3 { // warm Unbound's cache and open the stream connections
			lookup(b)
		}
		b.Run(v.name, func(b *testing.B) {
			for b.Loop() {
				lookup(b)
			}
		})
		r.Close()
	}
}
