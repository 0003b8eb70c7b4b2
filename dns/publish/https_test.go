package publish

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/ztls-project/ztls/internal/clock"
	"github.com/ztls-project/ztls/internal/testsupport/dnstest"
	"github.com/ztls-project/ztls/internal/testsupport/testpki"
	"github.com/ztls-project/ztls/tls13"
	"github.com/ztls-project/ztls/zdata"
)

const httpsHost = "www.example.test"

// httpsProfile is a service with BFE keys whose HTTPS record carries four
// Z-data records: the current and the next period's, v1 and v2 twin.
type httpsProfile struct {
	keyType string
	svc     *zdata.Service
	leaf    *x509.Certificate
	recs    []*zdata.Record
}

func newHTTPSProfile(t *testing.T, keyType string, now time.Time) *httpsProfile {
	t.Helper()
	ca := testpki.NewCA(t, "ecdsa-p256")
	l := ca.Issue(t, testpki.LeafOpts{KeyType: keyType, DNSNames: []string{httpsHost}})
	svc, err := zdata.NewService(httpsHost, 443, tls13.Certificate{Chain: l.Chain, PrivateKey: l.Key, Leaf: l.Cert},
		zdata.Options{BFEConnections: 16, BFEFalsePositiveRate: 1.0 / 16}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc.BFEDir = t.TempDir()
	if _, err := svc.GenerateBFE(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Rotate(now); err != nil {
		t.Fatal(err)
	}
	recs := svc.HTTPSRecords(now)
	if len(recs) != 4 {
		t.Fatalf("%s: %d records for the HTTPS record, want 4", keyType, len(recs))
	}
	return &httpsProfile{keyType: keyType, svc: svc, leaf: l.Cert, recs: recs}
}

// sets is the service's TXT and HTTPS RRsets; alpn tells generations of
// the HTTPS record apart.
func (p *httpsProfile) sets(t *testing.T, now time.Time, alpn string) ([]RRSet, *dns.HTTPS) {
	t.Helper()
	rr, err := zdata.ServiceHTTPSRecord(httpsHost, 443, p.recs, now, 5*time.Minute,
		zdata.HTTPSOptions{ALPN: []string{alpn}, TurboUDPPort: 443})
	if err != nil {
		t.Fatal(err)
	}
	var txt []dns.RR
	for _, r := range p.svc.Records(now) {
		txt = append(txt, r.TXTRR(time.Minute))
	}
	return []RRSet{
		{Name: zdata.TXTName(httpsHost, 443), Type: dns.TypeTXT, Records: txt},
		{Name: rr.Hdr.Name, Type: dns.TypeHTTPS, Records: []dns.RR{rr}},
	}, rr
}

// rdata is rr's RDATA on the wire.
func rdata(t *testing.T, rr dns.RR) []byte {
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

// askHTTPS asks server for the service's HTTPS RRset over network (EDNS
// 1232 over UDP) and returns the answer.
func askHTTPS(t *testing.T, server, network string) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(httpsHost+".", dns.TypeHTTPS)
	q.SetEdns0(1232, false)
	r, _, err := (&dns.Client{Net: network, Timeout: 5 * time.Second, UDPSize: 1232}).Exchange(q, server)
	if err != nil {
		t.Fatalf("%s over %s: %v", server, network, err)
	}
	return r
}

// checkHTTPS checks that the answer r carries exactly want, byte for
// byte, and that its Z-data parses to p's records, each verifying for
// the host and port with the leaf.
func (p *httpsProfile) checkHTTPS(t *testing.T, who string, r *dns.Msg, want *dns.HTTPS) *dns.HTTPS {
	t.Helper()
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%s: rcode %s, %d answers, TC=%v", who, dns.RcodeToString[r.Rcode], len(r.Answer), r.Truncated)
	}
	got, ok := r.Answer[0].(*dns.HTTPS)
	if !ok {
		t.Fatalf("%s: answered %v", who, r.Answer[0])
	}
	if !bytes.Equal(rdata(t, got), rdata(t, want)) {
		t.Fatalf("%s: the HTTPS RR changed on the way:\n got %v\nwant %v", who, got, want)
	}
	recs, err := zdata.RecordsFromSVCB(&got.SVCB, 0)
	if err != nil || len(recs) != len(p.recs) {
		t.Fatalf("%s: %d records (%v)", who, len(recs), err)
	}
	for i, r := range recs {
		if err := r.Verify(p.leaf, httpsHost, 443); err != nil {
			t.Fatalf("%s: record %d: %v", who, i, err)
		}
		if r.ZDataHash() != p.recs[i].ZDataHash() {
			t.Fatalf("%s: record %d is not the one published", who, i)
		}
	}
	return got
}

// recordTime is the instant the test's records are made and sized at:
// ten minutes into the current hour, so that the TTL (TTLFor) is the
// whole 5 minutes whatever minute the test runs at, and resolvers cache.
func recordTime() time.Time { return clock.Now().Truncate(time.Hour).Add(10 * time.Minute) }

// primary is a real primary DNS server the test publishes to.
type primary struct {
	name, addr string
	logs       func() string
}

func startPrimaries(t *testing.T, key TSIGKey) []primary {
	t.Helper()
	zone := dnstest.BindZone{Origin: "example.test.", Text: bindZone, AllowUpdate: true}
	bk := &dnstest.BindKey{Name: key.Name, Secret: key.Secret}
	b := dnstest.StartBind(t, dnstest.BindOptions{Zones: []dnstest.BindZone{zone}, Key: bk})
	k := dnstest.StartKnot(t, dnstest.KnotOptions{Zones: []dnstest.BindZone{zone}, Key: bk})
	return []primary{{"BIND 9", b.Addr, b.Logs}, {"Knot DNS", k.Addr, k.Logs}}
}

// TestPublishHTTPSToBindAndKnot: the service's HTTPS RR with four Z-data
// records, TurboTLS's key and alpn, pushed by a TSIG-signed UPDATE to BIND
// 9 and to Knot DNS, comes back from each byte for byte over UDP and TCP,
// and parses to the records published. The default profile's answer
// (ECDSA P-256) fits UDP; an RSA leaf's is over 1232 bytes: truncated
// over UDP, whole over TCP.
func TestPublishHTTPSToBindAndKnot(t *testing.T) {
	key := TSIGKey{Name: "ztls-update.", Secret: testSecret}
	now := recordTime()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range []*httpsProfile{newHTTPSProfile(t, "ecdsa-p256", now), newHTTPSProfile(t, "rsa2048", now)} {
		for _, pr := range startPrimaries(t, key) {
			who := pr.name + ", " + p.keyType
			sets, want := p.sets(t, now, "h2")
			if err := Publish(ctx, pr.addr, "example.test.", key, sets); err != nil {
				t.Fatalf("%s: %v\n%s", who, err, pr.logs())
			}
			tcp := askHTTPS(t, pr.addr, "tcp")
			p.checkHTTPS(t, who+" over TCP", tcp, want)
			udp := askHTTPS(t, pr.addr, "udp")
			size := tcp.Len()
			t.Logf("%s: the HTTPS answer is %d bytes; over UDP TC=%v", who, size, udp.Truncated)
			if size <= 1232 {
				p.checkHTTPS(t, who+" over UDP", udp, want)
			} else if !udp.Truncated {
				t.Fatalf("%s: a %d-byte answer over UDP without TC", who, size)
			}
			if got := rrsetAt(t, pr.addr, zdata.TXTName(httpsHost, 443), dns.TypeTXT); len(got) != len(sets[0].Records) {
				t.Fatalf("%s: %d TXT records beside the HTTPS record", who, len(got))
			}
		}
	}
}

// TestHTTPSThroughResolvers: Unbound and BIND 9 as resolvers, in front of
// BIND 9 and of Knot DNS as primaries, return the HTTPS RR with Z-data
// unchanged (the same RDATA bytes, the same records) over UDP and TCP,
// and cache it: after the primary's record is replaced, the resolver
// still answers the first one, with a TTL no longer than before.
func TestHTTPSThroughResolvers(t *testing.T) {
	key := TSIGKey{Name: "ztls-update.", Secret: testSecret}
	now := recordTime()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, p := range []*httpsProfile{newHTTPSProfile(t, "ecdsa-p256", now), newHTTPSProfile(t, "rsa2048", now)} {
		for _, pr := range startPrimaries(t, key) {
			resolvers := []struct{ name, addr string }{
				{"Unbound", dnstest.StartUnbound(t, dnstest.UnboundOptions{StubZones: map[string]string{"example.test.": pr.addr}}).Addr},
				{"BIND 9 resolver", dnstest.StartBind(t, dnstest.BindOptions{Forward: map[string]string{"example.test.": pr.addr}}).Addr},
			}
			sets, first := p.sets(t, now, "h2")
			if err := Publish(ctx, pr.addr, "example.test.", key, sets); err != nil {
				t.Fatalf("%s: %v", pr.name, err)
			}
			for _, res := range resolvers {
				who := fmt.Sprintf("%s in front of %s, %s", res.name, pr.name, p.keyType)
				network := "udp"
				if p.keyType != "ecdsa-p256" {
					network = "tcp" // over 1232 bytes
				}
				r := askHTTPS(t, res.addr, network)
				if r.Authoritative {
					t.Fatalf("%s: an authoritative answer from the resolver", who)
				}
				got := p.checkHTTPS(t, who+" over "+network, r, first)
				p.checkHTTPS(t, who+" over tcp", askHTTPS(t, res.addr, "tcp"), first)
				if network == "tcp" {
					if udp := askHTTPS(t, res.addr, "udp"); !udp.Truncated {
						t.Fatalf("%s: a %d-byte answer over UDP without TC", who, r.Len())
					}
				}
				ttl := got.Hdr.Ttl
				if ttl == 0 || ttl > first.Hdr.Ttl {
					t.Fatalf("%s: TTL %d, published %d", who, ttl, first.Hdr.Ttl)
				}
				t.Logf("%s: %d-byte answer, TTL %d", who, r.Len(), ttl)
			}
			// The primary now holds another record; the resolvers answer
			// the cached one.
			sets2, second := p.sets(t, now, "http/1.1")
			if err := Publish(ctx, pr.addr, "example.test.", key, sets2); err != nil {
				t.Fatal(err)
			}
			p.checkHTTPS(t, pr.name+" after the second UPDATE", askHTTPS(t, pr.addr, "tcp"), second)
			for _, res := range resolvers {
				who := fmt.Sprintf("%s in front of %s, %s, from its cache", res.name, pr.name, p.keyType)
				got := p.checkHTTPS(t, who, askHTTPS(t, res.addr, "tcp"), first)
				if got.Hdr.Ttl > first.Hdr.Ttl {
					t.Fatalf("%s: TTL %d", who, got.Hdr.Ttl)
				}
			}
		}
	}
}

// An IfUnchanged UPDATE is applied only while the RRset is what Read
// returned: both BIND 9 and Knot DNS refuse it (NXRRSET or YXRRSET,
// IsChanged) and change nothing once someone else changed the set, and
// take it when it was read again.
func TestPublishIfUnchanged(t *testing.T) {
	key := TSIGKey{Name: "ztls-update.", Secret: testSecret}
	now := recordTime()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := newHTTPSProfile(t, "ecdsa-p256", now)
	for _, pr := range startPrimaries(t, key) {
		pub := &Publisher{Server: pr.addr, Zone: "example.test.", Key: key}
		owner := httpsHost + "."
		was, err := pub.Read(ctx, owner, dns.TypeHTTPS)
		if err != nil || len(was) != 0 {
			t.Fatalf("%s: read %v (%v), want nothing yet", pr.name, was, err)
		}
		_, first := p.sets(t, now, "h2")
		set := RRSet{Name: owner, Type: dns.TypeHTTPS, Records: []dns.RR{first}, IfUnchanged: true, Was: was}
		if err := pub.Publish(ctx, []RRSet{set}); err != nil {
			t.Fatalf("%s: %v", pr.name, err)
		}
		// Someone else's edit between a read and the UPDATE: stale Was.
		_, other := p.sets(t, now, "http/1.1")
		for _, stale := range [][]dns.RR{nil, {other}} {
			set := RRSet{Name: owner, Type: dns.TypeHTTPS, Records: []dns.RR{other}, IfUnchanged: true, Was: stale}
			if err := pub.Publish(ctx, []RRSet{set}); !IsChanged(err) {
				t.Fatalf("%s: stale prerequisite (%d records): %v, want NXRRSET or YXRRSET", pr.name, len(stale), err)
			}
			p.checkHTTPS(t, pr.name+" after a refused UPDATE", askHTTPS(t, pr.addr, "tcp"), first)
		}
		was, err = pub.Read(ctx, owner, dns.TypeHTTPS)
		if err != nil || len(was) != 1 {
			t.Fatalf("%s: read %v (%v)", pr.name, was, err)
		}
		set = RRSet{Name: owner, Type: dns.TypeHTTPS, Records: []dns.RR{other}, IfUnchanged: true, Was: was}
		if err := pub.Publish(ctx, []RRSet{set}); err != nil {
			t.Fatalf("%s: read again: %v", pr.name, err)
		}
		p.checkHTTPS(t, pr.name, askHTTPS(t, pr.addr, "tcp"), other)
	}
}
